"""Window pages: list and forms, one analysis, one drift report (chart and table), novelty alerts, the review queue
count; three actors; a fixed number of queries per page."""

from __future__ import annotations

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from accounts import session_users
from accounts.services import Actor
from intents.models import DriftReport, NoveltyAlert, WindowAnalysis
from intents.windows.services import drift_compare, window_analyze
from tests.conftest import logged_in
from tests.intents.windows_helpers import (
    DAY,
    T0,
    activate_taxonomy,
    chosen_embedder,  # noqa: F401 (fixture)
    window_of,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("chosen_embedder")]

LOCAL = "%Y-%m-%dT%H:%M"


def url(name, *args):
    return reverse(f"intents:{name}", args=args)


def post(user, name, *args, **data):
    client = logged_in(user)
    client.get(url("windows"))  # the CSRF cookie, as a browser would have it
    return client.post(url(name, *args), {**data, "csrfmiddlewaretoken": client.cookies["csrftoken"].value})


def html(response) -> str:
    return response.content.decode()


@pytest.fixture
def analyses(operator):
    reviewed = window_of("refund an order", at=T0 - 3 * DAY, run_prefix="demo:rev")
    activate_taxonomy([("intent-refund", "refund an order", [reviewed[0].candidate_id])])
    window_of("refund an order", "refund my order", "change a flight", run_prefix="demo:b")
    window_of("refund my order", "book a hotel", at=T0 + DAY, run_prefix="demo:a")
    actor = Actor(user=operator)
    before = window_analyze(actor=actor, start=T0, end=T0 + DAY)
    after = window_analyze(actor=actor, start=T0 + DAY, end=T0 + 2 * DAY)
    return before, after


@pytest.fixture
def report(operator, analyses):
    before, after = analyses
    return drift_compare(actor=Actor(user=operator), before=before, after=after, matching="medoid")


# -- actors -----------------------------------------------------------------------------------------------------------


def test_anonymous_visitors_are_sent_to_log_in(client, report):
    for name, args in [
        ("windows", ()),
        ("window", (report.before_id,)),
        ("drift", (report.pk,)),
        ("window_alerts", ()),
    ]:
        response = client.get(url(name, *args))
        assert response.status_code == 302 and "/login" in response["Location"]


def test_an_outsider_cannot_use_the_pages(outsider, report):
    response = logged_in(outsider).get(url("windows"))
    assert response.status_code == 302  # an inactive account is not logged in


def test_a_read_only_teammate_reads_everything_but_gets_no_forms(viewer, report):
    page = logged_in(viewer).get(url("windows"))
    assert page.status_code == 200
    assert "Analyse the window" not in html(page) and "Operators analyse" in html(page)
    assert logged_in(viewer).get(url("window", report.before_id)).status_code == 200
    assert logged_in(viewer).get(url("drift", report.pk)).status_code == 200
    alerts = logged_in(viewer).get(url("window_alerts"))
    assert alerts.status_code == 200 and "Promote to review" not in html(alerts)


def test_a_read_only_teammate_cannot_analyse_compare_or_decide(viewer, report):
    response = post(
        viewer,
        "windows",
        start="2025-03-01T00:00",
        end="2025-03-02T00:00",
        threshold=0.82,
        margin=0.03,
        novelty_threshold=0.75,
    )
    assert response.status_code == 403 and "operator role" in html(response)
    response = post(viewer, "window_compare", before=report.before_id, after=report.after_id, matching="identity")
    assert response.status_code == 403
    alert = NoveltyAlert.objects.first()
    response = post(viewer, "window_alert_decide", alert.pk, decision="dismissed")
    assert response.status_code == 403
    assert WindowAnalysis.objects.count() == 2 and DriftReport.objects.count() == 1
    assert NoveltyAlert.objects.get(pk=alert.pk).status == "open"


# -- the operator's forms ---------------------------------------------------------------------------------------------


def test_an_operator_analyses_a_window_from_the_form(operator):
    window_of("refund an order", "change a flight")
    page = logged_in(operator).get(url("windows"))
    assert "Analyse the window" in html(page)
    response = post(
        operator,
        "windows",
        start=T0.strftime(LOCAL),
        end=(T0 + DAY).strftime(LOCAL),
        threshold=0.82,
        margin=0.03,
        novelty_threshold=0.75,
    )
    analysis = WindowAnalysis.objects.get()
    assert response.status_code == 302 and response["Location"] == url("window", analysis.pk)
    assert analysis.candidates_count == 2 and analysis.created_by == operator
    shown = logged_in(operator).get(response["Location"])
    assert "no reviewed taxonomy is active" in html(shown)


def test_bad_bounds_re_render_the_form_with_the_message(operator):
    response = post(
        operator,
        "windows",
        start="2025-03-02T00:00",
        end="2025-03-01T00:00",
        threshold=0.82,
        margin=0.03,
        novelty_threshold=0.75,
    )
    assert response.status_code == 422
    assert "the window must end after it starts" in html(response)
    assert not WindowAnalysis.objects.exists()


