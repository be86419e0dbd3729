"""The dashboard: counts, the latest runs and the latest activity, in a fixed number of queries."""

from unittest import mock

import pytest
from django.db import connection, transaction
from django.urls import reverse

from accounts.services import Actor, audit_record
from llm import selectors as llm_selectors
from llm.core import ModelRequest, ModelResponse
from llm.services import model_call_start, model_call_succeed
from reviews.models import PromotionRequest, PromotionStatus
from tests.conftest import logged_in
from tests.trajectories.factories import ingest, run_item, step_item

DASHBOARD = "/"


def make_runs(success: int, failure: int = 0) -> None:
    items = [run_item(outcome="success") for _ in range(success)]
    items += [run_item(outcome="failure", steps=[step_item("lookup_policy", ok=False)]) for _ in range(failure)]
    ingest(*items)


def make_model_calls(count: int) -> None:
    request = ModelRequest(role="demo", system="be brief", parts=("hello",), max_tokens=16)
    for _ in range(count):
        call = model_call_start(role="demo", model_id="scripted-demo", provider="scripted", request=request)
        model_call_succeed(call=call, response=ModelResponse(text="hi"))


def make_events(count: int, actor) -> None:
    for number in range(count):
        with transaction.atomic():
            audit_record(actor=Actor(user=actor), verb="demo.touch", target=("demo.thing", str(number)))


def make_promotion_requests(count: int, proposer, status: str = PromotionStatus.OPEN) -> None:
    PromotionRequest.objects.bulk_create(
        PromotionRequest(
            kind="procedure_version",
            candidate_id=f"{status}-{number}",
            parent_key="1",
            title=f"Refund v{number}",
            proposer=proposer,
            rationale="better",
            status=status,
        )
        for number in range(count)
    )


def counts_of(response) -> dict[str, int]:
    return {stat.label: stat.value for stat in response.context["counts"]}


def test_it_counts_runs_by_outcome_steps_and_model_calls(operator):
    make_runs(success=2, failure=1)
    make_model_calls(2)

    response = logged_in(operator).get(DASHBOARD)

    assert response.status_code == 200
    counts = counts_of(response)
    assert counts["Runs"] == 3
    assert counts["Successful runs"] == 2
    assert counts["Failed runs"] == 1
    assert counts["Steps"] == 2 * 2 + 1
    assert counts["Model calls"] == 2


def model_calls_stat(response):
    return next(stat for stat in response.context["counts"] if stat.label == "Model calls")


def analyse_the_ledger() -> None:
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE llm_modelcall")


def test_it_counts_the_model_calls_exactly_up_to_its_bound(operator, monkeypatch):
    monkeypatch.setattr(llm_selectors, "COUNTED_UP_TO", 3)
    make_model_calls(3)

    stat = model_calls_stat(logged_in(operator).get(DASHBOARD))

    assert (stat.value, stat.qualifier) == (3, "")


@pytest.mark.postgres
def test_beyond_its_bound_it_shows_postgresqls_estimate_of_the_ledger(operator, monkeypatch):
    monkeypatch.setattr(llm_selectors, "COUNTED_UP_TO", 3)
    make_model_calls(5)
    analyse_the_ledger()  # what autovacuum does as a table grows

    response = logged_in(operator).get(DASHBOARD)

    stat = model_calls_stat(response)
    assert (stat.value, stat.qualifier) == (5, "about")
    html = response.content.decode()
    assert 'aria-label="about 5" title="about 5"><span class="card-qualifier">≈</span>5</div>' in html


@pytest.mark.postgres
def test_beyond_its_bound_with_a_stale_estimate_it_says_more_than_the_bound(operator, monkeypatch):
    monkeypatch.setattr(llm_selectors, "COUNTED_UP_TO", 3)
    make_model_calls(2)
    analyse_the_ledger()  # the estimate says 2
    make_model_calls(3)

    response = logged_in(operator).get(DASHBOARD)

    stat = model_calls_stat(response)
    assert (stat.value, stat.qualifier) == (3, "more than")
    html = response.content.decode()
    assert 'aria-label="more than 3" title="more than 3">3<span class="card-qualifier">+</span></div>' in html


def test_beyond_its_bound_without_an_estimate_it_says_more_than_the_bound(db, monkeypatch):
    """SQLite keeps no estimate of a table's rows."""
    monkeypatch.setattr(llm_selectors, "COUNTED_UP_TO", 3)
    make_model_calls(5)

    with mock.patch.object(connection, "vendor", "sqlite"):
        size = llm_selectors.model_call_count()

    assert size == llm_selectors.LedgerSize(3, "more than")


