"""A small deterministic world for evolve tests: scripted replies, a scoring evaluator, stores that count writes."""

import json

from graphs.core.budget import Hooks
from graphs.core.evaluation import Decision, Evaluation, TaskOutcome, Trace
from graphs.core.evolve import EvolveConfig, evolve
from graphs.core.stores import (
    MemoryRevisionStore,
    RevisionCheckpointStore,
    RevisionGraphStore,
    RevisionRejectionStore,
    RevisionTraceStore,
)
from llm.core import ScriptedChatModel

WORKSPACE = "ws"
FIXED_TIME = "2026-01-01T00:00:00+00:00"


class Crash(Exception):
    """A simulated process death."""


def add_step(name, relation="LEADS_TO"):
    """A reply that adds ACTION node `name` on a path Start → name → End (keeping what is there)."""
    return json.dumps(
        {
            "add_nodes": [{"id": name, "type": "ACTION", "description": f"do {name}"}],
            "add_edges": [
                {"source": "Start", "target": name, "relation": relation, "guidance": f"go to {name}"},
                {"source": name, "target": "End", "relation": relation, "guidance": "finish"},
            ],
        }
    )


UNPARSEABLE = "I would rather not."
EMPTY = json.dumps({"add_nodes": [], "delete_nodes": [], "add_edges": [], "delete_edges": []})
BROKEN = json.dumps({"add_edges": [{"source": "Start", "target": "nowhere", "relation": "LEADS_TO", "guidance": "x"}]})
SAME_AS_HEAD = json.dumps(
    {
        "delete_edges": [{"source": "Start", "target": "End"}],
        "add_edges": [{"source": "Start", "target": "End", "relation": "LEADS_TO", "guidance": None}],
    }
)


def score_of(graph):
    """0.5, plus 0.1 per node named good*, minus 0.1 per node named bad*, within [0, 1]."""
    good = sum(node_id.startswith("good") for node_id in graph.nodes)
    bad = sum(node_id.startswith("bad") for node_id in graph.nodes)
    return round(min(1.0, max(0.0, 0.5 + 0.1 * good - 0.1 * bad)), 4)


class ScoringEvaluator:
    """Scores a graph with `score_of` on four tasks; records every call; optionally raises first."""

    def __init__(self, score=score_of, raise_on=None, exception=Crash):
        self.score = score
        self.calls = []
        self.raise_on = raise_on  # a (purpose, iteration) to refuse once
        self.exception = exception

    def evaluate(self, ref, graph, *, iteration, purpose):
        if self.raise_on == (purpose, iteration):
            self.raise_on = None
            raise self.exception(f"evaluator stopped at {purpose} {iteration}")
        self.calls.append((purpose, iteration, ref))
        value = self.score(graph)
        outcomes = [TaskOutcome(f"v{i}", value, value >= 0.5) for i in range(4)]
        return Evaluation(ref, value, {"purpose": purpose, "iteration": iteration}, tuple(outcomes))

    def candidate_calls(self):
        return [call for call in self.calls if call[0] == "candidate"]


class TraceFeed:
    """Four traces a round (two passing, two failing) tagged with the graph they ran under."""

    def __init__(self, graph_ref=None, count=4):
        self.graph_ref = graph_ref
        self.count = count
        self.calls = 0

    def collect(self, graph, *, graph_ref, iteration):
        self.calls += 1
        ref = self.graph_ref if self.graph_ref is not None else graph_ref
        return [
            Trace(
                f"it{iteration}-t{i}",
                TaskOutcome(f"t{i}", 1.0 if i % 2 == 0 else 0.0, i % 2 == 0),
                text=f"trace {i} secret-{i}",
                graph_ref=ref,
            )
            for i in range(self.count)
        ]


class CountingRevisions(MemoryRevisionStore):
    """MemoryRevisionStore counting appends per kind."""

    def __init__(self):
        super().__init__(clock=lambda: FIXED_TIME)
        self.appends = {}

    def append(self, workspace, kind, document, *, expected_head, meta=None):
        revision = super().append(workspace, kind, document, expected_head=expected_head, meta=meta)
        self.appends[kind] = self.appends.get(kind, 0) + 1
        return revision

    def digests(self, kind, workspace=WORKSPACE):
        return [revision.digest for revision in reversed(self.list(workspace, kind, 10_000))]


class StageRecorder(Hooks):
    """Records stages, iterations and warnings; raises Crash on entering `crash_at`."""

    def __init__(self, crash_at=None):
        self.stages = []
        self.reports = []
        self.warnings = []
        self.crash_at = crash_at

    def stage(self, name):
        if name == self.crash_at:
            raise Crash(f"crashed entering {name}")
        self.stages.append(name)
        return super().stage(name)

    def on_iteration(self, report):
        self.reports.append(report)

    def on_warning(self, message):
        self.warnings.append(message)


class FixedGate:
    """A custom gate that answers every comparison with one decision (the probe never stops)."""

    def __init__(self, accepted=False, feedback=None, stop=False):
        self.decision = Decision(accepted, feedback or {}, stop)

    def decide(self, best, candidate):
        if best is candidate:
            return Decision(False, {}, False)
        return self.decision


class World:
    """Stores over one CountingRevisions plus a way to run evolve over them with fresh per-run objects."""

    def __init__(self, replies=()):
        self.revisions = CountingRevisions()
        self.replies = list(replies)
        self.consumed = 0
        self.models = []

    def stores(self, workspace=WORKSPACE):
        return {
            "graph_store": RevisionGraphStore(self.revisions, workspace),
            "rejection_store": RevisionRejectionStore(self.revisions, workspace),
            "trace_store": RevisionTraceStore(self.revisions, workspace),
            "checkpoint_store": RevisionCheckpointStore(self.revisions, workspace),
        }

    def next_model(self):
        """A fresh scripted model holding the replies no earlier model consumed."""
        if self.models:
            self.consumed += len(self.models[-1].requests)
        model = ScriptedChatModel(self.replies[self.consumed :] or ["(script exhausted)"])
        self.models.append(model)
        return model

    def run(self, *, config=None, evaluator=None, trace_source=None, **options):
        config = config or EvolveConfig(max_rounds=len(self.replies), role_retries=0, workspace=WORKSPACE)
        arguments = {
            "config": config,
            "model": options.pop("model", None) or self.next_model(),
            "trace_source": trace_source or TraceFeed(),
            "evaluator": evaluator or ScoringEvaluator(),
            **self.stores(config.workspace),
        }
        arguments.update(options)
        return evolve(**arguments)

    def chains(self):
        return {kind: self.revisions.digests(kind) for kind in ("graph", "rejections")}

    def checkpoint(self, iteration):
        return RevisionCheckpointStore(self.revisions, WORKSPACE).load(iteration)
