"""Certified uplift, persisted: held-out splits and the ledger of decisions taken on them, the certificates (immutable),
the critical tasks operators tag and the certification policy per kind and parent. Written only by uplift.services.
"""

import json
import zlib

from django.conf import settings
from django.db import models

from common.leases.models import Leased


class HeldOutSplit(models.Model):
    """One set of held-out tasks of one parent (a procedure's intent, a graph workspace), named by the digest of its
    sorted task ids. Every decision taken on it spends part of its error budget (uplift.core.reuse)."""

    kind = models.CharField(max_length=60, help_text="the promotable kind whose candidates it measures")
    parent_key = models.CharField(max_length=200, help_text="a procedure's intent key, a graph workspace's slug")
    key = models.CharField(max_length=64, help_text="sha256 of the sorted task ids")
    task_count = models.PositiveIntegerField()
    drawn_at = models.DateTimeField(help_text="runs received after this are fresh for this split")
    decisions = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["kind", "parent_key", "key"], name="uplift_split_identity"),
        ]

    def __str__(self) -> str:
        return f"split {self.key[:12]} of {self.kind} {self.parent_key} ({self.decisions} decisions)"


class SplitDecision(models.Model):
    """The ledger: one row per decision taken on a split (a certificate, an evolution round scored on it)."""

    class What(models.TextChoices):
        CERTIFICATE = "certificate", "certificate"
        EVOLUTION_ROUND = "evolution_round", "evolution round"

    split = models.ForeignKey(HeldOutSplit, on_delete=models.PROTECT, related_name="ledger")
    number = models.PositiveIntegerField(help_text="1 for the split's first decision")
    what = models.CharField(max_length=20, choices=What.choices)
    subject = models.CharField(max_length=200, help_text="what was decided, e.g. procedure_version:42")
    alpha = models.FloatField(help_text="the level this decision was taken at")
    passed = models.BooleanField(null=True, help_text="the decision's outcome, when it has one")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["split_id", "number"]
        constraints = [models.UniqueConstraint(fields=["split", "number"], name="uplift_decision_number")]

    def __str__(self) -> str:
        return f"decision {self.number} on {self.split_id}: {self.subject}"


class Certificate(models.Model):
    """A candidate's with-versus-without certificate. Immutable: written once by uplift.services."""

    kind = models.CharField(max_length=60)
    candidate_id = models.CharField(max_length=64)
    replaces_id = models.CharField(max_length=64, blank=True, help_text="empty: measured against no artifact")
    parent_key = models.CharField(max_length=200)
    split = models.ForeignKey(HeldOutSplit, on_delete=models.PROTECT, related_name="certificates")
    decision_number = models.PositiveIntegerField()
    alpha = models.FloatField()
    policy = models.JSONField(help_text="the policy it was judged by")
    passed = models.BooleanField()
    reasons = models.JSONField(default=list, help_text="why it does not pass")
    sentence = models.TextField()
    totals = models.JSONField(help_text="n, repairs, breakages, the paired differences with their intervals, …")
    tasks = models.JSONField(default=dict, blank=True, help_text="per-task rows, of certificates older than packing")
    tasks_packed = models.BinaryField(
        null=True, blank=True, help_text="per task: both arms' outcomes and scores, as zlib-compressed JSON columns"
    )
    agent_models = models.JSONField(default=list, help_text="the agents' models the tasks were measured with")
    provenance = models.JSONField(default=dict, help_text="the evaluation it was measured by")
    digest = models.CharField(max_length=71, help_text="sha256 of the certificate's canonical JSON")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["kind", "candidate_id", "-id"], name="uplift_cert_candidate")]

    def __str__(self) -> str:
        state = "certified" if self.passed else "not certified"
        return f"certificate of {self.kind} {self.candidate_id}: {state}"

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None and not kwargs.get("force_insert"):
            raise ValueError("a certificate is immutable: issue a new one")
        super().save(*args, **kwargs)

    @property
    def rows(self) -> list[dict]:
        """Per task: {"task_id", "critical", "model", "outcome", "control": {...}, "candidate": {...}}."""
        from .core.certificate import task_rows

        if self.tasks_packed:
            return task_rows(json.loads(zlib.decompress(bytes(self.tasks_packed))))
        return task_rows(self.tasks)


class CriticalTask(models.Model):
    """A held-out task an operator tagged critical for a parent: any breakage on it blocks certification."""

    kind = models.CharField(max_length=60)
    parent_key = models.CharField(max_length=200)
    task_key = models.CharField(max_length=200, help_text="a held-out run id, a validation task id")
    reason = models.CharField(max_length=500, blank=True)
    tagged_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["kind", "parent_key", "task_key"], name="uplift_critical_identity"),
        ]

    def __str__(self) -> str:
        return f"critical task {self.task_key} of {self.kind} {self.parent_key}"


