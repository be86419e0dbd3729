"""evolve() (spec §6): outcomes, duplicates, traces, budgets, resume, objective binding, stop rules."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphs.core import Edge, GraphError, skeleton
from graphs.core.bootstrap import BootstrapResult
from graphs.core.budget import Budget, HookedModel, Meter
from graphs.core.evaluation import Evaluation, EvaluationPending
from graphs.core.evolve import EvolveConfig, IterationReport, RunReport
from graphs.core.gates import ObjectiveGate, StrictImprovementGate, TieAcceptingGate
from graphs.core.objectives import MetricSpec, ObjectiveContext, ObjectiveSpec
from graphs.core.stores import Candidate, RevisionGraphStore, RevisionRejectionStore
from llm.core import ScriptedChatModel

from .builders import five_node_graph
from .evolve_harness import (
    BROKEN,
    EMPTY,
    FIXED_TIME,
    SAME_AS_HEAD,
    UNPARSEABLE,
    WORKSPACE,
    Crash,
    FixedGate,
    ScoringEvaluator,
    StageRecorder,
    TraceFeed,
    World,
    add_step,
)


@pytest.fixture(autouse=True)
def _fixed_clock(monkeypatch):
    monkeypatch.setattr("graphs.core.evolve.utc_now", lambda: FIXED_TIME)


def config(**options):
    return EvolveConfig(**{"max_rounds": 1, "role_retries": 0, "workspace": WORKSPACE, **options})


# -- configuration ---------------------------------------------------------------------------------------------------


def test_config_defaults_follow_the_reference_table():
    c = EvolveConfig()
    assert (c.task_description, c.max_rounds, c.max_rejected_streak) == ("tasks in this workspace", 10, None)
    assert (c.cycle_policy, c.mode, c.refiner_context_cap, c.token_counter) == ("repair", "auto", 120_000, None)
    assert (c.rejections_full_entries, c.rejections_char_cap, c.refiner_max_tokens, c.role_retries) == (
        5,
        30_000,
        8192,
        1,
    )
    assert (c.failing_sample, c.passing_sample, c.stale_trace_policy, c.success_threshold) == (None, None, "warn", 0.5)
    assert (c.refiner_images, c.seed, c.workspace, c.budget) == (0, 17, "default", Budget())
    assert (c.objective, c.objective_context) == (None, None)


@pytest.mark.parametrize("mode", ["static_onetime", "scratch_onetime"])
def test_config_refuses_the_one_time_modes_with_a_hint(mode):
    with pytest.raises(ValueError, match="refine_once"):
        EvolveConfig(mode=mode)


@pytest.mark.parametrize(
    "options",
    [
        {"mode": "sideways"},
        {"max_rounds": -1},
        {"max_rejected_streak": 0},
        {"cycle_policy": "forbid"},
        {"stale_trace_policy": "ignore"},
        {"success_threshold": 1.5},
        {"failing_sample": -1},
        {"role_retries": -1},
        {"refiner_context_cap": 0},
        {"workspace": ""},
        {"budget": {"max_model_calls": 1}},
        {"token_counter": 5},
    ],
)
def test_config_refuses_bad_values(options):
    with pytest.raises(ValueError):
        EvolveConfig(**options)


def objective_and_context(cohort="c1", objective=None):
    objective = objective or ObjectiveSpec(
        metrics=(MetricSpec("quality", "score", "maximize", 0.0, 1.0, min_improvement=0.0, equivalence_margin=0.1),)
    )
    context = ObjectiveContext(
        objective_digest=objective.digest,
        evaluation_design="fixed",
        evaluator_version="1",
        cohort=cohort,
        budget_profile="default",
        evidence_partition="validation",
        expected_task_ids=("v0", "v1", "v2", "v3"),
    )
    return objective, context


def test_config_binds_the_objective_and_its_context_together():
    objective, context = objective_and_context()
    with pytest.raises(ValueError, match="set together"):
        EvolveConfig(objective=objective)
    other = ObjectiveSpec(metrics=(MetricSpec("cost", "calls", "minimize", 0.0, 10.0),))
    with pytest.raises(ValueError, match="bound to another objective"):
        EvolveConfig(objective=other, objective_context=context)
    bound = EvolveConfig(objective=objective, objective_context=context)
    assert bound.objective_binding()["objective_digest"] == objective.digest
    assert bound.objective_binding()["context_digest"] == context.digest


# -- startup ---------------------------------------------------------------------------------------------------------


def test_max_rounds_zero_seeds_takes_the_baseline_and_returns():
    world = World()
    evaluator = ScoringEvaluator()
    report = world.run(config=config(max_rounds=0), evaluator=evaluator)
    assert report.stopped_reason == "max_rounds"
    assert report.iterations == () and report.model_calls == 0
    assert evaluator.calls == [("baseline", 0, report.graph_ref)]
    assert report.best.score == 0.5
    assert world.revisions.appends == {"graph": 1}
    head = world.revisions.head(WORKSPACE, "graph")
    assert dict(head.meta) == {"iteration": 0, "origin": "skeleton"}


def test_a_baseline_passed_by_the_host_is_not_measured_again():
    world = World([add_step("good1")])
    evaluator = ScoringEvaluator()
    given_baseline = Evaluation("host", 0.5)
    report = world.run(evaluator=evaluator, baseline=given_baseline)
    assert [call[0] for call in evaluator.calls] == ["candidate"]
    assert report.rejections.entries[0].retained_score == 0.5


def test_an_onboarded_graph_seeds_with_its_origin_and_warnings():
    world = World()
    hooks = StageRecorder()
    human = {
        "nodes": [{"id": "step", "type": "ACTION", "description": "do it"}],
        "edges": [{"source": "step", "target": "ghost", "relation": "LEADS_TO"}],
    }
    with pytest.raises(GraphError):
        world.run(config=config(max_rounds=0), initial_graph=human)
    human["edges"] = [
        {"source": "Start", "target": "step", "relation": "LEADS_TO"},
        {"source": "step", "target": "End", "relation": "LEADS_TO"},
    ]
    report = world.run(config=config(max_rounds=0), initial_graph=human, hooks=hooks)
    assert world.revisions.head(WORKSPACE, "graph").meta["origin"] == "onboarded"
    assert any("skeleton_completed" in warning for warning in report.warnings)
    assert hooks.warnings == list(report.warnings)


def test_a_graph_and_a_bootstrap_result_seed_with_their_origins():
    world = World()
    world.run(config=config(max_rounds=0), initial_graph=five_node_graph())
    assert world.revisions.head(WORKSPACE, "graph").meta == {"iteration": 0, "origin": "onboarded"}
    other = World()
    result = BootstrapResult(graph=five_node_graph(), edits=None, solutions=2, refiner_calls=1)
    other.run(config=config(max_rounds=0), initial_graph=result)
    meta = other.revisions.head(WORKSPACE, "graph").meta
    assert meta == {
        "iteration": 0,
        "origin": "bootstrapped",
        "solutions": 2,
        "mode": "scratch_onetime",
        "refiner_calls": 1,
    }


def test_a_refused_bootstrap_or_an_invalid_graph_raises_before_any_model_call():
    world = World([add_step("good1")])
    with pytest.raises(GraphError, match="bootstrap refused"):
        world.run(initial_graph=BootstrapResult(graph=None, edits=None))
    broken = skeleton().with_edges([*skeleton().edges, Edge("Start", "LEADS_TO", "ghost")])
    with pytest.raises(GraphError):
        world.run(initial_graph=broken)
    assert world.models[-1].requests == [] and world.models[0].requests == []
    assert world.revisions.appends == {}


def test_initial_graph_is_refused_for_a_populated_workspace():
    world = World()
    world.run(config=config(max_rounds=0))
    with pytest.raises(ValueError, match="already has a graph"):
        world.run(config=config(max_rounds=0), initial_graph=five_node_graph())


def test_the_perfect_score_probe_stops_before_any_round():
    world = World([add_step("good1")])
    report = world.run(evaluator=ScoringEvaluator(score=lambda graph: 1.0), gate=TieAcceptingGate(perfect=1.0))
    assert report.stopped_reason == "perfect"
    assert report.iterations == () and report.model_calls == 0


# -- the five outcomes -----------------------------------------------------------------------------------------------


def test_an_improving_candidate_is_accepted_and_becomes_the_head():
    world = World([add_step("good1")])
    evaluator = ScoringEvaluator()
    hooks = StageRecorder()
    report = world.run(evaluator=evaluator, hooks=hooks)
    (round_one,) = report.iterations
    assert round_one.outcome == "accepted"
    assert round_one.decision == {"best_score": 0.5, "candidate_score": 0.6, "accepted": True}
    assert round_one.disposition is None
    assert report.best.score == 0.6 and "good1" in report.graph.nodes
    assert hooks.stages == ["baseline", "rollout:1", "refiner:1", "validation:1"]
    assert hooks.reports == [round_one]
    head = world.revisions.head(WORKSPACE, "graph")
    assert head.seq == 1 and head.digest == report.graph_ref == round_one.graph_ref
    assert head.meta["validation_score"] == 0.6 and head.meta["iteration"] == 1
    assert head.meta["baseline_ref"] == world.revisions.list(WORKSPACE, "graph")[1].digest
    assert head.meta["candidate_ref"] == head.digest
    entry = report.rejections.entries[0]
    assert (entry.kind, entry.retained_score, entry.validation.score) == ("accepted", 0.5, 0.6)
    assert entry.base_digest == head.meta["baseline_ref"]
    assert world.checkpoint(1) == {"completed": True}


def test_a_tie_is_accepted_by_the_default_gate_and_rejected_by_the_strict_one():
    tie = World([add_step("neutral")])
    assert tie.run().outcomes() == ["accepted"]
    strict = World([add_step("neutral")])
    report = strict.run(gate=StrictImprovementGate())
    assert report.outcomes() == ["rejected"]
    assert strict.revisions.appends["graph"] == 1


def test_a_worse_candidate_is_rejected_and_the_head_stays():
    world = World([add_step("bad1")])
    report = world.run()
    assert report.outcomes() == ["rejected"]
    entry = report.rejections.entries[0]
    assert (entry.retained_score, entry.validation.score) == (0.5, 0.4)
    assert entry.candidate_digest is not None and entry.candidate["nodes"]
    assert report.graph.is_skeleton and world.revisions.appends["graph"] == 1


@pytest.mark.parametrize("reply", [UNPARSEABLE, BROKEN])
def test_a_structural_failure_is_never_evaluated(reply):
    world = World([reply])
    evaluator = ScoringEvaluator()
    report = world.run(evaluator=evaluator)
    assert report.outcomes() == ["structural_failure"]
    assert evaluator.candidate_calls() == []
    entry = report.rejections.entries[0]
    assert entry.validation is None and entry.candidate is None and entry.candidate_digest is None
    assert any(d.is_error for d in entry.diagnostics)
    assert report.iterations[0].diagnostics


def test_an_empty_edit_set_is_no_action_and_never_retried():
    world = World([EMPTY, add_step("good1")])
    evaluator = ScoringEvaluator()
    report = world.run(config=config(role_retries=1), evaluator=evaluator)
    assert report.outcomes() == ["no_action"]
    assert len(world.models[0].requests) == 1
    assert evaluator.candidate_calls() == []


def test_a_refiner_retry_is_one_stage_and_warns():
    world = World([UNPARSEABLE, add_step("good1")])
    hooks = StageRecorder()
    report = world.run(config=config(role_retries=1), hooks=hooks)
    assert report.outcomes() == ["accepted"]
    assert report.model_calls == 2
    assert hooks.stages.count("refiner:1") == 1
    assert "refiner retried 1 time(s)" in report.iterations[0].warnings


# -- duplicates ------------------------------------------------------------------------------------------------------


def test_a_candidate_identical_to_the_head_is_a_duplicate_with_no_iteration():
    world = World([SAME_AS_HEAD])
    evaluator = ScoringEvaluator()
    report = world.run(evaluator=evaluator)
    assert report.outcomes() == ["duplicate_candidate"]
    assert report.rejections.entries[0].duplicate_of is None
    assert evaluator.candidate_calls() == []
    assert "identical to the current head graph" in report.iterations[0].warnings[0]


def test_a_candidate_rejected_earlier_is_a_duplicate_of_that_iteration():
    world = World([add_step("bad1"), add_step("good1"), add_step("bad1")])
    report = world.run(config=config(max_rounds=2))
    assert report.outcomes() == ["rejected", "accepted"]
    # the same edits on the new head give a different graph: only identical content is refused
    again = World([add_step("bad1"), EMPTY, add_step("bad1")])
    evaluator = ScoringEvaluator()
    report = again.run(config=config(max_rounds=3), evaluator=evaluator)
    assert report.outcomes() == ["rejected", "no_action", "duplicate_candidate"]
    assert report.rejections.entries[2].duplicate_of == 1
    assert [call[1] for call in evaluator.candidate_calls()] == [1]


@pytest.mark.parametrize("disposition", ["equivalent", "unresolved", "unmeasured", "invalid"])
def test_comparisons_that_were_not_measured_rejections_never_block_a_re_proposal(disposition):
    world = World([add_step("bad1"), add_step("bad1")])
    evaluator = ScoringEvaluator()
    gate = FixedGate(accepted=False, feedback={"disposition": disposition, "reasons": ["r"]})
    report = world.run(config=config(max_rounds=2), evaluator=evaluator, gate=gate)
    assert report.outcomes() == ["rejected", "rejected"]
    assert [call[1] for call in evaluator.candidate_calls()] == [1, 2]
    assert report.iterations[0].disposition == disposition


class MaterialisingGraphStore(RevisionGraphStore):
    """A host that stamps its own meta on every candidate (so its digest differs from the module's)."""

    def __init__(self, revisions, workspace, *, breaks=False):
        super().__init__(revisions, workspace)
        self.breaks = breaks

    def propose(self, current_ref, current, edits, candidate, *, iteration, rejections_ref):
        graph = candidate.with_meta(host="materialised")
        if self.breaks:
            graph = graph.with_edges([*graph.edges, Edge("Start", "LEADS_TO", "ghost")])
        meta = {"iteration": iteration, "rejections_ref": rejections_ref, "base_ref": current_ref}
        return Candidate(ref=f"host:{graph.digest}", graph=graph, edits=edits, meta=meta)

    def accept(self, candidate, *, expected_ref):
        return super().accept(candidate, expected_ref=expected_ref.removeprefix("host:"))


def test_the_host_candidate_is_canonical_and_its_difference_is_warned_about():
    world = World([add_step("good1")])
    evaluator = ScoringEvaluator()
    store = MaterialisingGraphStore(world.revisions, WORKSPACE)
    report = world.run(graph_store=store, evaluator=evaluator)
    assert report.outcomes() == ["accepted"]
    assert report.graph.meta == {"host": "materialised"}
    assert evaluator.candidate_calls()[0][2].startswith("host:")
    assert any("host materialised a candidate that differs" in w for w in report.iterations[0].warnings)
    assert report.rejections.entries[0].candidate_digest == report.graph.digest


def test_an_invalid_host_candidate_is_a_structural_failure_that_records_its_digest():
    """Spec order: the host graph is validated (3.2) before the duplicate check (3.4), so it fails again."""
    world = World([add_step("good1"), add_step("good1")])
    evaluator = ScoringEvaluator()
    store = MaterialisingGraphStore(world.revisions, WORKSPACE, breaks=True)
    report = world.run(config=config(max_rounds=2), graph_store=store, evaluator=evaluator)
    assert report.outcomes() == ["structural_failure", "structural_failure"]
    first, second = report.rejections.entries
    assert first.candidate_digest is not None and second.candidate_digest == first.candidate_digest
    assert any(d.code == "missing_endpoint" for d in first.diagnostics)
    assert report.rejections.rejected_digests() == {first.candidate_digest: 1}
    assert evaluator.candidate_calls() == []


# -- traces ----------------------------------------------------------------------------------------------------------


def test_stale_traces_are_kept_and_listed_under_warn():
    world = World([add_step("good1")])
    report = world.run(trace_source=TraceFeed(graph_ref="old"))
    (round_one,) = report.iterations
    assert round_one.stale_trace_ids == tuple(f"it1-t{i}" for i in range(4))
    assert round_one.trace_ids == round_one.stale_trace_ids
    assert any("kept and marked STALE" in w for w in round_one.warnings)
    assert "STALE" in world.models[0].requests[0].parts[0]


def test_stale_traces_are_left_out_and_not_stored_under_drop():
    world = World([add_step("good1")])
    report = world.run(config=config(stale_trace_policy="drop"), trace_source=TraceFeed(graph_ref="old"))
    (round_one,) = report.iterations
    assert round_one.trace_ids == () and len(round_one.stale_trace_ids) == 4
    assert world.revisions.head(WORKSPACE, "traces").document["traces"] == []


def test_stale_traces_pass_silently_under_allow():
    world = World([add_step("good1")])
    report = world.run(config=config(stale_trace_policy="allow"), trace_source=TraceFeed(graph_ref="old"))
    (round_one,) = report.iterations
    assert round_one.stale_trace_ids == () and len(round_one.trace_ids) == 4 and round_one.warnings == ()


def test_traces_are_redacted_before_the_refiner_and_the_store():
    world = World([add_step("good1")])
    world.run(redact=lambda text: text.replace("secret", "[redacted]"))
    stored = world.revisions.head(WORKSPACE, "traces").document["traces"]
    assert all("secret" not in trace["text"] for trace in stored)
    prompt = world.models[0].requests[0].parts[0]
    assert "[redacted]-0" in prompt and "secret-0" not in prompt


def test_stratified_sampling_picks_per_stratum_and_resumes_across_calls():
    replies = [EMPTY] * 3
    options = {"failing_sample": 1, "passing_sample": 1}
    together = World(replies)
    report = together.run(config=config(max_rounds=3, **options))
    picked = [iteration.trace_ids for iteration in report.iterations]
    assert all(len(ids) == 2 for ids in picked)
    assert picked[0] != picked[1], "rotation through unseen ids"

    one_by_one = World(replies)
    separately = [one_by_one.run(config=config(max_rounds=1, **options)).iterations[0].trace_ids for _ in range(3)]
    assert separately == picked


def test_without_sampling_every_trace_reaches_the_refiner():
    world = World([EMPTY])
    report = world.run()
    assert len(report.iterations[0].trace_ids) == 4
    assert report.rejections.entries[0].trace_scores == {"it1-t0": 1.0, "it1-t1": 0.0, "it1-t2": 1.0, "it1-t3": 0.0}


# -- budgets ---------------------------------------------------------------------------------------------------------


def test_budget_exhausted_at_the_baseline_returns_no_best_and_no_rounds():
    world = World([add_step("good1")])
    evaluator = ScoringEvaluator()
    report = world.run(config=config(budget=Budget(max_evaluations=0)), evaluator=evaluator)
    assert report.stopped_reason == "budget_exhausted"
    assert report.best is None and report.iterations == ()
    assert evaluator.calls == [] and world.revisions.appends == {"graph": 1}


def test_budget_exhausted_before_a_round_keeps_the_finished_rounds():
    world = World([add_step("good1"), add_step("good2")])
    report = world.run(config=config(max_rounds=2, budget=Budget(max_model_calls=1)))
    assert report.stopped_reason == "budget_exhausted"
    assert report.outcomes() == ["accepted"]
    assert report.budget["model_calls"] == 1
    assert world.revisions.appends["rejections"] == 1


def test_budget_exhausted_inside_a_refiner_call_abandons_the_round_without_a_trace_in_the_chains():
    world = World([UNPARSEABLE, add_step("good1")])
    report = world.run(config=config(role_retries=1, budget=Budget(max_model_calls=1)))
    assert report.stopped_reason == "budget_exhausted" and report.iterations == ()
    assert "rejections" not in world.revisions.appends
    assert world.revisions.appends["graph"] == 1
    assert world.checkpoint(1) is None


def test_budget_exhausted_before_an_evaluation_keeps_checkpoint_one_and_a_later_run_finishes_the_round():
    world = World([add_step("good1")])
    evaluator = ScoringEvaluator()
    report = world.run(config=config(budget=Budget(max_evaluations=1)), evaluator=evaluator)
    assert report.stopped_reason == "budget_exhausted" and report.iterations == ()
    assert "rejections" not in world.revisions.appends and world.revisions.appends["graph"] == 1
    pending = world.checkpoint(1)
    assert pending["edits"]["add_nodes"][0]["id"] == "good1" and "evaluation" not in pending

    later = world.run(evaluator=evaluator)
    assert later.resumed_iteration == 1 and later.outcomes() == ["accepted"]
    assert later.iterations[0].resumed and later.model_calls == 0
    assert [call[1] for call in evaluator.candidate_calls()] == [1]


def test_a_hooked_model_keeps_its_meter_and_adopts_the_config_budget():
    world = World([add_step("good1"), add_step("good2")])
    meter = Meter()
    model = HookedModel(ScriptedChatModel(world.replies), meter)
    report = world.run(config=config(max_rounds=2, budget=Budget(max_model_calls=1)), model=model)
    assert meter.budget == Budget(max_model_calls=1)
    assert report.stopped_reason == "budget_exhausted" and report.budget["model_calls"] == 1

    resumed_meter = Meter(Budget(max_model_calls=2), used=report.budget)
    model = HookedModel(ScriptedChatModel(world.replies[1:]), resumed_meter)
    report = world.run(config=config(max_rounds=2), model=model)
    assert report.outcomes() == ["accepted"] and report.budget["model_calls"] == 2
    assert report.stopped_reason == "budget_exhausted"


# -- resume ----------------------------------------------------------------------------------------------------------

SCRIPT = [add_step("good1"), add_step("bad1"), BROKEN, add_step("bad1"), EMPTY, add_step("good2")]
ROUNDS = len(SCRIPT)


def uninterrupted():
    world = World(SCRIPT)
    evaluator = ScoringEvaluator()
    report = world.run(config=config(max_rounds=ROUNDS), evaluator=evaluator)
    return world, evaluator, report


def test_the_resume_script_covers_every_outcome():
    _, _, report = uninterrupted()
    assert report.outcomes() == [
        "accepted",
        "rejected",
        "structural_failure",
        "duplicate_candidate",
        "no_action",
        "accepted",
    ]


def rounds_recorded(world):
    return RevisionRejectionStore(world.revisions, WORKSPACE).load()[1].iteration


def run_to_completion(world, first_run):
    """Run until every round is recorded, with fresh per-run objects after each crash; (report, evaluators used)."""
    evaluators = []
    attempt = first_run
    for _ in range(ROUNDS + 3):
        evaluator, options = attempt()
        evaluators.append(evaluator)
        attempt = lambda: (ScoringEvaluator(), {})  # noqa: E731
        remaining = ROUNDS - rounds_recorded(world)
        try:
            report = world.run(config=config(max_rounds=remaining), evaluator=evaluator, **options)
        except (Crash, EvaluationPending):
            continue
        if rounds_recorded(world) == ROUNDS:
            return report, evaluators
    raise AssertionError("the run never finished")


def candidate_evaluations(evaluators):
    return sorted(call[1] for evaluator in evaluators for call in evaluator.candidate_calls())


@pytest.mark.parametrize("stage", ["baseline", "rollout:2", "refiner:2", "validation:2", "rollout:6", "validation:6"])
def test_a_crash_entering_any_stage_resumes_to_the_uninterrupted_chains(stage):
    expected, expected_evaluator, _ = uninterrupted()
    world = World(SCRIPT)
    report, evaluators = run_to_completion(world, lambda: (ScoringEvaluator(), {"hooks": StageRecorder(stage)}))
    assert world.chains() == expected.chains()
    assert world.revisions.appends["graph"] == expected.revisions.appends["graph"]
    assert world.revisions.appends["rejections"] == expected.revisions.appends["rejections"]
    assert candidate_evaluations(evaluators) == candidate_evaluations([expected_evaluator])
    assert report.graph == expected.run(config=config(max_rounds=0)).graph


@pytest.mark.parametrize("iteration", [1, 2, 6])
def test_a_crash_inside_the_evaluator_resumes_without_a_second_evaluation(iteration):
    expected, expected_evaluator, _ = uninterrupted()
    world = World(SCRIPT)
    first = lambda: (ScoringEvaluator(raise_on=("candidate", iteration)), {})  # noqa: E731
    _, evaluators = run_to_completion(world, first)
    assert world.chains() == expected.chains()
    assert candidate_evaluations(evaluators) == candidate_evaluations([expected_evaluator])


def test_evaluation_pending_propagates_and_a_later_call_resumes_the_round():
    world = World([add_step("good1")])
    waiting = ScoringEvaluator(raise_on=("candidate", 1), exception=EvaluationPending)
    with pytest.raises(EvaluationPending):
        world.run(evaluator=waiting)
    pending = world.checkpoint(1)
    assert set(pending) >= {"edits", "candidate", "candidate_digest", "graph_ref", "trace_ids", "mode"}
    assert "rejections" not in world.revisions.appends
    answered = ScoringEvaluator()
    report = world.run(evaluator=answered)
    assert report.outcomes() == ["accepted"] and report.resumed_iteration == 1
    assert world.models[-1].requests == [], "the refiner is not asked again"
    assert [call[:2] for call in answered.calls] == [("baseline", 0), ("candidate", 1)]


class CrashingGraphStore(RevisionGraphStore):
    def __init__(self, revisions, workspace, *, when):
        super().__init__(revisions, workspace)
        self.when = when

    def accept(self, candidate, *, expected_ref):
        if self.when == "before":
            raise Crash("before accept")
        ref = super().accept(candidate, expected_ref=expected_ref)
        raise Crash(f"after accept {ref[:12]}")


class CrashingRejectionStore(RevisionRejectionStore):
    def save(self, memory, *, expected_ref, iteration):
        raise Crash("before the rejection save")


def test_a_crash_after_the_decision_and_before_the_accept_reuses_the_decision():
    expected, _, _ = uninterrupted()
    world = World(SCRIPT)
    gate_calls = []

    class CountingGate(TieAcceptingGate):
        def decide(self, best, candidate):
            if best is not candidate:
                gate_calls.append(candidate.ref)
            return super().decide(best, candidate)

    def first():
        crashing = CrashingGraphStore(world.revisions, WORKSPACE, when="before")
        return ScoringEvaluator(), {"graph_store": crashing, "gate": CountingGate()}

    _, evaluators = run_to_completion(world, first)
    assert world.chains() == expected.chains()
    assert world.checkpoint(1) == {"completed": True}
    assert len(gate_calls) == 1, "the recorded decision is reused"
    assert candidate_evaluations(evaluators)[:1] == [1]


@pytest.mark.parametrize("crash", ["after accept", "before rejection save"])
def test_resume_after_an_acceptance_records_it_without_accepting_again(crash):
    expected, expected_evaluator, _ = uninterrupted()
    world = World(SCRIPT)
    if crash == "after accept":
        options = {"graph_store": CrashingGraphStore(world.revisions, WORKSPACE, when="after")}
    else:
        options = {"rejection_store": CrashingRejectionStore(world.revisions, WORKSPACE)}
    with pytest.raises(Crash):
        world.run(config=config(max_rounds=ROUNDS), **options)
    assert world.revisions.appends["graph"] == 2, "the acceptance landed"

    evaluator = ScoringEvaluator()
    hooks = StageRecorder()
    report = world.run(config=config(max_rounds=ROUNDS), evaluator=evaluator, hooks=hooks)
    assert report.resumed_iteration == 1 and report.iterations[0].resumed
    assert any("baseline taken from the pending checkpoint" in w for w in report.warnings)
    assert "baseline" not in hooks.stages
    assert world.chains() == expected.chains()
    assert world.revisions.appends["graph"] == expected.revisions.appends["graph"]
    assert candidate_evaluations([evaluator]) == candidate_evaluations([expected_evaluator])[1:]
    entry = report.rejections.entries[0]
    assert (entry.kind, entry.retained_score, entry.decision["accepted"]) == ("accepted", 0.5, True)


def test_iteration_numbers_continue_across_runs():
    world = World([add_step("good1"), EMPTY, add_step("good2")])
    first = world.run(config=config(max_rounds=2))
    second = world.run(config=config(max_rounds=1))
    assert [it.iteration for it in first.iterations] == [1, 2]
    assert [it.iteration for it in second.iterations] == [3]
    assert second.rejections.iteration == 3 and second.accepted == 1


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    iteration=st.integers(min_value=1, max_value=ROUNDS),
    stage=st.sampled_from(["rollout", "refiner", "validation", "evaluator", "before accept", "after accept", "save"]),
)
def test_property_a_crash_anywhere_resumes_to_the_same_chains(iteration, stage):
    expected, _, _ = uninterrupted()
    world = World(SCRIPT)

    def first():
        if stage in ("rollout", "refiner", "validation"):
            return ScoringEvaluator(), {"hooks": StageRecorder(f"{stage}:{iteration}")}
        if stage == "evaluator":
            return ScoringEvaluator(raise_on=("candidate", iteration)), {}
        if stage == "save":
            return ScoringEvaluator(), {"rejection_store": CrashOnce(world.revisions, WORKSPACE, iteration)}
        when = "before" if stage == "before accept" else "after"
        return ScoringEvaluator(), {"graph_store": CrashingGraphStore(world.revisions, WORKSPACE, when=when)}

    _, evaluators = run_to_completion(world, first)
    assert world.chains() == expected.chains()
    assert world.revisions.appends["graph"] == expected.revisions.appends["graph"]
    counted = candidate_evaluations(evaluators)
    assert len(counted) == len(set(counted)), "no round is evaluated twice"


