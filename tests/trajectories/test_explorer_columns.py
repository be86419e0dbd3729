"""The explorer's columns chosen by the user and kept (a cookie of that user's own, read on the server), its dense
rows (long texts clamped with the whole text in a title), and the page every htmx request shape gets (issue 24)."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from tests.conftest import logged_in
from tests.factories import user_with
from trajectories.explorer_columns import COOKIE_PATH, cookie_name
from trajectories.run_rows import CHOOSABLE

from .factories import ingest, run_item, step_item

pytestmark = pytest.mark.django_db
LIST = reverse("trajectories:list")
COLUMNS = reverse("trajectories:columns")
LONG_TASK = "A customer asks for a refund on an order that arrived damaged, with photos attached. " * 6


@pytest.fixture
def runs():
    return ingest(
        run_item(external_id="long-one", task=LONG_TASK, steps=[step_item("lookup_policy"), step_item("notify")]),
        run_item(external_id="short-one", task="Change my address", intent="change_address"),
    ).created_ids


def table_classes(response) -> set[str]:
    match = re.search(r'<table class="table runs ?([^"]*)"', response.content.decode())
    assert match, "no runs table"
    return set(match.group(1).split())


def checked_boxes(response) -> set[str]:
    return set(re.findall(r'name="column" value="(\w+)" checked', response.content.decode()))


def choose(client: Client, *columns: str, next_url: str = LIST, **extra):
    return client.post(COLUMNS, {"column": list(columns), "next": next_url}, **extra)


def test_every_column_shows_until_the_user_chooses(viewer, runs):
    response = logged_in(viewer).get(LIST)
    assert table_classes(response) == set()
    assert checked_boxes(response) == set(CHOOSABLE)
    headers = re.findall(r'<th scope="col" class="c-(\w+)', response.content.decode())
    assert headers == ["run", *CHOOSABLE]


def test_a_choice_from_the_plain_form_is_kept_and_the_list_comes_back_as_it_was(viewer, runs):
    client = Client()
    client.force_login(viewer)
    response = choose(client, "task", "outcome", "received", next_url=f"{LIST}?q=refund&sort=oldest")
    assert (response.status_code, response["Location"]) == (302, f"{LIST}?q=refund&sort=oldest")
    cookie = response.cookies[cookie_name(viewer)]
    assert cookie.value == "task.outcome.received" and cookie["path"] == COOKIE_PATH and cookie["httponly"]
    assert cookie["samesite"] == "Lax" and int(cookie["max-age"]) >= 300 * 24 * 3600

    page = client.get(LIST)
    hidden = set(CHOOSABLE) - {"task", "outcome", "received"}
    assert table_classes(page) == {f"hide-{key}" for key in hidden}
    assert checked_boxes(page) == {"task", "outcome", "received"}
    assert client.get(LIST, {"q": "refund"}, HTTP_HX_REQUEST="true").content.decode().count("hide-source") == 1


def test_from_htmx_the_choice_is_kept_without_content(viewer, runs):
    client = Client()
    client.force_login(viewer)
    response = choose(client, "task", HTTP_HX_REQUEST="true")
    assert response.status_code == 204 and not response.content
    assert response.cookies[cookie_name(viewer)].value == "task"


def test_hiding_every_column_keeps_the_run_column(viewer, runs):
    client = Client()
    client.force_login(viewer)
    assert choose(client).cookies[cookie_name(viewer)].value == "none"
    assert table_classes(client.get(LIST)) == {f"hide-{key}" for key in CHOOSABLE}


def test_each_user_keeps_their_own_choice_in_one_browser(viewer, runs):
    other = user_with(username="walt")
    client = Client()
    client.force_login(viewer)
    choose(client, "task")
    client.force_login(other)  # the same browser, its cookies kept
    assert table_classes(client.get(LIST)) == set()
    client.force_login(viewer)
    assert "hide-source" in table_classes(client.get(LIST))


def test_the_choice_outlives_a_logout(viewer, runs):
    client = Client()
    client.force_login(viewer)
    choose(client, "task")
    assert client.post(reverse("accounts:logout")).status_code == 302  # the session ends, the browser's cookies stay
    client.force_login(viewer)
    assert "hide-tools" in table_classes(client.get(LIST))


def test_unknown_columns_are_ignored(viewer, runs):
    client = Client()
    client.force_login(viewer)
    assert choose(client, "task", "run", "<script>").cookies[cookie_name(viewer)].value == "task"
    client.cookies[cookie_name(viewer)] = "tools.nonsense.<b>"
    assert table_classes(client.get(LIST)) == {f"hide-{key}" for key in CHOOSABLE if key != "tools"}


@pytest.mark.parametrize("target", ["https://evil.example/trajectories/", "/accounts/settings/", "//evil.example/"])
def test_the_way_back_is_only_ever_the_list(viewer, target):
    client = Client()
    client.force_login(viewer)
    assert choose(client, "task", next_url=target)["Location"] == LIST


def test_the_chooser_needs_a_login_and_a_post(client, viewer):
    assert choose(client, "task")["Location"].startswith(reverse("accounts:login"))
    client.force_login(viewer)
    assert client.get(COLUMNS)["Location"] == LIST  # its page (config.middleware.PageMethodMiddleware)


def test_long_texts_are_clamped_on_screen_and_whole_in_their_title(viewer, runs):
    html = logged_in(viewer).get(LIST).content.decode()
    cell = re.search(r'<td class="c-task"><span class="clamp" title="(A customer[^"]*)">([^<]*)</span>', html)
    assert cell and cell.group(1).strip() == LONG_TASK.strip()  # whole (up to 1,000 characters)
    assert len(cell.group(2)) == 300 and cell.group(2).endswith("…")
    assert 'class="clip run-ext" title="long-one"' in html
    assert re.search(r'<td class="c-tools"><span class="clamp" title="lookup_policy, notify">', html)


def test_a_history_restore_gets_the_whole_page_and_htmx_the_results(viewer, runs):
    client = logged_in(viewer)
    fragment = client.get(LIST, {"q": "refund"}, HTTP_HX_REQUEST="true")
    restored = client.get(LIST, {"q": "refund"}, HTTP_HX_REQUEST="true", HTTP_HX_HISTORY_RESTORE_REQUEST="true")
    assert "<html" not in fragment.content.decode() and 'id="results"' not in fragment.content.decode()
    page = restored.content.decode()
    assert "<html" in page and 'name="q" value="refund"' in page
    for response in (fragment, restored, client.get(LIST)):
        assert "HX-Request" in response["Vary"]  # a browser's cache never answers the page with the fragment


@pytest.mark.parametrize("size", [3, 30])
def test_the_explorer_with_a_column_choice_costs_a_fixed_number_of_queries(viewer, django_assert_max_num_queries, size):
    ingest(*[run_item(steps=[step_item(), step_item("notify")]) for _ in range(size)])
    client = Client()
    client.force_login(viewer)
    client.cookies[cookie_name(viewer)] = "task.tools"
    with django_assert_max_num_queries(5):  # user, groups (nav), runs, totals, rubric scores
        assert client.get(f"{LIST}?tool=notify").status_code == 200
    with django_assert_max_num_queries(5):
        assert client.get(f"{LIST}?tool=notify", HTTP_HX_REQUEST="true").status_code == 200
    with django_assert_max_num_queries(2):  # the session's user and its groups at most: nothing is stored
        assert choose(client, "task", HTTP_HX_REQUEST="true").status_code == 204


def test_the_address_pushed_to_the_bar_holds_only_what_was_asked(viewer, runs):
    query = "q=refund&kind=production&outcome=&sort=newest&source=&steps_min=2&score_min=abc"
    response = logged_in(viewer).get(f"{LIST}?{query}", HTTP_HX_REQUEST="true")
    assert response["HX-Push-Url"] == f"{LIST}?q=refund&steps_min=2&score_min=abc"  # typed, even invalid, is kept
    assert logged_in(viewer).get(f"{LIST}?kind=production&sort=newest", HTTP_HX_REQUEST="true")["HX-Push-Url"] == LIST
    assert "HX-Push-Url" not in logged_in(viewer).get(f"{LIST}?{query}")  # a whole page is at its own address
