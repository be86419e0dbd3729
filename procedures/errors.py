"""What procedures' services raise when they refuse (who may act is accounts.roles.require_role's: RoleRequired)."""

from __future__ import annotations

from common.leases import LeaseLost  # an offline replay taken over by another worker: stop without writing


class MiningError(ValueError):
    """Mining cannot produce a version (too few runs, nothing shared); the message says why."""


class InvalidFloor(ValueError):
    """A rubric floor outside [0, 1]."""


class ReplayRefused(ValueError):
    """A replay cannot be run again as asked; the message says why. Nothing was written."""


__all__ = ["InvalidFloor", "LeaseLost", "MiningError", "ReplayRefused"]
