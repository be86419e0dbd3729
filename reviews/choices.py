"""The reviews app's value sets: what other apps may name without reading its models."""

from django.db import models


class PromotionStatus(models.TextChoices):
    OPEN = "open"
    APPROVED = "approved"  # enough approvals, waiting for a passing gate or an admin override
    APPLIED = "applied"
    REJECTED = "rejected"
    SUPERSEDED = "superseded"  # the version it replaces is no longer active
    WITHDRAWN = "withdrawn"


PENDING_STATUSES = (PromotionStatus.OPEN, PromotionStatus.APPROVED)


class Verdict(models.TextChoices):
    APPROVE = "approve"
    REJECT = "reject"


class WebhookEvent(models.TextChoices):
    ACTIVATED = "promotion.activated"
    ROLLED_BACK = "promotion.rolled_back"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"
    SENT = "sent"
    FAILED = "failed"