def test_an_operator_compares_two_windows(operator, analyses):
    before, after = analyses
    response = post(operator, "window_compare", before=before.pk, after=after.pk, matching="medoid")
    report = DriftReport.objects.get()
    assert response.status_code == 302 and response["Location"] == url("drift", report.pk)
    assert report.matching == "medoid"


# -- what the pages show ----------------------------------------------------------------------------------------------


def test_the_analysis_page_shows_clusters_and_novel_candidates(viewer, analyses):
    before, _ = analyses
    text = html(logged_in(viewer).get(url("window", before.pk)))
    table = text.split('class="table window-clusters"')[1].split("</table>")[0]
    assert "refund an order" in table or "refund my order" in table
    assert re.search(r'<td class="num">2</td>', table)  # the refund cluster's support
    novel = text.split('class="table window-novel"')[1].split("</table>")[0]
    assert "change a flight" in novel and "refund my order" not in novel
    assert novel.count('id="novel-') == 1
    assert "Open" in novel


def test_a_later_analysis_shows_the_alert_raised_earlier(viewer, operator, analyses):
    again = window_analyze(actor=Actor(user=operator), start=T0, end=T0 + DAY)
    novel = html(logged_in(viewer).get(url("window", again.pk))).split('class="table window-novel"')[1]
    assert "Open" in novel and f"window #{analyses[0].pk}" in novel


def test_the_drift_page_draws_mass_per_cluster_with_its_table_and_the_jsd(viewer, report):
    text = html(logged_in(viewer).get(url("drift", report.pk)))
    assert 'data-chart="mass-chart-data"' in text and 'data-chart="jsd-chart-data"' in text
    assert "vendor/chartjs/chart.umd.min.js" in text and "js/charts.js" in text
    island = json.loads(
        re.search(r'<script id="mass-chart-data" type="application/json">(.*?)</script>', text, re.S)[1]
    )
    assert [series["label"] for series in island["series"]] == ["before", "after"]
    assert len(island["labels"]) == len(report.changes) + len(report.retired) + len(report.new)
    table = text.split('class="table chart-table drift-mass"')[1].split("</table>")[0]
    assert table.count("<tr>") == len(island["labels"]) + 1
    assert f"{report.jsd:.4f}" in text


def test_the_drift_reports_table_labels_the_windows_candidate_totals_as_such(viewer, report):
    """Issue 24: the list labelled the two windows' candidate totals "Retired" and "New"."""
    text = html(logged_in(viewer).get(url("windows")))
    table = text.split('class="table intent-drifts"')[1].split("</table>")[0]
    headers = re.findall(r"<th[^>]*>(.*?)</th>", table)
    assert "Candidates before" in headers and "Candidates after" in headers
    assert "Retired" not in headers and "New" not in headers
    cells = re.findall(r"<td[^>]*>(.*?)</td>", table.split(f'id="drift-{report.pk}"')[1].split("</tr>")[0], re.S)
    assert cells[headers.index("Candidates before")] == str(report.before_total)
    assert cells[headers.index("Candidates after")] == str(report.after_total)


def test_the_alerts_page_lets_a_reviewer_dismiss_or_promote(reviewer, analyses):
    page = logged_in(reviewer).get(url("window_alerts"))
    assert "Promote to review" in html(page)
    alert = NoveltyAlert.objects.filter(label="book a hotel").get()
    response = post(reviewer, "window_alert_decide", alert.pk, decision="promoted", note="looks real")
    assert response.status_code == 302
    alert.refresh_from_db()
    assert alert.status == "promoted" and alert.note == "looks real"
    again = post(reviewer, "window_alert_decide", alert.pk, decision="dismissed")
    assert again.status_code == 409


def test_the_review_queue_counts_open_novelty_alerts(reviewer, analyses):
    text = html(logged_in(reviewer).get(reverse("reviews:queue")))
    open_count = NoveltyAlert.objects.filter(status="open").count()
    assert open_count > 0
    assert f"<strong>{open_count}</strong> novelty alert" in text


def test_the_review_queue_says_nothing_without_open_alerts(reviewer):
    assert 'id="novelty-alerts"' not in html(logged_in(reviewer).get(reverse("reviews:queue")))


# -- query counts -----------------------------------------------------------------------------------------------------


def _counts(client, pages) -> dict[str, int]:
    counts = {}
    for name, args in pages:
        session_users.forget()  # the session's user read afresh each time (accounts.session_users)
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url(name, *args)).status_code == 200
        counts[name] = len(queries)
    return counts


def test_each_page_reads_in_a_fixed_number_of_queries(operator, report):
    pages = [("windows", ()), ("window", (report.before_id,)), ("drift", (report.pk,)), ("window_alerts", ())]
    client = logged_in(operator)
    small = _counts(client, pages)
    actor = Actor(user=operator)
    window_of("change my flight", "cancel a subscription", at=T0 + DAY / 2, run_prefix="demo:more")
    more = [window_analyze(actor=actor, start=T0 - k * DAY, end=T0 + 3 * DAY) for k in range(1, 4)]
    drift_compare(actor=actor, before=more[0], after=more[1])
    drift_compare(actor=actor, before=more[0], after=report.before, matching="medoid")
    assert _counts(client, pages) == small
    assert max(small.values()) <= 8, small
