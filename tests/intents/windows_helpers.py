"""Helpers of the window tests: an embedder with chosen vectors, stored candidates at chosen times, a taxonomy."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from intents.core.candidates import IntentEvidence, IntentKind, intent_candidate_id
from intents.core.normalize import normalize_intent
from intents.models import IntentCandidateRecord, IntentTaxonomy, TaxonomyVersion

T0 = datetime(2025, 3, 1, tzinfo=UTC)
DAY = timedelta(days=1)

# Two refund labels close together, two flight labels close together, one far from both.
VECTORS = {
    "refund an order": [1.0, 0.0, 0.0, 0.0],
    "refund my order": [0.98, 0.05, 0.0, 0.0],
    "change a flight": [0.0, 1.0, 0.0, 0.0],
    "change my flight": [0.0, 0.97, 0.08, 0.0],
    "cancel a subscription": [0.0, 0.0, 0.0, 1.0],
    "book a hotel": [0.0, 0.0, 1.0, 0.0],
}


class ChosenEmbedder:
    """4 dimensions: the chosen vector of a known label, a hashed one otherwise."""

    name = "window-test-embedder"
    dimensions = 4

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts):
        self.calls += 1
        rows = []
        for text in texts:
            if text in VECTORS:
                rows.append(VECTORS[text])
            else:
                digest = hashlib.sha256(text.encode()).digest()
                rows.append([byte / 255 + 0.01 for byte in digest[:4]])
        return np.array(rows, dtype=np.float32)


EMBEDDER = ChosenEmbedder()


def embedder_factory() -> ChosenEmbedder:
    return EMBEDDER


@pytest.fixture
def chosen_embedder(settings):
    settings.WAYMARK_INTENT_EMBEDDER = "tests.intents.windows_helpers.embedder_factory"
    EMBEDDER.calls = 0
    return EMBEDDER


def candidate(label: str, *, at: datetime, run: str = "demo:r1", start: int = 0, source: str = "model"):
    """A stored candidate (as a proposal would store it) created at `at`."""
    evidence = [IntentEvidence(trajectory_id=run, start=start, end=start)]
    cid = intent_candidate_id(IntentKind.INFERRED, label, evidence)
    return IntentCandidateRecord.objects.create(
        source=source,
        candidate_id=cid,
        intent=label,
        normalized=normalize_intent(label),
        kind="inferred",
        evidence=[{"trajectory_id": run, "start": start, "end": start, "run_id": None}],
        schema_version="trajectory-intents-v1",
        created_at=at,
    )


def window_of(*labels: str, at: datetime = T0, run_prefix: str = "demo:w") -> list[IntentCandidateRecord]:
    return [
        candidate(label, at=at + timedelta(minutes=index), run=f"{run_prefix}{index}")
        for index, label in enumerate(labels)
    ]


def activate_taxonomy(intents: list[tuple[str, str, list[str]]]) -> TaxonomyVersion:
    """An active taxonomy version with [(intent_id, label, candidate ids)]."""
    taxonomy, _ = IntentTaxonomy.objects.get_or_create(slug=IntentTaxonomy.DEFAULT_SLUG)
    number = TaxonomyVersion.objects.filter(taxonomy=taxonomy).count() + 1
    document = {
        "intents": [
            {
                "intent_id": iid,
                "label": label,
                "normalized": normalize_intent(label),
                "aliases": [],
                "candidate_ids": sorted(cids),
                "support": len(cids),
            }
            for iid, label, cids in intents
        ]
    }
    version = TaxonomyVersion.objects.create(
        taxonomy=taxonomy, number=number, document=document, digest=f"sha256:{number:064d}"
    )
    taxonomy.active_version = version
    taxonomy.save(update_fields=["active_version"])
    return version
