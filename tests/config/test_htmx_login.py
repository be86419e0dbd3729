"""An htmx request whose session has ended gets the whole login page (HX-Redirect), never the login form inside the
box it would have filled (issue 24, smaller findings): on every htmx endpoint, fixed once in
config.middleware.HtmxLoginMiddleware."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

HTMX = {"HTTP_HX_REQUEST": "true"}
LOGIN = "/accounts/login/"


def login_target(response) -> tuple[str, str]:
    """(path, next) of the HX-Redirect of an answer."""
    assert response.status_code == 204, (response.status_code, response.get("Location"))
    assert not response.content
    target = urlsplit(response["HX-Redirect"])
    return target.path, parse_qs(target.query)["next"][0]


def test_an_htmx_filter_without_a_session_redirects_the_whole_page_to_the_login(client, db):
    response = client.get(
        "/trajectories/?q=refund&sort=oldest", HTTP_HX_CURRENT_URL="http://testserver/trajectories/", **HTMX
    )
    assert "Location" not in response
    assert login_target(response) == (LOGIN, "/trajectories/?q=refund&sort=oldest")


def test_a_fragment_polled_by_a_page_comes_back_to_that_page(client, db):
    page = "http://testserver/trajectories/?q=refund&steps_min=1"
    response = client.get("/trajectories/totals?q=refund&steps_min=1", HTTP_HX_CURRENT_URL=page, **HTMX)
    assert login_target(response) == (LOGIN, "/trajectories/?q=refund&steps_min=1")


def test_an_htmx_form_post_without_a_session_redirects_the_whole_page(client, db):
    page = "http://testserver/trajectories/12/"
    response = client.post("/reviews/rubrics/runs/12/assess/", {"version": "1"}, HTTP_HX_CURRENT_URL=page, **HTMX)
    assert login_target(response) == (LOGIN, "/trajectories/12/")


def test_a_page_of_another_site_is_never_the_way_back(client, db):
    response = client.get("/trajectories/totals", HTTP_HX_CURRENT_URL="https://evil.example/phish", **HTMX)
    assert login_target(response) == (LOGIN, "/")


def test_a_plain_request_still_gets_the_ordinary_redirect(client, db):
    response = client.get("/trajectories/?q=refund")
    assert response.status_code == 302 and response["Location"] == "/accounts/login/?next=/trajectories/%3Fq%3Drefund"
    assert "HX-Redirect" not in response


def test_a_signed_in_htmx_request_gets_its_fragment(client, viewer):
    client.force_login(viewer)
    response = client.get("/trajectories/?q=refund", **HTMX)
    assert response.status_code == 200 and "HX-Redirect" not in response
    assert "<html" not in response.content.decode()


def test_a_redirect_elsewhere_is_left_alone(client, operator):
    # An htmx request answered with a redirect that is not the login's keeps it (htmx follows it itself).
    client.force_login(operator)
    response = client.get("/procedures/mine/", **HTMX)  # a POST-only address: its page (config.middleware)
    assert response.status_code == 302 and response["Location"] == "/procedures/" and "HX-Redirect" not in response


def _routes(resolver: URLResolver | None = None, prefix: str = ""):
    for entry in (resolver or get_resolver()).url_patterns:
        route = prefix + str(entry.pattern).removeprefix("^")
        if isinstance(entry, URLResolver):
            yield from _routes(entry, route)
        elif isinstance(entry, URLPattern):
            yield route


def _dummy(route: str) -> str:
    return "/" + re.sub(r"<(?:(\w+):)?\w+>", lambda m: "1" if m.group(1) == "int" else "x", route)


@pytest.mark.parametrize("method", ["get", "post"])
def test_no_address_sends_an_htmx_request_to_the_login_inside_a_fragment(db, method):
    """Every address of the URL conf, asked by htmx without a session: never the redirect htmx would follow into
    the box (the login page's own address excepted: it is the login)."""
    client = Client()
    leaking = []
    for route in _routes():
        path = _dummy(route)
        if route.startswith(("api/v1", "admin/")) or path.startswith(LOGIN):
            continue
        response = getattr(client, method)(path, HTTP_HX_CURRENT_URL="http://testserver/", **HTMX)
        if response.status_code in (301, 302, 303, 307, 308) and urlsplit(response["Location"]).path == LOGIN:
            leaking.append(f"{method.upper()} {path}")
    assert not leaking, leaking
