"""Evolution pages: runs list and start form, run page (live polling, cancel, charts, propose the accepted head), the
round inspector, the rejection memory; three actors; a fixed number of queries per page."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from accounts import session_users
from accounts.models import AuditEvent
from graphs.core.evaluation import Evaluation, TaskOutcome
from graphs.core.gates import ObjectiveGate
from graphs.core.objectives import MetricSpec, ObjectiveContext, ObjectiveSpec
from graphs.models import EvolutionRound, EvolutionRun
from tests.conftest import logged_in
from tests.graphs.evolution_helpers import make_lab, run_to_end, start

pytestmark = pytest.mark.django_db

POLL = 'hx-trigger="every 2s"'


@pytest.fixture
def lab():
    return make_lab()


@pytest.fixture
def finished(lab, operator):
    """A 4-round two-hop run on the skeleton: accepted, structural_failure, rejected, duplicate_candidate."""
    return run_to_end(start(lab, operator))


def url(name, *args):
    return reverse(f"graphs:{name}", args=args)


def get(user, name, *args, **query):
    return logged_in(user).get(url(name, *args), query)


def post(user, name, *args, **data):
    client = logged_in(user)
    client.get(url("evolutions", args[0]))  # the CSRF cookie, as a browser would have it
    return client.post(url(name, *args), {**data, "csrfmiddlewaretoken": client.cookies["csrftoken"].value})


def htmx_get(user, name, *args):
    return logged_in(user).get(url(name, *args), headers={"HX-Request": "true"})


def html(response) -> str:
    return response.content.decode()


# -- actors -----------------------------------------------------------------------------------------------------------


def test_anonymous_visitors_are_sent_to_log_in(client, finished):
    pages = [
        ("evolutions", ("lab",)),
        ("evolution", ("lab", finished.pk)),
        ("evolution_round", ("lab", finished.pk, 1)),
        ("rejections", ("lab",)),
    ]
    for name, args in pages:
        response = client.get(url(name, *args))
        assert response.status_code == 302 and "login" in response["Location"], name
    for name, args in [("evolutions", ("lab",)), ("evolution_cancel", ("lab", finished.pk))]:
        response = client.post(url(name, *args), {"rounds": 1, "evaluator": "two-hop", "gate": "tie"})
        assert response.status_code == 302 and "login" in response["Location"], name
    assert EvolutionRun.objects.count() == 1


def test_an_inactive_account_cannot_see_the_pages(outsider, finished):
    assert get(outsider, "evolution", "lab", finished.pk).status_code == 302


def test_a_viewer_reads_every_page_but_sees_no_start_form_and_no_cancel_button(viewer, lab):
    run = start(lab)
    for name, args in [("evolutions", ("lab",)), ("evolution", ("lab", run.pk)), ("rejections", ("lab",))]:
        assert get(viewer, name, *args).status_code == 200, name
    listing = html(get(viewer, "evolutions", "lab"))
    assert "Start the run" not in listing and "Operators start and cancel runs" in listing
    assert "Cancel the run" not in html(get(viewer, "evolution", "lab", run.pk))


def test_a_viewer_who_posts_the_start_form_gets_403_with_the_page_and_nothing_starts(viewer, lab):
    response = post(viewer, "evolutions", "lab", rounds=2, evaluator="two-hop", gate="tie")
    assert response.status_code == 403
    assert "needs the operator role" in html(response) and "<h1>Evolution runs" in html(response)
    assert not EvolutionRun.objects.exists()


def test_a_viewer_who_posts_cancel_gets_403_and_the_run_goes_on(viewer, lab):
    run = start(lab)
    response = post(viewer, "evolution_cancel", "lab", run.pk)
    assert response.status_code == 403 and "needs the operator role" in html(response)
    run.refresh_from_db()
    assert run.status == "queued"


def test_an_unknown_workspace_run_or_round_is_404(viewer, finished):
    make_lab("other")
    assert get(viewer, "evolutions", "nope").status_code == 404
    assert get(viewer, "evolution", "other", finished.pk).status_code == 404  # the run belongs to lab
    assert get(viewer, "evolution", "lab", 999).status_code == 404
    assert get(viewer, "evolution_round", "lab", finished.pk, 99).status_code == 404


# -- start ------------------------------------------------------------------------------------------------------------


def test_an_operator_starts_a_run_from_the_form_and_lands_on_its_page(operator, lab):
    response = post(
        operator, "evolutions", "lab", rounds=4, evaluator="two-hop", gate="strict", minimum_delta="0.05",
        max_model_calls="10", max_seconds="600",
    )  # fmt: skip
    run = EvolutionRun.objects.get()
    assert response.status_code == 302 and response["Location"] == url("evolution", "lab", run.pk)
    assert (run.rounds_planned, run.evaluator, run.started_by, run.status) == (4, "two-hop", operator, "queued")
    assert run.gate == {"kind": "strict", "minimum_delta": 0.05}
    assert run.budget["max_model_calls"] == 10 and run.budget["max_seconds"] == 600.0
    assert run.budget["max_evaluations"] is None
    assert AuditEvent.objects.filter(verb="evolution.start").count() == 1


def test_the_start_form_offers_the_evaluators_and_gates(operator, lab):
    page = html(get(operator, "evolutions", "lab"))
    assert 'value="two-hop"' in page and 'value="agents"' in page
    for gate in ("tie", "strict", "paired"):
        assert f'value="{gate}"' in page
    assert 'name="max_output_tokens"' in page and 'name="minimum_delta"' in page


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"rounds": "0"}, "greater than or equal to 1"),
        ({"rounds": "many"}, "Enter a whole number"),
        ({"rounds": "51"}, "less than or equal to 50"),
        ({"evaluator": "crystal-ball"}, "Select a valid choice"),
        ({"gate": "objective"}, "the objective gate needs this document"),
        ({"gate": "vibes"}, "Select a valid choice"),
        ({"minimum_delta": "0.1"}, "applies to the strict gate only"),
        ({"gate": "paired", "min_win_probability": "0.2"}, "greater than or equal to 0.5"),
        ({"max_model_calls": "-1"}, "greater than or equal to 0"),
        ({"max_seconds": "soon"}, "Enter a whole number"),
    ],
)
def test_bad_start_input_re_renders_the_form_with_the_message(operator, lab, data, message):
    response = post(operator, "evolutions", "lab", **{"rounds": "4", "evaluator": "two-hop", "gate": "tie", **data})
    assert response.status_code == 422
    assert message in html(response) and "Start the run" in html(response)
    assert not EvolutionRun.objects.exists()


def test_a_refused_start_is_shown_on_the_form(operator, lab):
    first = start(lab)
    response = post(operator, "evolutions", "lab", rounds="2", evaluator="two-hop", gate="tie")
    assert response.status_code == 422
    assert "has a run in progress; wait for it or cancel it" in html(response)
    assert list(EvolutionRun.objects.values_list("pk", flat=True)) == [first.pk]


def test_a_refusal_of_the_agents_evaluator_without_tasks_is_shown_on_the_form(operator, lab):
    response = post(operator, "evolutions", "lab", rounds="2", evaluator="agents", gate="tie")
    assert response.status_code == 422 and "the agents evaluator needs tasks" in html(response)


# -- live progress ----------------------------------------------------------------------------------------------------


def test_the_list_and_the_run_page_poll_while_the_run_is_open_and_stop_when_it_ends(operator, lab):
    run = start(lab, operator)
    listing = html(get(operator, "evolutions", "lab"))
    assert POLL in listing and "Queued" in listing and "0/4" in listing
    page = html(get(operator, "evolution", "lab", run.pk))
    assert POLL in page and f'hx-get="{url("evolution", "lab", run.pk)}"' in page

    fragment = html(htmx_get(operator, "evolution", "lab", run.pk))  # htmx asks for the live part only
    assert fragment.lstrip().startswith('<div id="run-live"') and "<html" not in fragment and POLL in fragment
    runs_fragment = html(htmx_get(operator, "evolutions", "lab"))
    assert runs_fragment.lstrip().startswith('<div id="runs"') and POLL in runs_fragment

    run_to_end(run)
    fragment = html(htmx_get(operator, "evolution", "lab", run.pk))
    assert "hx-trigger" not in fragment and "Succeeded" in fragment and "4/4" in fragment
    assert "hx-trigger" not in html(htmx_get(operator, "evolutions", "lab"))
    assert "hx-trigger" not in html(get(operator, "evolution", "lab", run.pk))


def test_a_running_run_shows_its_progress(operator, lab):
    from graphs.evolution.services import evolution_step

    run = start(lab, operator)
    evolution_step(run_id=run.pk, worker="t")  # the baseline
    evolution_step(run_id=run.pk, worker="t")  # round 1
    page = html(get(operator, "evolution", "lab", run.pk))
    assert POLL in page and "Running" in page and "1/4" in page and "baseline 0.5000 → best 1.0000" in page
    assert "Cancel the run" in page
    assert "Propose it for activation once the run has ended." in page


def test_the_runs_list_shows_each_run_with_status_round_calls_cost_scores_and_who(operator, finished):
    page = html(get(operator, "evolutions", "lab"))
    row = re.search(rf'<tr id="run-{finished.pk}">(.*?)</tr>', page, re.S).group(1)
    assert 'badge-succeeded">Succeeded' in row and "4/4" in row and ">4</td>" in row
    assert "0.5000 → 1.0000" in row and "otto" in row and "two-hop · tie" in row and "0.0000" in row


# -- cancel -----------------------------------------------------------------------------------------------------------


def test_an_operator_cancels_an_open_run_and_a_second_cancel_is_refused(operator, lab):
    run = start(lab, operator)
    response = post(operator, "evolution_cancel", "lab", run.pk)
    assert response.status_code == 302 and response["Location"] == url("evolution", "lab", run.pk)
    run.refresh_from_db()
    assert run.status == "cancelled" and run.stopped_reason == "cancelled"
    page = html(get(operator, "evolution", "lab", run.pk))
    assert "cancelled" in page and POLL not in page and "Cancel the run" not in page

    again = post(operator, "evolution_cancel", "lab", run.pk)
    assert again.status_code == 409 and "has ended already" in html(again)


def test_cancel_is_post_only(operator, lab):
    run = start(lab, operator)
    response = get(operator, "evolution_cancel", "lab", run.pk)  # a GET cancels nothing: it opens the run's page
    assert response.status_code == 302 and response["Location"] == f"/graphs/lab/evolutions/{run.pk}/"
    assert response["Allow"] == "POST"


# -- the run page -----------------------------------------------------------------------------------------------------


def test_the_run_page_shows_summary_timeline_charts_and_tables(operator, finished):
    page = html(get(operator, "evolution", "lab", finished.pk))
    assert "Succeeded" in page and "<code>max_rounds</code>" in page
    assert "4 model call(s)" in page and "3 evaluation(s)" in page and "output token(s)" in page
    assert "duplicate candidate: identical to the candidate of iteration 3" in page  # a warning
    for iteration, outcome in [(1, "accepted"), (2, "structural_failure"), (3, "rejected"), (4, "duplicate_candidate")]:
        row = re.search(rf'<tr id="round-{iteration}">(.*?)</tr>', page, re.S).group(1)
        assert f">{outcome}</span>" in row
        assert url("evolution_round", "lab", finished.pk, iteration) in row
    assert "+3 −0 nodes +5 −1 edges" in page and "+0 −0 nodes +0 −1 edges" in page
    assert "0.5000 → 1.0000" in page and "1.0000 → 0.5000" in page
    accepted = EvolutionRound.objects.get(run=finished, outcome="accepted").graph_revision
    assert f"#{accepted.seq} <code>{accepted.digest[:12]}</code>" in page
    assert "same as round 3" in page
    # one charting library, each chart's numbers in a table beside it
    assert "vendor/chartjs/chart.umd.min.js" in page and "js/charts.js" in page
    assert '<script id="rounds-chart-data" type="application/json">' in page
    assert '"labels": ["baseline", "round 1", "round 2", "round 3", "round 4"]' in page
    assert '"data": [0.5, 1.0, 1.0, 1.0, 1.0], "stepped": true' in page  # retained after each round
    assert '"data": [null, 1.0, null, 0.5, null], "points_only": true' in page  # candidates
    table = re.search(r'aria-label="Scores per round">(.*?)</table>', page, re.S).group(1)
    assert '<td>round 3</td><td class="num">1.0000</td><td class="num">0.5000</td><td>rejected</td>' in table
    assert '<script id="runs-chart-data" type="application/json">' in page
    assert 'aria-label="Scores per round"' in page and 'aria-label="Scores per run"' in page


def test_the_run_page_links_the_accepted_head_to_the_propose_form(operator, reviewer, viewer, finished):
    head = EvolutionRound.objects.get(run=finished, outcome="accepted").graph_revision
    link = f"{reverse('reviews:propose')}?kind=graph_revision&amp;candidate_id={head.pk}"
    page = html(get(operator, "evolution", "lab", finished.pk))
    assert link in page and "Propose for activation" in page
    assert f"revision <strong>#{head.seq} <code>{head.digest[:12]}</code></strong>" in page
    assert link in html(get(reviewer, "evolution", "lab", finished.pk))
    assert link not in html(get(viewer, "evolution", "lab", finished.pk))

    form = logged_in(operator).get(reverse("reviews:propose"), {"kind": "graph_revision", "candidate_id": head.pk})
    assert form.status_code == 200


def test_a_run_that_accepted_nothing_offers_no_proposal(operator, lab):
    run = start(lab, operator)
    run = run_to_end(run)  # the spec's scenario: round 1 accepts, so take a later run with no accept
    later = run_to_end(start(lab, operator, rounds=1))
    assert not later.rounds.filter(outcome="accepted").exists()
    page = html(get(operator, "evolution", "lab", later.pk))
    assert "Propose for activation" not in page
    assert f"run {run.pk}</a>" in page and f"run {later.pk}</a>" in page  # both in the across-runs table


# -- the round inspector ----------------------------------------------------------------------------------------------


def test_the_inspector_of_a_structural_failure_lists_every_diagnostic_and_the_edits(viewer, finished):
    page = html(get(viewer, "evolution_round", "lab", finished.pk, 2))
    assert "structural_failure" in page
    assert "<code>missing_endpoint</code>" in page and 'badge-error">error' in page
    assert "references the missing node &#x27;verify_answer&#x27;" in page
    assert "<code>answer -LEADS_TO-&gt; verify_answer</code>" in page
    assert "<code>answer</code> —LEADS_TO→ <code>verify_answer</code>" in page  # the edit, readable
    assert "&quot;target&quot;: &quot;verify_answer&quot;" in page  # and as JSON
    assert "the edits failed the structural checks" in page
    assert page.count('<pre class="mermaid"') == 1  # the base only
    assert "No gate decision: the candidate failed the structural checks" in page


def test_the_inspector_of_a_rejected_round_draws_both_graphs_the_diff_and_the_decision(viewer, finished):
    page = html(get(viewer, "evolution_round", "lab", finished.pk, 3))
    candidate = EvolutionRound.objects.get(run=finished, iteration=3).candidate_digest[:12]
    head = EvolutionRound.objects.get(run=finished, iteration=1).graph_revision
    assert page.count('<pre class="mermaid"') == 2 and "vendor/mermaid/mermaid.min.js" in page
    assert f"Base: #{head.seq} {head.digest[:12]}" in page and f"Candidate: {candidate}" in page
    assert "n3 --&gt;|PROVIDES_INPUT_FOR| n4" in page  # the base keeps read → search; the candidate drops it
    assert '<pre class="graph-diff" id="round-diff" tabindex="0"' in page  # focusable: it scrolls
    assert f'<span class="diff-file">--- base #{head.seq} {head.digest[:12]}' in page
    assert '<span class="diff-del">-' in page and "PROVIDES_INPUT_FOR" in page
    assert "<dt>Verdict</dt><dd>rejected</dd>" in page
    assert "<dt>Best (retained) score</dt><dd>1.0</dd>" in page and "<dt>Candidate score</dt><dd>0.5</dd>" in page
    assert "<code>read</code> → <code>search</code>" in page  # the deleted transition
    assert "<code>it3-train0</code>" in page  # trace ids
    assert 'rel="prev"' in page and 'rel="next"' in page


def test_the_inspector_of_an_accepted_round_names_the_revision_and_diffs_against_the_skeleton(viewer, finished):
    page = html(get(viewer, "evolution_round", "lab", finished.pk, 1))
    head = EvolutionRound.objects.get(run=finished, iteration=1).graph_revision
    assert f"accepted as revision #{head.seq} <code>{head.digest[:12]}</code>" in page
    assert page.count('<pre class="mermaid"') == 2
    assert '<span class="diff-add">+' in page and "<dt>Verdict</dt><dd>accepted</dd>" in page
    assert "<code>search</code> (ACTION)" in page
    assert 'rel="prev"' not in page


def test_the_inspector_of_a_duplicate_points_at_the_earlier_round(viewer, finished):
    page = html(get(viewer, "evolution_round", "lab", finished.pk, 4))
    assert "the same candidate as" in page and url("evolution_round", "lab", finished.pk, 3) in page
    assert "the candidate was measured before" in page and 'rel="next"' not in page


def _objective_feedback():
    """A real ObjectiveGate decision (lexicographic: quality then calls) on 40 paired tasks."""
    quality = MetricSpec("quality", "score", "maximize", 0.0, 1.0, 0.02, 0.1, 0.1)
    calls = MetricSpec("calls", "calls", "minimize", 0.0, 10.0, 0.5, 1.0, 1.0)
    spec = ObjectiveSpec(metrics=(quality, calls), mode="lexicographic")
    ids = [f"task-{i:03d}" for i in range(40)]
    context = ObjectiveContext(
        objective_digest=spec.digest,
        evaluation_design="paired-rerun",
        evaluator_version="eval-1",
        cohort="october",
        budget_profile="standard",
        evidence_partition="validation",
        expected_task_ids=ids,
        measurement_basis={"quality": "per attempt", "calls": "per attempt"},
    )

    def side(ref, value):
        outcomes = [TaskOutcome(t, value, value >= 0.5, metrics={"quality": value, "calls": 3.0}) for t in ids]
        return Evaluation(ref=ref, score=None, per_task=tuple(outcomes), objective_context=context)

    return ObjectiveGate(spec, context).decide(side("base", 0.5), side("cand", 0.6)).feedback


def test_the_inspector_shows_an_objective_decision_as_lines_a_metrics_table_and_reasons(viewer, finished):
    feedback = _objective_feedback()
    # The page reads what the store wrote; here the round's decision is the real gate's feedback above.
    EvolutionRound.objects.filter(run=finished, iteration=3).update(decision=feedback, disposition="accepted")
    page = html(get(viewer, "evolution_round", "lab", finished.pk, 3))
    assert f"Decision: {feedback['disposition']}" in page
    assert '<table class="table decision-metrics">' in page
    assert "<code>quality</code>" in page and "<code>calls</code>" in page
    assert "oriented interval" in page and "positive = better" in page
    report = feedback["metrics"][0]
    assert f"[{report['oriented_interval'][0]}, {report['oriented_interval'][1]}]" in page
    for reason in feedback["reasons"]:
        assert f"<code>{reason}</code>" in page


# -- the rejection memory ---------------------------------------------------------------------------------------------


def test_the_rejections_page_shows_counts_the_refiner_view_and_the_markdown_escaped(viewer, finished):
    page = html(get(viewer, "rejections", "lab"))
    counts = re.search(r'aria-label="Rounds by outcome">(.*?)</table>', page, re.S).group(1)
    assert re.findall(r'<td class="num">(\d+)</td>', counts) == ["1", "1", "1", "0", "1", "4"]
    views = {name: page.split(f'id="{name}"', 1)[1].split(">", 1)[1] for name in ("refiner-view", "markdown-view")}
    assert views["refiner-view"].startswith("4 earlier round(s): 1 accepted, 1 rejected")
    assert "### iteration 3 REJECTED candidate" in page
    assert views["markdown-view"].startswith("# Rejection memory")
    assert "-LEADS_TO-&gt; verify_answer" in page and "-LEADS_TO-> verify_answer" not in page  # escaped
    short = html(get(viewer, "rejections", "lab", full="0"))
    assert "### iteration" not in short.split('id="markdown-view"')[0]  # every round as one line
    assert get(viewer, "rejections", "lab", full="lots").status_code == 200


def test_the_rejections_page_of_a_workspace_without_rounds(viewer, lab):
    page = html(get(viewer, "rejections", "lab"))
    assert "(none yet)" in page


def test_the_workspace_page_links_to_the_evolution_pages(viewer, lab):
    page = html(get(viewer, "workspace", "lab"))
    assert url("evolutions", "lab") in page and url("rejections", "lab") in page


# -- queries ----------------------------------------------------------------------------------------------------------


def _queries(user, name, *args) -> int:
    client = logged_in(user)
    session_users.forget()  # the session's user read afresh each time (accounts.session_users)
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url(name, *args)).status_code == 200
    return len(captured)


def test_each_page_reads_in_a_fixed_number_of_queries(operator, lab, django_assert_max_num_queries):
    first = run_to_end(start(lab, operator))

    def pages(run):
        return [
            ("evolutions", "lab"),
            ("evolution", "lab", run.pk),
            ("evolution_round", "lab", run.pk, (run.first_iteration or 1) + 1),
            ("rejections", "lab"),
        ]

    few = [_queries(operator, *page) for page in pages(first)]
    for _ in range(3):
        last = run_to_end(start(lab, operator))
    assert EvolutionRun.objects.count() == 4 and EvolutionRound.objects.count() == 16
    assert [_queries(operator, *page) for page in pages(first)] == few  # more runs and rounds, the same queries
    # user, roles (the session from the cache), then: workspace + runs; workspace + run + rounds + 2 for the series +
    # pending promotions; workspace + run + round + base revision; workspace + memory head.
    limits = {"evolutions": 4, "evolution": 8, "evolution_round": 6, "rejections": 4}
    client = logged_in(operator)
    for page in [*pages(first), *pages(last)]:
        with django_assert_max_num_queries(limits[page[0]]):
            assert client.get(url(*page)).status_code == 200