class CrashOnce(RevisionRejectionStore):
    def __init__(self, revisions, workspace, iteration):
        super().__init__(revisions, workspace)
        self.iteration = iteration

    def save(self, memory, *, expected_ref, iteration):
        if iteration == self.iteration:
            raise Crash("before the rejection save")
        return super().save(memory, expected_ref=expected_ref, iteration=iteration)


# -- objective mode --------------------------------------------------------------------------------------------------


class ObjectiveEvaluator(ScoringEvaluator):
    """Scores with a `quality` metric and the objective context; `wrong_ref` names another graph."""

    def __init__(self, context, wrong_ref_for=None):
        super().__init__()
        self.context = context
        self.wrong_ref_for = wrong_ref_for

    def evaluate(self, ref, graph, *, iteration, purpose):
        plain = super().evaluate(ref, graph, iteration=iteration, purpose=purpose)
        outcomes = tuple(
            type(outcome)(outcome.task_id, outcome.score, outcome.passed, metrics={"quality": outcome.score})
            for outcome in plain.per_task
        )
        named = "someone-else" if purpose == self.wrong_ref_for else ref
        return Evaluation(named, plain.score, plain.aggregate, outcomes, objective_context=self.context)


def objective_config(**options):
    objective, context = objective_and_context()
    return config(objective=objective, objective_context=context, **options), context


