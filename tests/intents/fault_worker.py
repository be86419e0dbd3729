"""The Celery app of the intent proposal fault test's worker subprocess (tests/faults.py): short proposal leases, the
test embedder, the scripted model of the intents tests (one reply per batch: each run's label from FAULT_DIR/
labels.json, with its first two steps as evidence), and test-only patches that SIGKILL the pool process once at
"model:<seq>" (inside batch <seq>'s model call, its ledger row written) and "settled:<seq>" (batch <seq>'s
transaction committed, the next step enqueued)."""

import json
import os
from pathlib import Path

from tests.faults import die_once_at, worker_app

app = worker_app()

from django.conf import settings  # noqa: E402

from intents import services  # noqa: E402
from llm.core import ScriptedChatModel  # noqa: E402
from tests.intents.helpers import reply  # noqa: E402

settings.WAYMARK_INTENT_LEASE_SECONDS = int(os.environ.get("FAULT_LEASE_SECONDS", "2"))
settings.WAYMARK_INTENT_EMBEDDER = "tests.intents.helpers.embedder_factory"
LABELS = Path(os.environ["FAULT_DIR"]) / "labels.json"


class DyingModel:
    """The scripted model, killed once inside the call of the batch named by a "model:<seq>" point."""

    def __init__(self, inner: ScriptedChatModel, seq: int) -> None:
        self.inner = inner
        self.seq = seq
        self.model_id = inner.model_id

    def complete(self, request):
        die_once_at(f"model:{self.seq}")
        return self.inner.complete(request)


def proposal_model(batch, briefs):
    labels = json.loads(LABELS.read_text())
    rows = [
        {
            "intent": labels[brief.run.trajectory_id],
            "kind": "inferred",
            "evidence": [{"trajectory_id": brief.run.trajectory_id, "start": 0, "end": 1}],
        }
        for brief in briefs
    ]
    return DyingModel(ScriptedChatModel([reply(*rows)], cycle=True, model_id="scripted-test"), batch.seq)


services.proposal_model = proposal_model

_settle = services._settle


def settle(run, batch, worker, outcome):
    result = _settle(run, batch, worker, outcome)
    die_once_at(f"settled:{batch.seq}")
    return result


services._settle = settle
