"""Persistence of procedural graphs: workspaces and their append-only revision chains (DESIGN.md §5)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from common.leases.models import Leased
from graphs.core import DEFAULT_ATTRIBUTE_FIELDS, DEFAULT_NODE_TYPES, DEFAULT_RELATIONS


def default_vocabulary() -> dict[str, list[str]]:
    return {
        "relations": list(DEFAULT_RELATIONS),
        "node_types": list(DEFAULT_NODE_TYPES),
        "attribute_fields": list(DEFAULT_ATTRIBUTE_FIELDS),
    }


class Workspace(models.Model):
    """One task family an agent works on; `active_revision` is the single pointer to the graph agents receive (with
    `canary_control`, while a canary runs: the revision the other runs receive)."""

    slug = models.SlugField(max_length=100, unique=True)
    title = models.CharField(max_length=200, blank=True)
    task_description = models.TextField(blank=True)
    vocabulary = models.JSONField(default=default_vocabulary)
    active_revision = models.ForeignKey(
        "graphs.Revision", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # The watch after activation (uplift.core.canary): while the active revision is a canary, the revision it
    # replaced stays live as the control for the runs outside the share. Both are set and cleared together.
    canary_control = models.ForeignKey(
        "graphs.Revision", null=True, blank=True, on_delete=models.PROTECT, related_name="+",
        help_text="while the active revision is a canary: the revision it replaced, served to the other runs",
    )  # fmt: skip
    canary_share = models.FloatField(default=0.0, help_text="the share of runs served the active revision (0: all)")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    @property
    def display_title(self) -> str:
        return self.title or self.slug


def revision_label(seq: int, digest: str) -> str:
    """`#2 · 3fa9c1d`: the one name of a revision (for rows read with .values() as well as for instances)."""
    return f"#{seq} · {(digest or '')[:7]}"


class RevisionQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise TypeError("revisions are append-only: they are never updated")

    def delete(self):
        raise TypeError("revisions are append-only: they are never deleted")


class Revision(models.Model):
    """One immutable JSON document in the chain of one (workspace, kind); seq 0 is the first."""

    class Kind(models.TextChoices):
        GRAPH = "graph"
        REJECTIONS = "rejections"
        TRACES = "traces"
        CHECKPOINTS = "checkpoints"

    workspace = models.ForeignKey(Workspace, on_delete=models.PROTECT, related_name="revisions")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    seq = models.PositiveIntegerField()
    digest = models.CharField(max_length=64, help_text="SHA-256 of the canonical JSON of the document only")
    parent_digest = models.CharField(max_length=64, null=True, blank=True)
    # The whole document, or (a rejection memory only) null with `appended`: the memory document of the entries this
    # revision adds to its parent's, so a round writes its one entry, not the whole memory again. The whole document
    # of such a revision is read through graphs.evolution.stores.memory_document (its digest is the whole one's).
    document = models.JSONField(null=True)
    appended = models.JSONField(null=True, blank=True)
    meta = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = RevisionQuerySet.as_manager()

    class Meta:
        ordering = ["workspace", "kind", "-seq"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "kind", "seq"], name="graphs_revision_one_per_seq"),
            models.CheckConstraint(
                condition=(
                    models.Q(document__isnull=False, appended__isnull=True)
                    | models.Q(document__isnull=True, appended__isnull=False, kind="rejections")
                ),
                name="graphs_revision_document_or_appended",
            ),
        ]
        indexes = [models.Index(fields=["workspace", "kind", "digest"], name="graphs_revision_digest")]

    def __str__(self) -> str:
        return f"{self.workspace_id}/{self.kind}#{self.seq} {self.digest[:12]}"

    def save(self, *args, **kwargs):
        if self.pk is not None and not self._state.adding:
            raise TypeError("revisions are append-only: they are never updated")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise TypeError("revisions are append-only: they are never deleted")

    @property
    def short_digest(self) -> str:
        return self.digest[:12]

    @property
    def label(self) -> str:
        """How every page, message and API answer names a revision: `#seq · ` and the first 7 digest characters."""
        return revision_label(self.seq, self.digest)

    @property
    def origin(self) -> str:
        return str((self.meta or {}).get("origin", ""))

    @property
    def validation_score(self):
        return (self.meta or {}).get("validation_score")


class EvolutionRun(Leased):
    """One offline evolution of a workspace's graph: K rounds of refine → measure → gate, run by Celery one step at a
    time (graphs.evolution). The chains (graph, rejections, traces, checkpoints) are the truth; this row is the
    operator's view of the run plus the state a step needs to go on (lease, meter, the best evaluation so far)."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        WAITING = "waiting"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"
        BUDGET_EXHAUSTED = "budget_exhausted"

    FINISHED = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED, Status.BUDGET_EXHAUSTED)

    workspace = models.ForeignKey(Workspace, on_delete=models.PROTECT, related_name="evolution_runs")
    config = models.JSONField(default=dict, help_text="the EvolveConfig fields this run was started with")
    gate = models.JSONField(default=dict, help_text="{kind, …parameters}; objective mode holds both documents")
    budget = models.JSONField(default=dict)
    evaluator = models.CharField(max_length=100)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    stage = models.CharField(max_length=40, blank=True)
    rounds_planned = models.PositiveIntegerField()
    rounds_done = models.PositiveIntegerField(default=0)
    first_iteration = models.PositiveIntegerField(null=True, blank=True)
    meter = models.JSONField(default=dict, blank=True)
    cost = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    baseline = models.JSONField(null=True, blank=True, help_text="the baseline Evaluation document")
    best = models.JSONField(null=True, blank=True, help_text="the retained Evaluation document")
    stopped_reason = models.CharField(max_length=40, blank=True)
    error = models.TextField(blank=True)
    warnings = models.JSONField(default=list, blank=True)
    cancel_requested = models.BooleanField(default=False)
    started_by = models.ForeignKey(
        "accounts.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="evolution_runs"
    )
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["workspace", "-id"], name="graphs_evolution_ws"),
            models.Index(fields=["status", "lease_expires_at"], name="graphs_evolution_lease"),
        ]
        constraints = [
            # One unfinished run per workspace: two runs would race for the same chains.
            models.UniqueConstraint(
                fields=["workspace"],
                condition=models.Q(status__in=["queued", "running", "waiting"]),
                name="graphs_evolution_one_open_per_workspace",
            ),
        ]

    def __str__(self) -> str:
        return f"evolution {self.pk} of {self.workspace_id} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED

    @property
    def baseline_score(self):
        return (self.baseline or {}).get("score")

    @property
    def best_score(self):
        return (self.best or {}).get("score")


