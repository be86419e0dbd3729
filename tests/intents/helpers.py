"""Shared helpers of the intents tests: stored runs, a small embedder, scripted models for the proposal service."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from llm.core import ScriptedChatModel
from tests.trajectories.factories import ingest, run_item, step_item
from trajectories.models import Run


class CountingEmbedder:
    """A deterministic 8-dimensional embedder that counts the texts it embedded."""

    name = "test-embedder-v1"
    dimensions = 8

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def embed(self, texts):
        self.embedded.extend(texts)
        rows = []
        for text in texts:
            digest = hashlib.sha256(text.encode()).digest()
            rows.append([byte / 255 + 0.01 for byte in digest[:8]])
        return np.array(rows, dtype=np.float32)


EMBEDDER = CountingEmbedder()


def embedder_factory() -> CountingEmbedder:
    """The factory named by WAYMARK_INTENT_EMBEDDER in these tests."""
    return EMBEDDER


def stored_runs(count: int = 2, **overrides) -> list[Run]:
    result = ingest(*(run_item(**overrides) for _ in range(count)))
    return list(Run.objects.filter(pk__in=result.created_ids).order_by("id"))


def failed_run() -> Run:
    return stored_runs(
        1,
        outcome="failure",
        intent="change_flight",
        steps=[step_item("search_flights"), step_item("book_flight", ok=False, observation="seat map unavailable")],
    )[0]


def tid(run: Run) -> str:
    return f"{run.source}:{run.external_id}"


def reply(*rows: dict) -> str:
    return json.dumps({"intents": list(rows)})


def intent_row(run: Run, label: str = "refund an order", kind: str = "inferred", start: int = 0, end: int = 1):
    return {"intent": label, "kind": kind, "evidence": [{"trajectory_id": tid(run), "start": start, "end": end}]}


def use_model(monkeypatch, *replies: str) -> list[ScriptedChatModel]:
    """Make every batch answer from `replies` in order (one shared script); returns the models created."""
    model = ScriptedChatModel(list(replies), model_id="scripted-test")
    models: list[ScriptedChatModel] = []

    def factory(batch, briefs):
        models.append(model)
        return model

    monkeypatch.setattr("intents.services.proposal_model", factory)
    return models