class CertificationPolicy(models.Model):
    """The policy a kind's certificates are judged by, for one parent or (parent_key "") every parent of the kind."""

    kind = models.CharField(max_length=60)
    parent_key = models.CharField(max_length=200, blank=True)
    mode = models.CharField(max_length=20, default="non_inferiority")
    margin = models.FloatField(default=0.02)
    min_n = models.PositiveIntegerField(default=10)
    metric = models.CharField(max_length=10, default="success")
    alpha = models.FloatField(default=0.05)
    max_decisions = models.PositiveIntegerField(default=20)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kind", "parent_key"], name="uplift_policy_identity")]

    def __str__(self) -> str:
        return f"certification policy of {self.kind} {self.parent_key or '(every parent)'}"


class CoverageFlag(models.Model):
    """An active artifact whose recent production runs come mostly from an agent model no passing certificate of it
    was measured with (uplift.core.coverage): "not certified for <model>". One row per flagged parent, written and
    removed by uplift.services.coverage_check; a parent with no row is covered."""

    kind = models.CharField(max_length=60)
    parent_key = models.CharField(max_length=200)
    candidate_id = models.CharField(max_length=64, help_text="the active version flagged")
    parent_label = models.CharField(max_length=200, blank=True)
    label = models.CharField(max_length=100, blank=True)
    url = models.CharField(max_length=500, blank=True)
    model = models.CharField(max_length=200, help_text="the agent model most recent runs come from")
    share = models.FloatField(help_text="its share of the recent runs naming a model")
    runs = models.PositiveIntegerField(help_text="recent runs naming a model")
    failed_certificate = models.ForeignKey(
        Certificate, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="the newest certificate measured with the model, when it did not pass",
    )  # fmt: skip
    flagged_at = models.DateTimeField(auto_now_add=True)
    checked_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["kind", "parent_key"]
        constraints = [models.UniqueConstraint(fields=["kind", "parent_key"], name="uplift_coverage_flag_parent")]

    def __str__(self) -> str:
        return f"{self.kind} {self.parent_key} {self.label}: not certified for {self.model}"


class Watch(Leased):
    """The watch after an activation (uplift.core.watch): canary against control, or (after a full activation) the
    runs after against the runs before, tested as runs arrive. Written only by uplift.services."""

    class Mode(models.TextChoices):
        CANARY = "canary", "canary"
        FULL = "full", "full activation"

    class Status(models.TextChoices):
        RUNNING = "running", "running"
        PROMOTED = "promoted", "promoted"
        ROLLED_BACK = "rolled_back", "rolled back"
        ROLLBACK_REQUESTED = "rollback_requested", "rollback requested"
        EXPIRED = "expired", "expired"
        STOPPED = "stopped", "stopped"

    kind = models.CharField(max_length=60)
    parent_key = models.CharField(max_length=200)
    parent_label = models.CharField(max_length=200, blank=True)
    candidate_id = models.CharField(max_length=64)
    candidate_label = models.CharField(max_length=100, blank=True)
    control_id = models.CharField(max_length=64)
    control_label = models.CharField(max_length=100, blank=True)
    candidate_ref = models.CharField(max_length=100, help_text="what runs record for the candidate")
    control_ref = models.CharField(max_length=100)
    mode = models.CharField(max_length=10, choices=Mode.choices)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING)
    share = models.FloatField(default=0.0, help_text="the canary's share of runs (0 for a full activation)")
    policy = models.JSONField(help_text="uplift.core.watch.WatchPolicy's fields")
    request_id = models.BigIntegerField(null=True, blank=True, help_text="the promotion request that activated it")
    since = models.DateTimeField(help_text="runs received from then on count")
    window_ends_at = models.DateTimeField()
    after_id = models.BigIntegerField(default=0, help_text="the last run counted")
    sums = models.JSONField(default=dict, help_text="per metric and arm: [n, sum, sum of squares]")
    bounds = models.JSONField(default=list, help_text="the latest look's bounds, one per metric")
    history = models.JSONField(default=list, help_text="one point per look that counted new runs")
    reason = models.TextField(blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    rollback_request_id = models.BigIntegerField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "parent_key"], condition=models.Q(status="running"), name="uplift_one_running_watch"
            )
        ]

    def __str__(self) -> str:
        return f"watch {self.pk} of {self.kind} {self.parent_key} ({self.mode}, {self.status})"