def test_objective_mode_defaults_to_the_objective_gate_and_records_the_binding():
    world = World([add_step("good1")])
    cfg, context = objective_config()
    report = world.run(config=cfg, evaluator=ObjectiveEvaluator(context))
    (round_one,) = report.iterations
    assert round_one.disposition is not None
    assert round_one.decision["objective_digest"] == cfg.objective.digest


def test_objective_mode_refuses_a_baseline_naming_another_graph():
    world = World([add_step("good1")])
    cfg, context = objective_config()
    with pytest.raises(ValueError, match=r"baseline Evaluation\.ref"):
        world.run(config=cfg, evaluator=ObjectiveEvaluator(context, wrong_ref_for="baseline"))


def test_objective_mode_refuses_a_candidate_evaluation_naming_another_graph():
    world = World([add_step("good1")])
    cfg, context = objective_config()
    with pytest.raises(ValueError, match="REQ-004"):
        world.run(config=cfg, evaluator=ObjectiveEvaluator(context, wrong_ref_for="candidate"))


def test_objective_mode_checks_the_gate_digests_and_warns_about_a_scalar_gate():
    world = World([add_step("good1")])
    cfg, context = objective_config()
    other_objective, other_context = objective_and_context(cohort="c2")
    with pytest.raises(ValueError, match="context digest"):
        world.run(config=cfg, gate=ObjectiveGate(other_objective, other_context))
    report = world.run(config=cfg, gate=TieAcceptingGate(), evaluator=ObjectiveEvaluator(context))
    assert any("not an objective gate" in warning for warning in report.warnings)


