"""Persistence of reviews: promotion requests, independent judgments, queue leases and the webhook outbox."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from common.leases.models import Leased

from .choices import PENDING_STATUSES, DeliveryStatus, PromotionStatus, Verdict, WebhookEvent


class PromotionRequest(models.Model):
    """A proposal to make `candidate_id` (of `kind`) the active version of `parent_key`, replacing `replaces_id`."""

    kind = models.CharField(max_length=64)
    candidate_id = models.CharField(max_length=64)
    parent_key = models.CharField(max_length=120)
    # Snapshots of the kind's description at proposal time, so lists need no call into the owning app per row.
    title = models.CharField(max_length=200)
    parent_label = models.CharField(max_length=200, blank=True)
    replaces_id = models.CharField(max_length=64, null=True, blank=True)
    is_rollback = models.BooleanField(default=False)
    # How the approved candidate goes live: for every run at once, or as a canary for `canary_share` of runs while
    # the watch after activation (uplift) tests it against the version it replaces.
    rollout = models.CharField(max_length=10, choices=[("full", "full"), ("canary", "canary")], default="full")
    canary_share = models.FloatField(default=0.1)
    proposer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    rationale = models.TextField()
    gate_snapshot = models.JSONField(default=dict)
    override_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    override_reason = models.TextField(blank=True)
    overridden_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=PromotionStatus.choices, default=PromotionStatus.OPEN)
    required_approvals = models.PositiveSmallIntegerField(default=2)
    applied_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    closed_at = models.DateTimeField(null=True, blank=True)
    applied_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "candidate_id"],
                condition=Q(status__in=["open", "approved"]),
                name="reviews_one_pending_request_per_candidate",
            )
        ]
        indexes = [
            models.Index(fields=["kind", "parent_key", "-created_at"]),
            models.Index(fields=["status", "created_at"]),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.kind} {self.candidate_id} ({self.status})"

    @property
    def is_pending(self) -> bool:
        return self.status in PENDING_STATUSES

    @property
    def gate_passing(self) -> bool | None:
        return self.gate_snapshot.get("passing")

    @property
    def certificate(self) -> dict | None:
        """The summary of the certificate the candidate was proposed with (uplift.selectors.certificate_summary)."""
        return self.gate_snapshot.get("certificate")

    @property
    def critical_findings(self) -> int:
        return int((self.gate_snapshot.get("safety") or {}).get("critical") or 0)

    @property
    def is_overridden(self) -> bool:
        return self.override_by_id is not None


class Judgment(models.Model):
    """One reviewer's verdict on one request; the database allows one per (request, reviewer)."""

    request = models.ForeignKey(PromotionRequest, on_delete=models.CASCADE, related_name="judgments")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    verdict = models.CharField(max_length=8, choices=Verdict.choices)
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["request", "reviewer"], name="reviews_one_judgment_per_reviewer"),
            models.CheckConstraint(
                condition=~Q(verdict="reject") | ~Q(comment=""), name="reviews_rejection_has_a_reason"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.verdict} on #{self.request_id}"


class QueueLease(models.Model):
    """An item of the queue held by one reviewer until `expires_at`; after that anyone may take it."""

    request = models.OneToOneField(PromotionRequest, on_delete=models.CASCADE, related_name="lease")
    holder = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    expires_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"lease on #{self.request_id} until {self.expires_at:%H:%M}"


class Activation(models.Model):
    """What became active for a parent, from when, replacing what, by which request: written by the activation itself
    (reviews.services) in its transaction. Rollback targets and activation history read it, never the audit log."""

    kind = models.CharField(max_length=64)
    parent_key = models.CharField(max_length=120)
    version_id = models.CharField(max_length=64)
    replaced_id = models.CharField(max_length=64, blank=True)
    request = models.ForeignKey(PromotionRequest, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    activated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    activated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-activated_at", "-id"]
        indexes = [models.Index(fields=["kind", "parent_key", "-activated_at"], name="reviews_activation_parent")]

    def __str__(self) -> str:
        return f"{self.kind} {self.parent_key}: {self.replaced_id or '—'} → {self.version_id}"


class WebhookEndpoint(models.Model):
    url = models.URLField(max_length=500)
    secret = models.CharField(max_length=128)  # needed in clear to sign; shown once to the admin who creates it
    events = models.JSONField(default=list)
    active = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.url


class WebhookDelivery(Leased):
    """Outbox row: written in the transaction of the change it announces, sent by a Celery task after commit. Each
    attempt holds the row's lease (common.leases) while it sends; `due_at` is when it may be tried (next)."""

    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=40, choices=WebhookEvent.choices)
    payload = models.JSONField()
    status = models.CharField(max_length=8, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    due_at = models.DateTimeField(default=timezone.now, help_text="its creation, then each failed attempt's backoff")
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "due_at"], name="reviews_delivery_due")]

    def __str__(self) -> str:
        return f"{self.event} → {self.endpoint_id} ({self.status})"


class WebhookAttempt(models.Model):
    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="attempt_log")
    number = models.PositiveSmallIntegerField()
    attempted_at = models.DateTimeField(default=timezone.now)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["delivery_id", "number"]

    def __str__(self) -> str:
        return f"attempt {self.number} of delivery {self.delivery_id}"
