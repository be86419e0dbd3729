"""Persistence of intents: proposal runs and their batches, the candidates they produced, and stored embeddings.

Rows are written only by intents.services. Candidates and embeddings are immutable once written: a candidate is
identified by its content id (spec §2.3) within its proposal source, an embedding by the SHA-256 of its text and the
embedder that computed it.
"""

from __future__ import annotations

import numpy as np
from django.db import models
from django.utils import timezone

from common.leases.models import Leased


class IntentProposalRun(Leased):
    """One operator- (or schedule-) started pass of the model over a selection of stored runs, batch by batch.

    The selection is resolved into batches when the run starts (a snapshot), so progress is `batches_done` of
    `batches_total`. A worker holds the run's lease while it works on one batch; the reaper re-enqueues a run whose
    lease lapsed."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"

    OPEN = (Status.QUEUED, Status.RUNNING)
    FINISHED = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)

    started_by = models.ForeignKey(
        "accounts.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="intent_proposal_runs"
    )
    scheduled = models.BooleanField(default=False, help_text="started by the beat schedule (runs not yet proposed)")
    window_from = models.DateTimeField(null=True, blank=True, help_text="runs stored at or after this time")
    window_to = models.DateTimeField(null=True, blank=True, help_text="runs stored before this time")
    intent_filter = models.CharField(max_length=200, blank=True, help_text="only runs with this declared intent")
    failed_only = models.BooleanField(default=False)
    only_new = models.BooleanField(default=False, help_text="only runs no earlier proposal covered")
    batch_size = models.PositiveIntegerField(default=5)
    scripted = models.BooleanField(default=False, help_text="answered by the deterministic stand-in (no model key)")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    runs_total = models.PositiveIntegerField(default=0)
    batches_total = models.PositiveIntegerField(default=0)
    batches_done = models.PositiveIntegerField(default=0)
    batches_malformed = models.PositiveIntegerField(default=0)
    batches_failed = models.PositiveIntegerField(default=0)
    candidates_count = models.PositiveIntegerField(default=0)
    malformed_replies = models.PositiveIntegerField(default=0, help_text="rejected replies, retries included")
    error = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["status", "lease_expires_at"], name="intents_proposal_lease")]

    def __str__(self) -> str:
        return f"intent proposal {self.pk} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED

    @property
    def progress_percent(self) -> int:
        if not self.batches_total:
            return 100 if self.is_finished else 0
        return int(100 * self.batches_done / self.batches_total)


class IntentProposalBatch(models.Model):
    """A few runs sent to the model together. A malformed reply is kept here with its error (every attempt), and
    the batch is retried once with the error fed back; a batch whose second reply is malformed too stores nothing."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        MALFORMED = "malformed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    SETTLED = (Status.SUCCEEDED, Status.MALFORMED, Status.FAILED, Status.CANCELLED)

    run = models.ForeignKey(IntentProposalRun, on_delete=models.CASCADE, related_name="batches")
    seq = models.PositiveIntegerField(help_text="the batch's position in its run, from 1")
    trajectory_ids = models.JSONField(default=list, help_text="the trajectory ids (source:external_id) in the batch")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0, help_text="claims by a worker (a crash counts)")
    model_call_ids = models.JSONField(default=list, help_text="ModelCall ids of this batch's calls, in order")
    rejected_replies = models.JSONField(
        default=list, help_text="every malformed reply: {attempt, model_call_id, error, text}"
    )
    raw_reply = models.TextField(blank=True, help_text="the last malformed reply, whole")
    error = models.TextField(blank=True, help_text="why the last reply was rejected, or why the batch failed")
    candidates_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="intents_batch_run_seq")]

    def __str__(self) -> str:
        return f"batch {self.seq} of intent proposal {self.run_id} ({self.status})"


class IntentBatchRun(models.Model):
    """Which stored runs a batch covers: lets the schedule find runs no proposal has covered yet."""

    batch = models.ForeignKey(IntentProposalBatch, on_delete=models.CASCADE, related_name="members")
    trajectory_run = models.ForeignKey("trajectories.Run", on_delete=models.CASCADE, related_name="intent_batches")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["batch", "trajectory_run"], name="intents_batch_run_once")]
        indexes = [models.Index(fields=["trajectory_run", "batch"], name="intents_batch_run_by_run")]

    def __str__(self) -> str:
        return f"run {self.trajectory_run_id} in batch {self.batch_id}"


class IntentCandidateRecord(models.Model):
    """One intent candidate (spec §2.3) as a proposal source produced it: the model (`model`) or one API client
    (`client:<user id>`). Immutable: the same candidate produced again is not written twice."""

    MODEL_SOURCE = "model"

    source = models.CharField(max_length=60, default=MODEL_SOURCE)
    candidate_id = models.CharField(max_length=40)
    intent = models.CharField(max_length=300)
    normalized = models.CharField(max_length=300, db_index=True)
    kind = models.CharField(max_length=20)
    evidence = models.JSONField(default=list, help_text="[{run_id, trajectory_id, start, end}], sorted")
    actual_outcome = models.TextField(blank=True)
    limitations = models.JSONField(default=list)
    schema_version = models.CharField(max_length=40)
    batch = models.ForeignKey(
        IntentProposalBatch, null=True, blank=True, on_delete=models.PROTECT, related_name="candidates"
    )
    submitted_by = models.ForeignKey(
        "accounts.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="intent_candidates"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["source", "candidate_id"], name="intents_candidate_once_per_source"),
        ]
        indexes = [
            models.Index(fields=["kind", "-id"], name="intents_candidate_kind"),
            models.Index(fields=["batch", "id"], name="intents_candidate_batch"),
        ]

    def __str__(self) -> str:
        return f"{self.candidate_id} {self.kind} {self.intent!r}"

    @property
    def is_client(self) -> bool:
        return self.source != self.MODEL_SOURCE


class Embedding(models.Model):
    """One text's vector under one embedder, stored once. The vector is float32 little-endian bytes: a quarter of
    the size of JSON text, exact on the way back, and loaded for clustering with one np.frombuffer."""

    text_digest = models.CharField(max_length=64, help_text="SHA-256 hex of the UTF-8 text")
    embedder = models.CharField(max_length=200)
    dimensions = models.PositiveIntegerField()
    vector = models.BinaryField()
    text = models.TextField(blank=True, help_text="the embedded text (labels are short), for inspection")
    submitted_by = models.ForeignKey(
        "accounts.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="intent_embeddings"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["text_digest", "embedder"], name="intents_embedding_once"),
        ]
        indexes = [models.Index(fields=["embedder", "dimensions"], name="intents_embedding_embedder")]

    def __str__(self) -> str:
        return f"{self.embedder} {self.text_digest[:12]} ({self.dimensions})"

    def as_array(self) -> np.ndarray:
        return np.frombuffer(bytes(self.vector), dtype="<f4")


from .taxonomy.models import *  # noqa: E402,F403
from .windows.models import *  # noqa: E402,F403