def _pending_round(world, cfg, evaluator):
    with pytest.raises(EvaluationPending):
        world.run(config=cfg, evaluator=evaluator)


def test_a_round_pending_under_an_objective_cannot_resume_without_it():
    world = World([add_step("good1")])
    cfg, context = objective_config()
    waiting = ObjectiveEvaluator(context)
    waiting.raise_on, waiting.exception = ("candidate", 1), EvaluationPending
    _pending_round(world, cfg, waiting)
    assert world.checkpoint(1)["objective_binding"]["objective_digest"] == cfg.objective.digest
    with pytest.raises(ValueError, match=f"workspace '{WORKSPACE}'.*configured with no objective"):
        world.run(config=config())
    _, other_context = objective_and_context(cohort="c2")
    with pytest.raises(ValueError, match="bound to another objective"):
        world.run(config=config(objective=cfg.objective, objective_context=other_context))
    assert world.checkpoint(1)["objective_binding"], "the pending record is never relabelled"


def test_a_round_pending_without_an_objective_cannot_resume_under_one():
    world = World([add_step("good1")])
    _pending_round(world, config(), ScoringEvaluator(raise_on=("candidate", 1), exception=EvaluationPending))
    cfg, context = objective_config()
    with pytest.raises(ValueError, match=f"workspace '{WORKSPACE}'.*bound to no objective"):
        world.run(config=cfg, evaluator=ObjectiveEvaluator(context))


