"""The run page (waterfall, formatted metadata, links), two runs side by side and a run against the active
procedure of its intent (issue 11, item 4)."""

import re

import pytest
from django.urls import reverse

from procedures.mining import content_revision, intent_key
from procedures.models import Procedure, ProcedureVersion
from tests.conftest import logged_in
from trajectories.core.align import align_tools
from trajectories.core.waterfall import waterfall

from .factories import ingest, run_item, step_item

pytestmark = pytest.mark.django_db
COMPARE = reverse("trajectories:compare")


def detail(run_id):
    return reverse("trajectories:detail", args=[run_id])


def timed(tool, start, end, **overrides):
    return step_item(
        tool, started_at=f"2026-01-05T10:00:{start:02d}Z", ended_at=f"2026-01-05T10:00:{end:02d}Z", **overrides
    )


# --- cores ---------------------------------------------------------------------------------------------------------


def test_the_waterfall_places_each_step_on_the_runs_span():
    drawn = waterfall([(10.0, 12.0), (None, None), (12.0, 20.0), (15.0, 14.0)], run_start=5.0)
    assert drawn.span == 15.0 and drawn.timed == 3
    first, missing, third, backwards = drawn.bars
    assert missing is None
    assert (first.offset, first.duration, first.left) == (5.0, 2.0, pytest.approx(1 / 3))
    assert third.left + third.width == pytest.approx(1.0)
    assert backwards.duration == 0.0  # an end before its start counts as zero
    assert waterfall([(None, 1.0)]).bars == (None,) and waterfall([]).span == 0.0
    assert waterfall([(3.0, 3.0)]).bars[0].width == 1.0  # one instant step fills the span


def test_alignment_covers_both_sequences_once_in_order():
    rows = align_tools(["a", "b", "c", "d"], ["a", "x", "c", "d", "e"])
    assert [(r.kind, r.a, r.b) for r in rows] == [
        ("equal", 0, 0),
        ("replace", 1, 1),
        ("equal", 2, 2),
        ("equal", 3, 3),
        ("insert", None, 4),
    ]
    assert [(r.kind, r.a, r.b) for r in align_tools(["a", "b"], [])] == [("delete", 0, None), ("delete", 1, None)]


# --- the run page --------------------------------------------------------------------------------------------------


def test_the_run_page_draws_a_waterfall_of_step_durations(viewer):
    run_id = ingest(
        run_item(
            started_at="2026-01-05T10:00:00Z",
            ended_at="2026-01-05T10:00:40Z",
            steps=[timed("lookup_policy", 0, 10), step_item("think"), timed("issue_refund", 10, 40, ok=False)],
        )
    ).created_ids[0]
    content = logged_in(viewer).get(detail(run_id)).content.decode()
    assert "2 of 3 steps timed, spanning 40.00 s" in content
    svg = content[content.index("<svg") : content.index("</svg>")]
    bars = re.findall(r'<rect class="wf-bar" x="([\d.]+)" y="(\d+)" width="([\d.]+)"', svg)
    # track from x=260, 730 wide: the first bar a quarter of it at the start, the second three quarters after it
    assert [(float(x), int(y), float(w)) for x, y, w in bars] == [(260.0, 4, 182.5), (442.5, 52, 547.5)]
    assert "not timed" in svg and "issue_refund: 30.000 s, starting at +10.000 s" in svg
    assert 'class="wf-row step-failed"' in svg
    assert "<script" not in svg


def test_a_run_without_timings_says_there_is_no_waterfall(viewer):
    run_id = ingest(run_item(steps=[step_item()])).created_ids[0]
    assert "so there is no waterfall" in logged_in(viewer).get(detail(run_id)).content.decode()


def test_metadata_is_formatted_json_not_a_python_repr(viewer):
    run_id = ingest(run_item(metadata={"model": "demo", "flags": {"retry": True, "note": None}})).created_ids[0]
    content = logged_in(viewer).get(detail(run_id)).content.decode()
    assert "&quot;retry&quot;: true" in content and "&quot;note&quot;: null" in content
    assert "True" not in content.split("Metadata")[1][:300] and "{&#x27;" not in content


def test_the_run_page_links_to_compare_and_to_the_procedure_view(viewer):
    run_id = ingest(run_item()).created_ids[0]
    content = logged_in(viewer).get(detail(run_id)).content.decode()
    assert f'href="{reverse("procedures:run_vs", args=[run_id])}"' in content
    assert f'action="{COMPARE}"' in content and f'name="a" value="{run_id}"' in content


@pytest.mark.parametrize("size", [2, 40])
def test_the_run_page_costs_a_fixed_number_of_queries(viewer, django_assert_max_num_queries, size):
    run_id = ingest(run_item(steps=[timed("t", 0, 1)] * size)).created_ids[0]
    client = logged_in(viewer)
    with django_assert_max_num_queries(5):  # user, groups (nav), run, steps, the intent's rubric
        assert client.get(detail(run_id)).status_code == 200


# --- side by side --------------------------------------------------------------------------------------------------