class EvolutionRound(models.Model):
    """One round of a run, written in the same transaction as the rejection-memory revision that records it."""

    run = models.ForeignKey(EvolutionRun, on_delete=models.PROTECT, related_name="rounds")
    iteration = models.PositiveIntegerField(help_text="the workspace's round number (continues across runs)")
    outcome = models.CharField(max_length=30)
    disposition = models.CharField(max_length=20, blank=True)
    mode = models.CharField(max_length=30, blank=True)
    retained_score = models.FloatField(null=True, blank=True)
    candidate_score = models.FloatField(null=True, blank=True)
    edits = models.JSONField(default=dict)
    edit_counts = models.JSONField(default=dict)
    diagnostics = models.JSONField(default=list)
    decision = models.JSONField(null=True, blank=True)
    candidate_digest = models.CharField(max_length=64, blank=True)
    base_digest = models.CharField(max_length=64, blank=True)
    duplicate_of = models.PositiveIntegerField(null=True, blank=True)
    trace_ids = models.JSONField(default=list)
    rejections_revision = models.ForeignKey(Revision, on_delete=models.PROTECT, related_name="+")
    graph_revision = models.ForeignKey(Revision, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    model_calls = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["run", "iteration"]
        constraints = [
            models.UniqueConstraint(fields=["run", "iteration"], name="graphs_evolution_round_once"),
        ]

    def __str__(self) -> str:
        return f"round {self.iteration} of run {self.run_id}: {self.outcome}"

    @property
    def short_candidate(self) -> str:
        return self.candidate_digest[:12]


class GraphCertification(Leased):
    """One paired evaluation of a graph revision (the candidate) against what it would replace (the control: the
    workspace's active revision, or no graph at all when there is none), on the same validation tasks, and the
    certificate (uplift) issued from it. Source "round": the two evaluations of the evolution round that accepted
    the candidate, when the graph that round retained is the active one (nothing is measured again); source
    "evaluation": both arms measured by a leased Celery step (graphs.certification_services)."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        WAITING = "waiting"
        DONE = "done"
        REFUSED = "refused"
        FAILED = "failed"

    class Source(models.TextChoices):
        ROUND = "round"
        EVALUATION = "evaluation"

    OPEN = (Status.QUEUED, Status.RUNNING, Status.WAITING)

    workspace = models.ForeignKey(Workspace, on_delete=models.PROTECT, related_name="certifications")
    candidate = models.ForeignKey(Revision, on_delete=models.PROTECT, related_name="certifications")
    control = models.ForeignKey(
        Revision, null=True, blank=True, on_delete=models.PROTECT, related_name="+", help_text="empty: no graph"
    )
    source = models.CharField(max_length=20, choices=Source.choices)
    evaluator = models.CharField(max_length=100)
    config = models.JSONField(default=dict, blank=True, help_text="what the evaluator needs (validation tasks)")
    evolution_run = models.ForeignKey(
        EvolutionRun, null=True, blank=True, on_delete=models.PROTECT, related_name="certifications"
    )
    iteration = models.PositiveIntegerField(null=True, blank=True, help_text="the round that accepted the candidate")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    candidate_evaluation = models.JSONField(null=True, blank=True)
    control_evaluation = models.JSONField(null=True, blank=True)
    certificate_id = models.PositiveBigIntegerField(null=True, blank=True, help_text="the uplift certificate issued")
    passed = models.BooleanField(null=True, blank=True)
    error = models.TextField(blank=True)
    requested_by = models.ForeignKey(
        "accounts.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="graph_certifications"
    )
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["candidate", "-id"], name="graphs_certification_candidate"),
            models.Index(fields=["status", "lease_expires_at"], name="graphs_certification_lease"),
        ]
        constraints = [
            # A round certifies its candidate once, whatever a crashed and resumed step does.
            models.UniqueConstraint(
                fields=["evolution_run", "iteration"],
                condition=models.Q(evolution_run__isnull=False),
                name="graphs_certification_once_per_round",
            ),
            # One open evaluation per candidate: asking again while one runs returns that one.
            models.UniqueConstraint(
                fields=["candidate"],
                condition=models.Q(status__in=["queued", "running", "waiting"]),
                name="graphs_certification_one_open_per_candidate",
            ),
        ]

    def __str__(self) -> str:
        return f"certification {self.pk} of revision {self.candidate_id} ({self.status})"

    @property
    def is_open(self) -> bool:
        return self.status in self.OPEN
