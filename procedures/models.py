"""Procedures, their immutable versions and replay runs. Rows are written only by procedures' services
modules (mining.services, versions.services, versions.split and the replay services).

A `ProcedureVersion` never changes content once stored: `save()` on an existing row accepts only a status change,
and its queryset's `update()` accepts only `status`. The one active version is the `Procedure.active_version` pointer.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q

from common.leases.models import Leased


class ImmutableVersionError(RuntimeError):
    """A write tried to change a stored procedure version's content."""


class Procedure(models.Model):
    """One procedure per normalized intent key; `revision` counts pointer moves for optimistic checks."""

    intent = models.CharField(max_length=200, unique=True, help_text="the normalized intent key")
    title = models.CharField(max_length=200)
    active_version = models.ForeignKey(
        "ProcedureVersion", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    revision = models.PositiveIntegerField(default=0)
    canary_control = models.ForeignKey(
        "ProcedureVersion", null=True, blank=True, on_delete=models.PROTECT, related_name="+",
        help_text="while the active version is a canary: the version it replaced, still served to the other runs",
    )  # fmt: skip
    canary_share = models.FloatField(default=0.0, help_text="the share of runs served the active version (0: all)")
    certification_stamp = models.PositiveIntegerField(
        default=0, help_text="counts changes to what the active list says of certification (certificates, coverage)"
    )
    mined_through_run_id = models.BigIntegerField(default=0, help_text="the newest run the last mining considered")
    rubric_floor = models.FloatField(
        null=True,
        blank=True,
        help_text="live replay gate: every replayed run judged under the intent's active rubric must score at least "
        "this overall, with no required failure (null: no rubric check)",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["intent"]
        constraints = [
            models.CheckConstraint(
                condition=Q(rubric_floor__isnull=True) | (Q(rubric_floor__gte=0) & Q(rubric_floor__lte=1)),
                name="procedures_rubric_floor_0_1",
            ),
        ]

    def __str__(self) -> str:
        return self.title or self.intent


class VersionStatus(models.TextChoices):
    CANDIDATE = "candidate", "candidate"
    REPLAYING = "replaying", "replaying"
    READY = "ready", "ready"
    FAILED = "failed", "failed"
    ACTIVE = "active", "active"
    RETIRED = "retired", "retired"


class ProcedureVersionQuerySet(models.QuerySet):
    def update(self, **kwargs):
        if set(kwargs) - {"status"}:
            raise ImmutableVersionError("a procedure version's content cannot be changed; only its status moves")
        return super().update(**kwargs)


class ProcedureVersion(models.Model):
    """An immutable mined (or operator-amended) procedure: steps with retained arguments, identified by content."""

    procedure = models.ForeignKey(Procedure, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField()
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="children")
    steps = models.JSONField(default=list, help_text='[{"tool": str, "arguments": {...}}, ...]')
    preconditions = models.JSONField(default=list, blank=True)
    failure_exits = models.JSONField(default=list, blank=True)
    candidate_revision = models.CharField(max_length=80, help_text="learn_procedure's revision (tools only)")
    content_revision = models.CharField(max_length=80, help_text="sha256 over intent, steps, preconditions, exits")
    source_run_ids = models.JSONField(default=list, help_text="successful training runs the steps were learnt from")
    training_run_ids = models.JSONField(default=list)
    held_out_run_ids = models.JSONField(default=list)
    skipped_run_ids = models.JSONField(default=list, help_text="successful training runs with no ok step")
    status = models.CharField(max_length=10, choices=VersionStatus.choices, default=VersionStatus.CANDIDATE)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ProcedureVersionQuerySet.as_manager()

    class Meta:
        ordering = ["procedure_id", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["procedure", "number"], name="procedures_version_number"),
            models.UniqueConstraint(fields=["procedure", "content_revision"], name="procedures_version_content"),
        ]
        indexes = [models.Index(fields=["procedure", "status"], name="procedures_version_status")]

    def __str__(self) -> str:
        return f"{self.procedure_id} v{self.number}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            fields = kwargs.get("update_fields")
            if fields is None or set(fields) - {"status"}:
                raise ImmutableVersionError("a procedure version's content cannot be changed; only its status moves")
        return super().save(*args, **kwargs)

    @property
    def label(self) -> str:
        """How every page, message and API answer names a version: `v3`."""
        return f"v{self.number}"

    @property
    def tools(self) -> list[str]:
        return [step["tool"] for step in self.steps]


class ReplayMode(models.TextChoices):
    OFFLINE = "offline", "offline"
    LIVE = "live", "live"


class ReplayStatus(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    DONE = "done", "done"
    FAILED = "failed", "failed"


class ReplayRun(Leased):
    """One replay of a version on its held-out cases, compared with the version active at the time (if any)."""

    version = models.ForeignKey(ProcedureVersion, on_delete=models.PROTECT, related_name="replays")
    compared_with = models.ForeignKey(
        ProcedureVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    mode = models.CharField(max_length=10, choices=ReplayMode.choices, default=ReplayMode.OFFLINE)
    held_out_run_ids = models.JSONField(default=list)
    status = models.CharField(max_length=10, choices=ReplayStatus.choices, default=ReplayStatus.QUEUED)
    deadline = models.DateTimeField(null=True, blank=True)
    metrics = models.JSONField(default=dict, blank=True, help_text='{"candidate": {...}, "active": {...} | null}')
    gate_report = models.JSONField(null=True, blank=True)
    report = models.JSONField(default=dict, blank=True, help_text="regressions, counterexamples, unanswered cases")
    error = models.TextField(blank=True)
    # Leased's columns, with their help texts here
    lease_owner = models.CharField(max_length=200, blank=True, help_text="the worker holding an offline replay")
    lease_expires_at = models.DateTimeField(null=True, blank=True, help_text="renewed by the holder's heartbeat")
    attempts = models.PositiveIntegerField(default=0, help_text="claims of an offline replay (a worker took it)")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["version", "-id"], name="procedures_replay_version")]

    def __str__(self) -> str:
        return f"replay {self.pk} of {self.version_id} ({self.mode})"

    @property
    def passed(self) -> bool | None:
        if self.status != ReplayStatus.DONE or self.gate_report is None:
            return None
        return bool(self.gate_report.get("passed"))


class ReplayArm(models.TextChoices):
    CANDIDATE = "candidate", "candidate"
    ACTIVE = "active", "active"
    NONE = "none", "no procedure"  # a first version's live replay: the same jobs answered without any procedure


class ReplayCase(models.Model):
    """One held-out case evaluated for one arm. `answered` is False for a live case nobody answered in time."""

    # No index of its own: the unique (replay, arm, case) constraint leads with the replay. No database constraint
    # either: its check ran once per case row at commit (a third of an offline replay's finish), for rows written
    # only by replay_services.finish_replay while it holds the replay's row lock; replays are never deleted, and
    # the ORM's cascade would remove their cases (docs/decisions.md).
    replay = models.ForeignKey(
        ReplayRun, on_delete=models.CASCADE, related_name="cases", db_index=False, db_constraint=False
    )
    arm = models.CharField(max_length=10, choices=ReplayArm.choices)
    case_run_id = models.BigIntegerField(help_text="the held-out recorded run")
    result_run_id = models.BigIntegerField(null=True, blank=True, help_text="the run a live agent answered with")
    result = models.JSONField(default=dict)
    answered = models.BooleanField(default=True)

    class Meta:
        ordering = ["replay_id", "arm", "case_run_id"]
        constraints = [
            models.UniqueConstraint(fields=["replay", "arm", "case_run_id"], name="procedures_case_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.replay_id}/{self.arm}/{self.case_run_id}"
