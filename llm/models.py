from django.db import models
from django.utils import timezone


class ModelCall(models.Model):
    """One model call in the ledger: written `running` before the call and finished after it (llm.services)."""

    class Status(models.TextChoices):
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        ABANDONED = "abandoned"

    class Provider(models.TextChoices):
        ANTHROPIC = "anthropic"
        SCRIPTED = "scripted"

    role = models.CharField(max_length=60)
    model_id = models.CharField(max_length=100)
    provider = models.CharField(max_length=20, choices=Provider.choices)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING)
    max_tokens = models.PositiveIntegerField(default=0)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    cached_input_tokens = models.PositiveBigIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    cost = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True, help_text="USD; null: unpriced")
    request_digest = models.CharField(max_length=64)
    request_preview = models.TextField(blank=True)
    response_text = models.TextField(blank=True, help_text="the whole reply, kept so a rejected reply can be diagnosed")
    response_id = models.CharField(max_length=120, blank=True)
    stop_reason = models.CharField(max_length=40, blank=True)
    error = models.TextField(blank=True)
    diagnostics = models.JSONField(
        default=dict, blank=True, help_text="what a failed call saw: HTTP status, content type, stop reason, attempts…"
    )
    subject_type = models.CharField(max_length=80, blank=True)
    subject_id = models.CharField(max_length=120, blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [
            models.Index(fields=["-started_at", "-id"], name="llm_call_newest"),
            models.Index(fields=["status", "started_at"], name="llm_call_status_started"),
            models.Index(fields=["role", "-started_at"], name="llm_call_role"),
            models.Index(fields=["model_id", "-started_at"], name="llm_call_model"),
            # A subject's calls, and a subject id's prefix (every round of an evolution run, "12:"): pattern operator
            # classes, so PostgreSQL takes LIKE 'prefix%' from the index under any collation (equality too).
            models.Index(
                fields=["subject_type", "subject_id"],
                name="llm_call_subject_prefix",
                opclasses=["varchar_pattern_ops", "varchar_pattern_ops"],
            ),
        ]

    def __str__(self) -> str:
        return f"{self.role} call to {self.model_id} ({self.status})"

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cached_input_tokens


class LedgerTotal(models.Model):
    """The ledger's totals for one (role, model, status), of every call below LedgerMark.below_id: the calls page
    adds the few calls above it to these rows instead of reading the whole ledger (llm.services.model_call_totals_roll,
    every ten minutes)."""

    role = models.CharField(max_length=60)
    model_id = models.CharField(max_length=100)
    status = models.CharField(max_length=20, choices=ModelCall.Status.choices)
    calls = models.PositiveBigIntegerField(default=0)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    cached_input_tokens = models.PositiveBigIntegerField(default=0)
    cost = models.DecimalField(max_digits=20, decimal_places=6, default=0, help_text="USD, of the priced calls")
    unpriced = models.PositiveBigIntegerField(default=0, help_text="succeeded calls without a price")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["role", "model_id", "status"], name="llm_ledger_total_one_per_key"),
        ]

    def __str__(self) -> str:
        return f"{self.calls} {self.status} {self.role} calls to {self.model_id}"


class LedgerMark(models.Model):
    """One row: every call whose id is below `below_id` is counted in LedgerTotal, and no longer changes (finished, or
    abandoned longer ago than a late reply is accepted)."""

    below_id = models.BigIntegerField(default=0)
    rolled_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"calls below #{self.below_id}"
