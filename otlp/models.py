"""Traces received over OTLP: one row per trace id (pending until its run is written), and the spans kept meanwhile."""

from django.conf import settings
from django.db import models


class TraceStatus(models.TextChoices):
    PENDING = "pending", "pending"  # spans kept, the run not written yet
    WRITTEN = "written", "written"  # the run is written (run_id); later spans are refused
    DISCARDED = "discarded", "discarded"  # not a run (no agent, tool or model span): nothing written


class Trace(models.Model):
    trace_id = models.CharField(max_length=32, unique=True)  # lowercase hex
    status = models.CharField(max_length=12, choices=TraceStatus.choices, default=TraceStatus.PENDING)
    # The agent whose token sent the first spans: the run is written in its name when beat completes the trace.
    sender = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    root_received = models.BooleanField(default=False)
    span_count = models.PositiveIntegerField(default=0)
    first_seen_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    completed_at = models.DateTimeField(null=True, blank=True)
    run_id = models.BigIntegerField(null=True, blank=True)  # trajectories.Run written for this trace
    span_ids = models.JSONField(default=list, blank=True)  # the spans the run was made of (resends are no-ops)
    late_spans = models.PositiveIntegerField(default=0)  # spans refused because they came after the run
    problems = models.JSONField(default=list, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status", "last_seen_at"], name="otlp_trace_pending_idx")]

    def __str__(self) -> str:
        return f"trace {self.trace_id} ({self.status})"


class PendingSpan(models.Model):
    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="pending_spans")
    span_id = models.CharField(max_length=16)
    payload = models.JSONField()  # otlp.core.spans.SpanRecord.to_dict()
    received_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["trace", "span_id"], name="otlp_pending_span_unique")]

    def __str__(self) -> str:
        return f"span {self.span_id} of {self.trace_id}"
