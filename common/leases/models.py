"""The lease columns every leased row of background work carries (common/leases/services.py writes them)."""

from datetime import datetime

from django.db import models
from django.utils import timezone


class Leased(models.Model):
    """An abstract model: `lease_owner`, the worker holding the row ("" when free), and `lease_expires_at`, when its
    hold runs out unless renewed (None when free). The concrete model keeps its own index on
    (status, lease_expires_at) under its own name."""

    lease_owner = models.CharField(max_length=200, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    def lease_lives(self, now: datetime | None = None) -> bool:
        """Whether the row's lease (as read) has not run out at `now`: its holder may still be working."""
        return self.lease_expires_at is not None and self.lease_expires_at > (now or timezone.now())