# -- stop rules ------------------------------------------------------------------------------------------------------


def test_an_acceptance_reaching_the_perfect_score_stops_the_run():
    world = World([add_step("good1"), add_step("good2")])
    report = world.run(
        config=config(max_rounds=2),
        evaluator=ScoringEvaluator(score=lambda graph: 1.0 if "good1" in graph.nodes else 0.5),
        gate=TieAcceptingGate(perfect=1.0),
    )
    assert report.stopped_reason == "perfect" and report.outcomes() == ["accepted"]


def test_a_gate_asking_to_stop_ends_the_run():
    world = World([add_step("bad1"), add_step("bad2")])
    report = world.run(config=config(max_rounds=2), gate=FixedGate(stop=True))
    assert report.stopped_reason == "gate_stop" and report.outcomes() == ["rejected"]


def test_a_streak_of_unaccepted_rounds_stops_the_run_and_an_acceptance_resets_it():
    world = World([UNPARSEABLE, add_step("good1"), EMPTY, add_step("bad1"), EMPTY])
    report = world.run(config=config(max_rounds=5, max_rejected_streak=2))
    assert report.stopped_reason == "rejected_streak"
    assert report.outcomes() == ["structural_failure", "accepted", "no_action", "rejected"]


def test_the_loop_ends_at_max_rounds():
    world = World([EMPTY, EMPTY])
    report = world.run(config=config(max_rounds=2))
    assert report.stopped_reason == "max_rounds" and len(report.iterations) == 2


