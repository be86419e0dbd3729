"""Run list and run page: logged-in readers see them, outsiders are sent to log in, queries stay fixed."""

import pytest
from django.urls import reverse

from tests.conftest import logged_in

from .factories import ingest, run_item, step_item

pytestmark = pytest.mark.django_db
LIST = reverse("trajectories:list")


def detail(run_id):
    return reverse("trajectories:detail", args=[run_id])


@pytest.fixture
def runs():
    return ingest(
        run_item(
            external_id="a",
            outcome="failure",
            task="Refund the blue shoes",
            steps=[step_item("issue_refund", ok=False)],
        ),
        run_item(external_id="b", source="other", intent="cancel_order", steps=[step_item("cancel_order")]),
        run_item(external_id="c", task="Change my address", intent="change_address"),
    ).created_ids


@pytest.mark.parametrize("who", ["operator", "viewer"])
def test_logged_in_users_see_the_list_and_a_run(request, runs, who):
    client = logged_in(request.getfixturevalue(who))
    page = client.get(LIST)
    assert page.status_code == 200
    assert b"Refund the blue shoes" in page.content and b"Change my address" in page.content
    run_page = client.get(detail(runs[0]))
    assert run_page.status_code == 200
    content = run_page.content.decode()
    assert "issue_refund" in content and "policy: refunds within 30 days" in content and "order_id" in content


def test_outsiders_are_sent_to_log_in(client, outsider, runs):
    for url in (LIST, detail(runs[0])):
        assert client.get(url).status_code == 302
        inactive = logged_in(outsider).get(url)
        assert inactive.status_code == 302 and reverse("accounts:login") in inactive["Location"]


def test_an_unknown_run_is_404(viewer):
    assert logged_in(viewer).get(detail(987654)).status_code == 404


@pytest.mark.parametrize(
    ("query", "shown", "hidden"),
    [
        ("outcome=failure", "Refund the blue shoes", "Change my address"),
        ("source=other", "Refund order", "Change my address"),
        ("intent=change_address", "Change my address", "Refund the blue shoes"),
        ("tool=cancel_order", "Refund order", "Refund the blue shoes"),
        ("q=address", "Change my address", "Refund the blue shoes"),
        ("q=blue+shoes", "Refund the blue shoes", "Change my address"),
    ],
)
def test_filters_narrow_the_list(viewer, runs, query, shown, hidden):
    content = logged_in(viewer).get(f"{LIST}?{query}").content.decode()
    assert shown in content and hidden not in content


def test_htmx_requests_get_only_the_results_fragment(viewer, runs):
    response = logged_in(viewer).get(f"{LIST}?outcome=failure", headers={"HX-Request": "true"})
    content = response.content.decode()
    assert response.status_code == 200 and "Refund the blue shoes" in content
    assert "<html" not in content and 'class="filters"' not in content


def test_paging_walks_older_runs(viewer):
    ingest(*[run_item(task=f"Task number {n:03d}") for n in range(30)])
    client = logged_in(viewer)
    first = client.get(LIST)
    assert "Task number 029" in first.content.decode() and "Task number 004" not in first.content.decode()
    next_url = first.context["next_query"]
    second = client.get(f"{LIST}?{next_url}").content.decode()
    assert "Task number 004" in second and "Task number 029" not in second and "First page" in second


def test_a_bad_cursor_or_filter_shows_a_notice_not_an_error(viewer, runs):
    client = logged_in(viewer)
    response = client.get(f"{LIST}?cursor=garbage")
    assert response.status_code == 200 and "no longer valid" in response.content.decode()
    for query in ("outcome=won", "q=" + "x" * 300):
        response = client.get(f"{LIST}?{query}")
        assert response.status_code == 200 and "not valid" in response.content.decode()
    assert client.get(f"{LIST}?source=%00").status_code == 400  # refused before the view (config.middleware)


@pytest.mark.parametrize("size", [3, 30])
def test_pages_cost_a_fixed_number_of_queries(viewer, django_assert_max_num_queries, size):
    ids = ingest(*[run_item(steps=[step_item(), step_item("notify")]) for _ in range(size)]).created_ids
    client = logged_in(viewer)
    with django_assert_max_num_queries(5):  # user, groups (nav), runs, totals, rubric scores
        assert client.get(f"{LIST}?tool=notify").status_code == 200
    with django_assert_max_num_queries(5):  # user, groups (nav), run, steps, the intent's rubric
        assert client.get(detail(ids[-1])).status_code == 200
