"""The lease columns every leased row of background work carries (common/leases/services.py writes them)."""

from django.db import models


class Leased(models.Model):
    """An abstract model: `lease_owner`, the worker holding the row ("" when free), and `lease_expires_at`, when its
    hold runs out unless renewed (None when free). The concrete model keeps its own index on
    (status, lease_expires_at) under its own name."""

    lease_owner = models.CharField(max_length=200, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