def test_it_shows_an_empty_state_before_any_run(operator):
    response = logged_in(operator).get(DASHBOARD)

    assert response.status_code == 200
    assert counts_of(response)["Runs"] == 0
    assert b"No runs yet" in response.content


def test_it_links_the_five_newest_runs(operator):
    make_runs(success=7)

    response = logged_in(operator).get(DASHBOARD)

    recent = response.context["recent_runs"]
    assert len(recent) == 5
    assert [run.pk for run in recent] == sorted((run.pk for run in recent), reverse=True)
    for run in recent:
        assert reverse("trajectories:detail", args=[run.pk]).encode() in response.content


def test_it_lists_the_latest_activity_newest_first(operator, admin_user):
    make_events(12, actor=admin_user)

    response = logged_in(operator).get(DASHBOARD)

    events = response.context["recent_events"]
    assert len(events) == 10
    assert events[0].target_id == "11"
    assert b"demo.touch" in response.content


def test_activity_about_a_run_links_to_the_runs_page(operator):
    make_runs(success=1)
    run_id = logged_in(operator).get(DASHBOARD).context["recent_runs"][0].pk
    with transaction.atomic():
        audit_record(actor=Actor(user=operator), verb="run.note", target=("trajectories.run", str(run_id)))

    response = logged_in(operator).get(DASHBOARD)

    event = response.context["recent_events"][0]
    assert event.verb == "run.note"
    assert event.target_url == reverse("trajectories:detail", args=[run_id])


def test_it_counts_open_reviews_and_links_to_the_queue(operator):
    make_promotion_requests(2, operator)
    make_promotion_requests(1, operator, status=PromotionStatus.APPROVED)
    make_promotion_requests(3, operator, status=PromotionStatus.APPLIED)

    response = logged_in(operator).get(DASHBOARD)

    stat = next(stat for stat in response.context["counts"] if stat.label == "Open reviews")
    assert stat.value == 3
    assert stat.url == reverse("reviews:queue")
    assert f'href="{stat.url}"'.encode() in response.content


@pytest.mark.parametrize("size", [3, 30])
def test_it_takes_a_fixed_number_of_queries(operator, admin_user, size, django_assert_max_num_queries):
    make_runs(success=size, failure=size)
    make_model_calls(size)
    make_events(size, actor=admin_user)
    make_promotion_requests(size, operator)
    client = logged_in(operator)

    # user, groups (nav) (the session is read from the cache); the run counts with the evaluation runs (all-time
    # totals), model calls, open reviews, recent runs, recent activity; for every chart the open days' totals, and
    # the closed days' the first time this process draws the window (trajectories.closed_days);
    # tests/dashboard/test_charts_dashboard.py checks the number stays the same with data.
    with django_assert_max_num_queries(9):
        response = client.get(DASHBOARD)
    with django_assert_max_num_queries(8):
        again = client.get(DASHBOARD)

    assert response.status_code == 200 and again.status_code == 200
    assert counts_of(response)["Runs"] == counts_of(again)["Runs"] == 2 * size


def test_a_read_only_user_sees_the_dashboard(viewer):
    make_runs(success=1)

    response = logged_in(viewer).get(DASHBOARD)

    assert response.status_code == 200
    assert counts_of(response)["Runs"] == 1


@pytest.mark.parametrize("who", ["anonymous", "inactive"])
def test_outsiders_are_sent_to_the_login_page(client, outsider, who):
    if who == "inactive":
        client.force_login(outsider)

    response = client.get(DASHBOARD)

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("accounts:login"))


def test_the_health_check_still_answers(client, db):
    assert client.get("/healthz").status_code == 200


def test_pages_say_when_the_scripted_model_answers(operator, settings):
    settings.ANTHROPIC_API_KEY = ""
    assert b"scripted demo model answers" in logged_in(operator).get(DASHBOARD).content

    settings.ANTHROPIC_API_KEY = "sk-ant-test"
    assert b"scripted demo model answers" not in logged_in(operator).get(DASHBOARD).content


def test_the_navigation_marks_the_current_page_and_shows_audit_to_admins_only(operator, admin_user):
    page = logged_in(operator).get(DASHBOARD).content.decode()
    assert 'href="/" aria-current="page"' in page
    assert reverse("accounts:audit") not in page

    assert reverse("accounts:audit") in logged_in(admin_user).get(DASHBOARD).content.decode()