# -- reports ---------------------------------------------------------------------------------------------------------


def test_the_run_report_serializes_with_outcomes_and_a_graph_summary():
    world = World([add_step("good1"), EMPTY])
    report = world.run(config=config(max_rounds=2))
    assert isinstance(report, RunReport) and isinstance(report.iterations[0], IterationReport)
    document = report.to_dict()
    assert document["outcomes"] == ["accepted", "no_action"] and document["accepted"] == 1
    assert document["graph"] == {"nodes": 3, "edges": 3, "digest": report.graph.digest}
    assert document["best"]["score"] == 0.6
    assert document["rejections"]["counts"]["no_action"] == 1
    assert set(document["budget"]) == {"model_calls", "output_tokens", "evaluations", "seconds", "ceilings"}
    assert document["iterations"][0]["decision"]["accepted"] is True
    assert "decision" not in document["iterations"][1]


def test_checkpoints_hold_the_keys_of_each_save():
    world = World([add_step("good1")])
    saved = []

    class Recording(type(world.stores()["checkpoint_store"])):
        def save(self, iteration, payload):
            saved.append(dict(payload))
            super().save(iteration, payload)

    world.run(checkpoint_store=Recording(world.revisions, WORKSPACE))
    first = {
        "edits",
        "candidate",
        "candidate_digest",
        "diagnostics",
        "rejections_ref",
        "graph_ref",
        "trace_ids",
        "trace_scores",
        "stale_trace_ids",
        "mode",
    }
    second = first | {"host_candidate_digest", "host_ref", "evaluation", "baseline_evaluation", "baseline_ref"}
    assert [set(payload) for payload in saved] == [first, second, second | {"decision"}, {"completed"}]
