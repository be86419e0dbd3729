"""Rejection memory (spec §5): entries, the append-only memory, duplicate digests and both renderings."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphs.core import Diagnostic, EditSet, parse_edit_set, skeleton
from graphs.core.evaluation import Evaluation, TaskOutcome
from graphs.core.rejections import (
    ENTRY_KINDS,
    OBJECTIVE_HEADER,
    RejectionEntry,
    RejectionMemory,
)
from tests.graphs.core.builders import five_node_graph

DIGEST = "a1b2c3d4e5f6" + "0" * 52
BASE = "feedbeef0123" + "1" * 52
EDITS = {
    "add_nodes": [{"id": "search", "type": "ACTION", "description": "Search"}],
    "delete_nodes": [],
    "add_edges": [
        {"source": "Start", "target": "search", "relation": "LEADS_TO", "condition": None, "guidance": "g"},
        {"source": "search", "target": "End", "relation": "LEADS_TO", "condition": None, "guidance": "g"},
    ],
    "delete_edges": [{"source": "Start", "target": "End"}],
}
COUNTS = "+1 node(s) −0 node(s) +2 edge(s) −1 edge(s)"
OBJECTIVE_REJECTION = {
    "schema": 1,
    "disposition": "rejected",
    "reasons": ["metric_regression"],
    "decisive_metric": "quality",
    "metrics": [],
}


def evaluation(score, ref="cand"):
    return Evaluation.from_outcomes(ref, [TaskOutcome("t1", score, score >= 0.5)]) if score is not None else None


def entry(iteration=1, kind="rejected", **fields):
    defaults = {
        "edits": EDITS,
        "candidate_digest": DIGEST,
        "base_digest": BASE,
        "mode": "static_incremental",
        "created_at": "2026-01-01T00:00:00+00:00",
    }
    if kind in ("accepted", "rejected"):
        defaults |= {"validation": evaluation(0.6), "retained_score": 0.7}
    return RejectionEntry(iteration=iteration, kind=kind, **(defaults | fields))


def structural(iteration, digest=None, codes=("missing_endpoint",)):
    diagnostics = tuple(Diagnostic(code, f"{code} happened", "x") for code in codes)
    return entry(iteration, "structural_failure", candidate_digest=digest, diagnostics=diagnostics)


# -- entries ---------------------------------------------------------------------------------------------------------


def test_entry_kinds_are_the_five_outcomes():
    assert ENTRY_KINDS == ("accepted", "rejected", "structural_failure", "no_action", "duplicate_candidate")


def test_an_unknown_kind_raises():
    with pytest.raises(ValueError, match="kind"):
        RejectionEntry(iteration=1, kind="refused")


def test_iteration_must_be_a_positive_integer():
    with pytest.raises(ValueError):
        RejectionEntry(iteration=0, kind="no_action")
    with pytest.raises(ValueError):
        RejectionEntry(iteration=True, kind="no_action")


def test_retained_score_is_only_for_gated_rounds():
    assert entry(kind="accepted").retained_score == 0.7
    with pytest.raises(ValueError, match="retained_score"):
        RejectionEntry(iteration=1, kind="no_action", retained_score=0.5)


def test_duplicate_of_is_only_for_duplicates():
    with pytest.raises(ValueError, match="duplicate_of"):
        RejectionEntry(iteration=2, kind="rejected", duplicate_of=1)


def test_edits_may_be_given_as_an_edit_set_and_are_kept_as_its_dict():
    edits, _ = parse_edit_set(json.dumps(EDITS))
    made = RejectionEntry(iteration=1, kind="rejected", edits=edits)
    assert made.edits == edits.to_dict()
    assert RejectionEntry(iteration=1, kind="structural_failure", edits=None).edits == {}


def test_a_graph_candidate_is_kept_as_its_document():
    graph = five_node_graph()
    made = RejectionEntry(iteration=1, kind="rejected", candidate=graph, candidate_digest=graph.digest)
    assert made.candidate == graph.to_document()


def test_created_at_defaults_to_an_iso_utc_time():
    assert RejectionEntry(iteration=1, kind="no_action").created_at.endswith("+00:00")


def test_edit_counts_count_each_array_and_tolerate_missing_ones():
    assert entry().edit_counts() == {"add_nodes": 1, "delete_nodes": 0, "add_edges": 2, "delete_edges": 1}
    assert entry(edits={"add_nodes": "oops"}).edit_counts() == dict.fromkeys(
        ("add_nodes", "delete_nodes", "add_edges", "delete_edges"), 0
    )


def test_edit_summary_matches_the_edit_sets_own_summary():
    edits, _ = parse_edit_set(json.dumps(EDITS))
    assert entry().edit_summary() == edits.summary() == COUNTS


# -- headlines -------------------------------------------------------------------------------------------------------


def test_headline_of_a_scalar_rejection_compares_validation_with_retained():
    assert entry(3).headline() == (
        f"iteration 3 REJECTED candidate a1b2c3d4e5f6: validation 0.6000 vs retained 0.7000; {COUNTS}"
    )


def test_headline_of_an_acceptance():
    made = entry(2, "accepted", validation=evaluation(0.8), retained_score=0.75)
    assert made.headline().startswith(
        "iteration 2 ACCEPTED candidate a1b2c3d4e5f6: validation 0.8000 vs retained 0.7500"
    )


def test_headline_of_a_structural_failure_lists_its_error_codes_once():
    made = structural(4, DIGEST, codes=("missing_endpoint", "no_path_to_terminal", "missing_endpoint"))
    assert made.headline() == (
        f"iteration 4 STRUCTURAL_FAILURE candidate a1b2c3d4e5f6: diagnostics missing_endpoint, no_path_to_terminal; "
        f"{COUNTS}"
    )


def test_headline_of_a_structural_failure_without_candidate():
    made = RejectionEntry(iteration=1, kind="structural_failure", diagnostics=(Diagnostic("malformed_edit", "bad"),))
    assert made.headline() == (
        "iteration 1 STRUCTURAL_FAILURE candidate none: diagnostics malformed_edit; "
        "+0 node(s) −0 node(s) +0 edge(s) −0 edge(s)"
    )


def test_headline_of_a_structural_failure_prefers_errors_over_warnings():
    made = RejectionEntry(
        iteration=1,
        kind="structural_failure",
        diagnostics=(Diagnostic("missing_guidance", "w", severity="warning"), Diagnostic("duplicate_edge", "e")),
    )
    assert ": diagnostics duplicate_edge;" in made.headline()


def test_headline_of_a_duplicate_names_the_earlier_iteration():
    made = entry(5, "duplicate_candidate", duplicate_of=3)
    assert (
        made.headline() == f"iteration 5 DUPLICATE_CANDIDATE candidate a1b2c3d4e5f6: duplicate of iteration 3; {COUNTS}"
    )


def test_headline_of_a_duplicate_of_the_head():
    assert "duplicate of the current head graph;" in entry(5, "duplicate_candidate").headline()


def test_headline_of_no_action():
    made = RejectionEntry(iteration=6, kind="no_action", edits=EditSet())
    assert made.headline() == (
        "iteration 6 NO_ACTION candidate none: the refiner proposed no edits; "
        "+0 node(s) −0 node(s) +0 edge(s) −0 edge(s)"
    )


def test_headline_of_an_objective_decision_shows_disposition_metric_and_reasons():
    made = entry(7, decision=OBJECTIVE_REJECTION)
    assert made.headline() == (
        f"iteration 7 REJECTED candidate a1b2c3d4e5f6: rejected on quality (metric_regression); {COUNTS}"
    )


def test_headline_of_an_objective_decision_without_metric():
    made = entry(7, decision={"disposition": "equivalent", "reasons": ["all_metrics_equivalent"]})
    assert ": equivalent (all_metrics_equivalent);" in made.headline()


def test_headline_shows_a_missing_score_as_a_question_mark():
    assert "validation ? vs retained 0.7000" in entry(validation=None).headline()


# -- measured rejections ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("decision", "measured"),
    [
        (None, True),
        ({"best_score": 0.7, "candidate_score": 0.6, "accepted": False}, True),
        ({"disposition": "rejected"}, True),
        ({"disposition": "equivalent"}, False),
        ({"disposition": "unresolved"}, False),
        ({"disposition": "unmeasured"}, False),
        ({"disposition": "invalid"}, False),
    ],
)
def test_is_measured_rejection_depends_on_the_disposition(decision, measured):
    assert entry(decision=decision).is_measured_rejection() is measured


@pytest.mark.parametrize("kind", ["accepted", "structural_failure", "no_action", "duplicate_candidate"])
def test_only_rejected_rounds_are_measured_rejections(kind):
    assert not entry(kind=kind).is_measured_rejection()


# -- documents -------------------------------------------------------------------------------------------------------

ENTRY_KEYS = {
    "iteration",
    "kind",
    "edits",
    "candidate",
    "candidate_digest",
    "base_digest",
    "trace_ids",
    "trace_scores",
    "validation",
    "retained_score",
    "diagnostics",
    "duplicate_of",
    "mode",
    "created_at",
}


def test_entry_document_leaves_out_absent_optional_fields():
    assert set(entry().to_document()) == ENTRY_KEYS


def test_entry_document_keeps_optional_fields_when_present():
    made = entry(decision={"accepted": False}, baseline_ref="b", candidate_ref="c")
    document = made.to_document()
    assert set(document) == ENTRY_KEYS | {"decision", "baseline_ref", "candidate_ref"}
    assert document["decision"] == {"accepted": False}


def test_entry_document_round_trips():
    made = entry(
        candidate=skeleton().to_document(),
        trace_ids=("t1", "t2"),
        trace_scores={"t1": 1.0, "t2": 0.0},
        diagnostics=(Diagnostic("missing_guidance", "no guidance", "a->b", "warning"),),
        decision=OBJECTIVE_REJECTION,
        baseline_ref="base",
        candidate_ref="cand",
    )
    document = made.to_document()
    assert RejectionEntry.from_document(json.loads(json.dumps(document))) == made


def test_an_old_entry_document_without_optional_fields_loads_and_keeps_its_shape():
    document = entry().to_document()
    loaded = RejectionEntry.from_document(document)
    assert loaded.decision is None and loaded.baseline_ref is None and loaded.candidate_ref is None
    assert loaded.to_document() == document


def test_entry_document_is_a_copy():
    made = entry()
    made.to_document()["edits"]["add_nodes"].clear()
    assert made.edit_counts()["add_nodes"] == 1


# -- the memory ------------------------------------------------------------------------------------------------------


def test_an_empty_memory_is_at_iteration_zero():
    memory = RejectionMemory()
    assert memory.iteration == 0 and memory.entries == () and len(memory) == 0


def test_append_returns_a_new_memory_at_the_entrys_iteration():
    memory = RejectionMemory()
    grown = memory.append(entry(1))
    assert memory.entries == () and grown.iteration == 1 and grown.entries == (entry(1),)


def test_append_refuses_an_iteration_that_is_not_after_the_last():
    memory = RejectionMemory().append(entry(3))
    for iteration in (1, 3):
        with pytest.raises(ValueError, match="append-only"):
            memory.append(entry(iteration))


def test_iterations_may_skip_rounds():
    assert RejectionMemory.of([entry(1), entry(4)]).iteration == 4


def test_a_memory_refuses_entries_out_of_order():
    with pytest.raises(ValueError):
        RejectionMemory((entry(2), entry(1)))
    with pytest.raises(ValueError):
        RejectionMemory((entry(2),), iteration=1)


def test_counts_cover_every_kind():
    memory = RejectionMemory.of([entry(1, "accepted"), entry(2), entry(3), structural(4)])
    assert memory.counts() == {
        "accepted": 1,
        "rejected": 2,
        "structural_failure": 1,
        "no_action": 0,
        "duplicate_candidate": 0,
    }


def test_rejected_digests_map_measured_rejections_and_structural_failures_to_their_first_iteration():
    memory = RejectionMemory.of(
        [
            entry(1, candidate_digest="d1"),
            entry(2, candidate_digest="d1"),
            structural(3, "d3"),
            structural(4, None),
            entry(5, candidate_digest="d5", decision={"disposition": "rejected"}),
        ]
    )
    assert memory.rejected_digests() == {"d1": 1, "d3": 3, "d5": 5}


@pytest.mark.parametrize("disposition", ["equivalent", "unresolved", "unmeasured", "invalid"])
def test_unmeasured_comparisons_never_block_a_re_proposal(disposition):
    memory = RejectionMemory.of([entry(1, candidate_digest="d", decision={"disposition": disposition})])
    assert memory.rejected_digests() == {}


@pytest.mark.parametrize("kind", ["accepted", "no_action", "duplicate_candidate"])
def test_other_outcomes_never_block_a_re_proposal(kind):
    assert RejectionMemory.of([entry(1, kind, candidate_digest="d")]).rejected_digests() == {}


def test_memory_document_shape_and_round_trip():
    memory = RejectionMemory.of([entry(1, "accepted"), structural(2, DIGEST), entry(3, decision={"accepted": False})])
    document = memory.to_document()
    assert list(document) == ["schema", "iteration", "entries"]
    assert document["schema"] == 1 and document["iteration"] == 3
    assert RejectionMemory.from_document(json.loads(json.dumps(document))) == memory


def test_memory_document_keeps_an_iteration_past_the_last_entry():
    memory = RejectionMemory.from_document({"schema": 1, "iteration": 4, "entries": []})
    assert memory.iteration == 4 and memory.append(entry(5)).iteration == 5


def test_a_newer_memory_schema_is_refused():
    with pytest.raises(ValueError, match="upgrade"):
        RejectionMemory.from_document({"schema": 2, "iteration": 0, "entries": []})


# -- the refiner's view ----------------------------------------------------------------------------------------------


def test_an_empty_memory_renders_none_yet():
    assert RejectionMemory().render_for_refiner() == "(none yet)"


def test_an_empty_memory_still_leads_with_the_objective():
    text = RejectionMemory().render_for_refiner(objective_summary="maximize quality")
    assert text == f"{OBJECTIVE_HEADER}\nmaximize quality\n(none yet)"


def test_the_summary_line_counts_outcomes_and_asks_not_to_repeat():
    text = RejectionMemory.of([entry(1, "accepted"), entry(2), structural(3)]).render_for_refiner()
    summary = text.splitlines()[0]
    assert "3 earlier round(s): 1 accepted, 1 rejected, 1 structural failure." in summary
    assert "Do not propose again" in summary


def test_entries_are_in_chronological_order():
    text = RejectionMemory.of([entry(1), structural(2), entry(3)]).render_for_refiner()
    positions = [text.index(f"iteration {n} ") for n in (1, 2, 3)]
    assert positions == sorted(positions)


def test_the_newest_five_non_accepted_entries_are_in_full_and_the_rest_one_line_each():
    entries = [entry(n, "accepted" if n % 3 == 0 else "rejected") for n in range(1, 13)]
    text = RejectionMemory.of(entries).render_for_refiner()
    full = [n for n in range(1, 13) if f"### iteration {n} " in text]
    one_line = [n for n in range(1, 13) if f"- iteration {n} " in text]
    assert full == [5, 7, 8, 10, 11]
    assert one_line == [1, 2, 3, 4, 6, 9, 12]


def test_accepted_entries_are_always_one_liners():
    text = RejectionMemory.of([entry(1, "accepted")]).render_for_refiner()
    assert "### " not in text and "- iteration 1 ACCEPTED" in text


def test_full_entries_setting_controls_how_many_are_in_full():
    memory = RejectionMemory.of([entry(n) for n in range(1, 5)])
    assert memory.render_for_refiner(full_entries=2).count("### ") == 2
    assert memory.render_for_refiner(full_entries=0).count("### ") == 0


def test_a_full_scalar_entry_shows_base_mode_edits_score_and_trajectories():
    ids = tuple(f"t{n}" for n in range(10))
    made = entry(2, trace_ids=ids, trace_scores=dict.fromkeys(ids, 0.0))
    text = made.render_full()
    lines = text.splitlines()
    assert lines[0] == f"### {made.headline()}"
    assert lines[1] == "Base graph feedbeef0123, mode static_incremental."
    assert lines[2] == f"Edits: {json.dumps(EDITS, ensure_ascii=False)}"
    assert lines[3] == "Validation: score 0.6000 against retained 0.7000."
    assert lines[4] == "Training trajectories: 10 (t0, t1, t2, t3, t4, t5, t6, t7, and 2 more)."


def test_a_full_structural_entry_lists_its_diagnostics():
    made = structural(2, codes=("missing_endpoint",))
    text = made.render_full()
    assert "Diagnostics:\n- error:missing_endpoint [x]: missing_endpoint happened" in text
    assert "Validation" not in text
    assert text.endswith("Training trajectories: 0.")


def test_the_cap_drops_the_oldest_one_liners_first():
    entries = [entry(n, "accepted") for n in range(1, 41)] + [entry(41)]
    memory = RejectionMemory.of(entries)
    uncapped = memory.render_for_refiner()
    cap = len(uncapped) - 500
    text = memory.render_for_refiner(char_cap=cap)
    assert len(text) <= cap
    assert "### iteration 41 " in text
    assert "- iteration 1 " not in text and "- iteration 40 " in text
    assert "older round(s) left out to fit the length cap" in text


def test_the_cap_then_demotes_the_oldest_full_entries():
    memory = RejectionMemory.of([entry(n) for n in range(1, 6)])
    full_size = len(memory.entries[0].render_full())
    cap = len(memory.render_for_refiner()) - full_size
    text = memory.render_for_refiner(char_cap=cap)
    assert len(text) <= cap
    assert "- iteration 1 " in text and "### iteration 1 " not in text
    assert "### iteration 5 " in text


def test_the_cap_finally_cuts_with_a_marker():
    memory = RejectionMemory.of([entry(n) for n in range(1, 6)])
    text = memory.render_for_refiner(char_cap=300)
    assert len(text) <= 300
    assert text.endswith("[... cut here to fit the length cap ...]")


def test_thirty_thousand_characters_is_the_default_cap():
    big = {"add_nodes": [{"id": f"n{i}", "type": "ACTION", "description": "x" * 300} for i in range(30)]}
    memory = RejectionMemory.of([entry(n, edits=big) for n in range(1, 8)])
    assert len(memory.render_for_refiner(full_entries=7, char_cap=10**9)) > 30_000
    assert len(memory.render_for_refiner()) <= 30_000


def test_the_objective_header_leads_every_refiner_view():
    memory = RejectionMemory.of([entry(1)])
    text = memory.render_for_refiner(objective_summary="lexicographic: quality, then cost")
    assert text.startswith(f"{OBJECTIVE_HEADER}\nlexicographic: quality, then cost\n1 earlier round(s)")


def test_the_objective_header_survives_a_tiny_cap():
    memory = RejectionMemory.of([entry(n) for n in range(1, 6)])
    text = memory.render_for_refiner(char_cap=20, objective_summary="maximize quality")
    assert text == f"{OBJECTIVE_HEADER}\nmaximize quality"


def test_a_small_cap_keeps_the_objective_header_whole_and_cuts_the_rest():
    memory = RejectionMemory.of([entry(n) for n in range(1, 6)])
    header = f"{OBJECTIVE_HEADER}\nmaximize quality"
    text = memory.render_for_refiner(char_cap=len(header) + 200, objective_summary="maximize quality")
    assert text.startswith(header + "\n") and len(text) <= len(header) + 200


def test_the_refiner_never_sees_whole_candidate_graphs():
    memory = RejectionMemory.of([entry(1, candidate=five_node_graph().to_document())])
    assert "Search the corpus" not in memory.render_for_refiner()


# -- the operator view -----------------------------------------------------------------------------------------------


def test_markdown_of_an_empty_memory():
    text = RejectionMemory().render_markdown()
    assert text.startswith("# Rejection memory\n") and "(none yet)" in text


def test_markdown_has_a_title_a_summary_and_one_section_per_entry():
    memory = RejectionMemory.of([entry(1, "accepted"), entry(2), structural(3)])
    text = memory.render_markdown()
    assert text.startswith("# Rejection memory\n\n3 round(s) through iteration 3: 1 accepted, 1 rejected")
    assert text.count("\n### ") == 3


def test_markdown_accepted_sections_carry_headline_and_edits_code_block():
    made = entry(1, "accepted")
    text = RejectionMemory.of([made]).render_markdown()
    assert f"### {made.headline()}\nEdits:\n```json\n{json.dumps(EDITS, indent=2)}\n```" in text
    assert "Validation:" not in text


def test_markdown_other_sections_carry_the_full_rendering():
    made = structural(2, DIGEST)
    text = RejectionMemory.of([made]).render_markdown()
    assert made.render_full(fenced_edits=True) in text


def test_markdown_full_entries_limits_the_full_sections():
    memory = RejectionMemory.of([entry(n) for n in range(1, 5)])
    text = memory.render_markdown(full_entries=1)
    assert text.count("Base graph ") == 1 and text.count("### ") == 4


def test_scalar_decisions_never_show_in_renderings():
    made = entry(1, "accepted", decision={"best_score": 0.7, "candidate_score": 0.8, "accepted": True})
    memory = RejectionMemory.of([made, entry(2, decision={"best_score": 0.8, "candidate_score": 0.6})])
    for text in (memory.render_markdown(), memory.render_for_refiner()):
        assert "best_score" not in text and "Decision" not in text


# -- objective decisions (render_decision lives in graphs.core.objectives) -------------------------------------------


def test_a_full_objective_entry_shows_the_decision_lines_instead_of_the_score():
    from graphs.core.objectives import render_decision

    made = entry(3, decision=OBJECTIVE_REJECTION)
    text = made.render_full()
    for line in render_decision(OBJECTIVE_REJECTION):
        assert line in text.splitlines()
    assert "Validation: score" not in text


def test_markdown_accepted_objective_section_carries_its_decision_lines():
    from graphs.core.objectives import render_decision

    decision = {"disposition": "accepted", "reasons": ["improvement"], "decisive_metric": "quality"}
    made = entry(1, "accepted", decision=decision)
    section = RejectionMemory.of([made]).render_markdown()
    lines = render_decision(decision)
    assert lines and all(line in section for line in lines)
    assert section.index(lines[0]) < section.index("```json")


# -- properties ------------------------------------------------------------------------------------------------------

texts = st.text(alphabet='abcé→ {}"\\\n', max_size=40)
kinds = st.sampled_from(ENTRY_KINDS)


@st.composite
def entries(draw, iteration):
    kind = draw(kinds)
    gated = kind in ("accepted", "rejected")
    decision = draw(
        st.none()
        | st.fixed_dictionaries({"accepted": st.booleans()})
        | st.fixed_dictionaries(
            {
                "disposition": st.sampled_from(["rejected", "equivalent", "unresolved", "unmeasured", "invalid"]),
                "reasons": st.lists(st.sampled_from(["a", "b"]), max_size=2),
            }
        )
    )
    ids = draw(st.lists(st.text(alphabet="tx0123", min_size=1, max_size=4), unique=True, max_size=10))
    return RejectionEntry(
        iteration=iteration,
        kind=kind,
        edits={"add_nodes": [{"id": draw(texts), "type": "ACTION", "description": draw(texts)}]},
        candidate_digest=draw(st.none() | st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)),
        base_digest=draw(st.none() | st.just(BASE)),
        trace_ids=tuple(ids),
        trace_scores={trace_id: draw(st.floats(0, 1)) for trace_id in ids},
        validation=evaluation(draw(st.floats(0, 1))) if gated else None,
        retained_score=draw(st.floats(0, 1)) if gated else None,
        diagnostics=tuple(Diagnostic("missing_endpoint", m, "x") for m in draw(st.lists(texts, max_size=2))),
        duplicate_of=draw(st.none() | st.integers(1, 5)) if kind == "duplicate_candidate" else None,
        mode=draw(st.none() | st.just("static_incremental")),
        created_at="2026-01-01T00:00:00+00:00",
        decision=decision if gated else None,
        baseline_ref=draw(st.none() | st.just("base")),
        candidate_ref=draw(st.none() | st.just("cand")),
    )


@st.composite
def memories(draw):
    count = draw(st.integers(0, 12))
    steps = draw(st.lists(st.integers(1, 3), min_size=count, max_size=count))
    iterations = [sum(steps[: n + 1]) for n in range(count)]
    return RejectionMemory.of([draw(entries(iteration)) for iteration in iterations])


@settings(max_examples=60, deadline=None)
@given(memories(), st.integers(0, 4000), st.integers(0, 6), st.none() | texts)
def test_the_refiner_view_never_exceeds_the_cap_and_the_header_always_leads(memory, cap, full, objective):
    text = memory.render_for_refiner(full_entries=full, char_cap=cap, objective_summary=objective)
    if objective is None:
        assert len(text) <= cap
    else:
        header = f"{OBJECTIVE_HEADER}\n{objective}"
        assert text.startswith(header)
        assert len(text) <= max(cap, len(header))


@settings(max_examples=60, deadline=None)
@given(memories())
def test_a_memory_document_round_trips_through_json(memory):
    document = json.loads(json.dumps(memory.to_document()))
    assert RejectionMemory.from_document(document) == memory
    assert RejectionMemory.from_document(document).to_document() == memory.to_document()


@settings(max_examples=60, deadline=None)
@given(memories())
def test_rejected_digests_only_name_blocking_entries(memory):
    digests = memory.rejected_digests()
    by_iteration = {e.iteration: e for e in memory.entries}
    for digest, iteration in digests.items():
        first = by_iteration[iteration]
        assert first.candidate_digest == digest
        assert first.is_measured_rejection() or first.kind == "structural_failure"
        earlier = [e for e in memory.entries if e.iteration < iteration and e.candidate_digest == digest]
        assert not any(e.is_measured_rejection() or e.kind == "structural_failure" for e in earlier)
