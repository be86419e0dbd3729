"""A form's POST-only address left in the bar (a form re-rendered with its error there, then reopened, bookmarked or
reloaded) is never a blank 405 (issue 24, smaller findings): a GET redirects to the page the form belongs to
(config.middleware.PageMethodMiddleware), any other method a page does not take is the styled 405 page."""

from __future__ import annotations

import re

import pytest
from django.test import Client, RequestFactory
from django.urls import URLPattern, URLResolver, get_resolver, resolve

from tests.conftest import logged_in

NAV = 'aria-label="Main"'


def routes(resolver: URLResolver | None = None, prefix: str = ""):
    for entry in (resolver or get_resolver()).url_patterns:
        route = prefix + str(entry.pattern).removeprefix("^")
        if isinstance(entry, URLResolver):
            yield from routes(entry, route)
        elif isinstance(entry, URLPattern):
            yield route


def dummy_path(route: str) -> str:
    return "/" + re.sub(r"<(?:(\w+):)?\w+>", lambda m: "1" if m.group(1) == "int" else "x", route)


def refuses_get(path: str, user) -> bool:
    """Whether the view itself (no middleware) answers a GET with 405: a POST-only address."""
    request = RequestFactory().get(path)
    request.user = user
    match = resolve(path)
    try:
        return match.func(request, *match.args, **match.kwargs).status_code == 405
    except Exception:  # a page whose placeholder object does not exist, a view that needs the middleware: not 405
        return False


def post_only_addresses(user) -> list[str]:
    return [
        dummy_path(route)
        for route in routes()
        if not route.startswith(("api/v1", "admin/")) and refuses_get(dummy_path(route), user)
    ]


def test_every_post_only_address_opened_with_get_leads_to_a_page(admin_user):
    addresses = post_only_addresses(admin_user)
    assert len(addresses) >= 15, addresses  # the sweep found the forms' addresses
    client = Client()
    client.force_login(admin_user)
    blank = []
    for path in addresses:
        response = client.get(path)
        if response.status_code == 302:
            page = client.get(response["Location"])
            # the page it belongs to (or, for a placeholder id, that page's styled 404): a page with the navigation
            if page.status_code == 405 or NAV not in page.content.decode():
                blank.append(f"{path} → {response['Location']} ({page.status_code})")
            assert "POST" in response["Allow"]  # what the address itself takes, said on the redirect
        elif NAV not in response.content.decode():
            blank.append(f"{path}: {response.status_code}")
    assert not blank, blank


@pytest.mark.parametrize(
    ("path", "page"),
    [
        ("/procedures/mine/", "/procedures/"),
        ("/procedures/versions/5/amend/", "/procedures/versions/5/"),
        ("/reviews/5/judge/", "/reviews/5/"),
        ("/reviews/rollback/", "/reviews/"),
        ("/intents/taxonomy/draft/", "/intents/taxonomy/"),
        ("/intents/taxonomy/review/5/judge/", "/intents/taxonomy/review/"),
        ("/intents/windows/drift/", "/intents/windows/"),
        ("/graphs/two-hop/guidance/", "/graphs/two-hop/"),
        ("/reviews/rubrics/runs/5/assess/", "/trajectories/5/"),  # not the panel's fragment above it
        ("/trajectories/columns", "/trajectories/"),
        ("/accounts/logout/", "/"),
    ],
)
def test_a_post_only_address_redirects_to_the_page_of_its_form(admin_user, path, page, django_assert_max_num_queries):
    client = Client()
    client.force_login(admin_user)
    with django_assert_max_num_queries(2):  # the session's user (login_required) at most: the page is found by URL
        response = client.get(path)
    assert (response.status_code, response["Location"]) == (302, page)
    assert client.head(path)["Location"] == page


def test_a_form_error_left_in_the_bar_reopens_as_its_page(operator):
    """Mining with a bad share re-renders the procedures page at /procedures/mine/; reopening that address is the
    procedures page again, not an empty 405."""
    client = logged_in(operator)
    client.get("/procedures/")  # the CSRF cookie
    token = client.cookies["csrftoken"].value
    failed = client.post(
        "/procedures/mine/", {"intent": "refund_request", "held_out_share": "7", "seed": "1"}, HTTP_X_CSRFTOKEN=token
    )
    assert failed.status_code == 422 and "Held-out share" in failed.content.decode()
    reopened = client.get("/procedures/mine/", follow=True)
    assert reopened.redirect_chain == [("/procedures/", 302)]
    assert reopened.status_code == 200 and NAV in reopened.content.decode()


def test_another_method_a_page_does_not_take_is_the_styled_405(viewer):
    client = Client()
    client.force_login(viewer)
    response = client.put("/procedures/mine/")
    page = response.content.decode()
    assert response.status_code == 405 and response["Allow"] == "POST"
    assert NAV in page and "does not take a PUT request" in page and 'href="/procedures/"' in page


def test_the_apis_405_is_its_error_body_never_a_line_of_text(client, db):
    response = client.delete("/api/v1/trajectories")
    body = response.json()
    assert response.status_code == 405 and set(response["Allow"].split(", ")) == {"GET", "POST"}
    assert body["code"] == "method_not_allowed" and body["message"] == "DELETE is not allowed on /api/v1/trajectories"
    assert body["details"] == {"allowed": response["Allow"]}


def test_a_page_that_answers_get_is_untouched(viewer):
    client = Client()
    client.force_login(viewer)
    assert client.get("/procedures/").status_code == 200