@pytest.fixture
def pair():
    return ingest(
        run_item(
            task="Refund A",
            steps=[
                step_item("lookup_policy"),
                step_item("issue_refund", arguments={"amount": 10}),
                step_item("notify"),
            ],
        ),
        run_item(
            task="Refund B",
            outcome="failure",
            steps=[
                step_item("lookup_policy"),
                step_item("issue_refund", arguments={"amount": 99}, ok=False),
                step_item("escalate"),
            ],
        ),
    ).created_ids


def test_two_runs_side_by_side_align_their_steps_and_highlight_differences(viewer, pair, django_assert_max_num_queries):
    client = logged_in(viewer)
    with django_assert_max_num_queries(4):  # user, groups (nav), both runs, their steps
        response = client.get(f"{COMPARE}?a={pair[0]}&b={pair[1]}")
    assert response.status_code == 200
    rows = response.context["rows"]
    assert [(row["kind"], row["differs"]) for row in rows] == [
        ("equal", []),
        ("equal", ["arguments", "status"]),
        ("replace", ["tool"]),
    ]
    content = response.content.decode()
    assert "1 of 3 rows identical" in content
    assert 'class="align-equal align-differs"' in content and "arguments, status differ" in content
    assert 'class="align-replace align-differs"' in content and "different tool" in content
    assert "Refund A" in content and "Refund B" in content


def test_steps_only_on_one_side_are_shown_as_such(viewer):
    ids = ingest(
        run_item(steps=[step_item("a"), step_item("b")]),
        run_item(steps=[step_item("a"), step_item("b"), step_item("c")]),
    ).created_ids
    content = logged_in(viewer).get(f"{COMPARE}?a={ids[0]}&b={ids[1]}").content.decode()
    assert "only in B" in content


@pytest.mark.parametrize(
    ("query", "status", "message"),
    [
        ("a=1&b=x", 400, "Give two run numbers"),
        ("a=-3&b=2", 400, "Give two run numbers"),
        ("a=99999999999999999999999&b=2", 400, "Give two run numbers"),
        ("a=1", 400, "Give two run numbers"),
        ("a=987654&b=987655", 404, "No run #987654 or #987655."),
    ],
)
def test_compare_with_odd_input_says_why(viewer, query, status, message):
    response = logged_in(viewer).get(f"{COMPARE}?{query}")
    assert response.status_code == status and message in response.content.decode()


def test_compare_with_nothing_asked_shows_the_form(viewer, client):
    assert logged_in(viewer).get(COMPARE).status_code == 200
    assert client.get(COMPARE).status_code == 302  # login required


# --- against the active procedure ----------------------------------------------------------------------------------


def active_procedure(intent, *tools, arguments=None):
    steps = [{"tool": tool, "arguments": (arguments or {}).get(tool, {})} for tool in tools]
    procedure = Procedure.objects.create(intent=intent_key(intent), title=intent.replace("_", " "))
    version = ProcedureVersion.objects.create(
        procedure=procedure,
        number=1,
        steps=steps,
        candidate_revision="sha256:" + "0" * 64,
        content_revision=content_revision(intent=intent_key(intent), steps=steps),
        status="active",
    )
    procedure.active_version = version
    procedure.save()
    return procedure


def run_vs(run_id):
    return reverse("procedures:run_vs", args=[run_id])


def test_a_run_is_drawn_against_the_active_procedure_of_its_intent(viewer, django_assert_max_num_queries):
    active_procedure(
        "refund_request", "lookup_policy", "issue_refund", "notify", arguments={"issue_refund": {"currency": "EUR"}}
    )
    run_id = ingest(
        run_item(
            intent="Refund Request",  # the declared label, normalized like mining does
            steps=[
                step_item("lookup_policy"),
                step_item("check_fraud"),
                step_item("issue_refund", arguments={"currency": "USD"}),
            ],
        )
    ).created_ids[0]
    client = logged_in(viewer)
    with django_assert_max_num_queries(5):  # user, groups (nav), run, steps, procedure with its version
        response = client.get(run_vs(run_id))
    assert response.status_code == 200
    vs = response.context["vs"]
    assert [(row.status, row.argument_mismatches) for row in vs.rows] == [
        ("followed", []),
        ("extra", []),
        ("followed", ["currency"]),
        ("skipped", []),
    ]
    content = response.content.decode()
    assert "followed <strong>1 of 3</strong> procedure steps" in content
    assert "It first left the procedure\n    with an extra step <code>check_fraud</code>" in content
    assert 'class="vs-skipped"' in content and "left: skipped" in content and "followed, other currency" in content


def test_a_run_that_called_another_tool_is_shown_leaving_there(viewer):
    active_procedure("cancel_order", "lookup_order", "cancel_order")
    run_id = ingest(
        run_item(intent="cancel_order", steps=[step_item("lookup_order"), step_item("refund")])
    ).created_ids[0]
    content = logged_in(viewer).get(run_vs(run_id)).content.decode()
    assert "by calling <code>refund</code> instead of <code>cancel_order</code>" in content


def test_a_run_with_no_procedure_or_no_intent_says_so(viewer):
    ids = ingest(run_item(intent="order_status"), run_item(intent="")).created_ids
    client = logged_in(viewer)
    assert "No procedure is active for the intent" in client.get(run_vs(ids[0])).content.decode()
    assert "declares no intent" in client.get(run_vs(ids[1])).content.decode()
    assert client.get(run_vs(987654)).status_code == 404
