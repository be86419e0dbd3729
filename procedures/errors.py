"""What procedures' services raise when they refuse, and the operator check behind NotAllowed."""

from __future__ import annotations

from accounts.services import Actor
from common.leases import LeaseLost  # an offline replay taken over by another worker: stop without writing


class MiningError(ValueError):
    """Mining cannot produce a version (too few runs, nothing shared); the message says why."""


class NotAllowed(PermissionError):
    pass


class InvalidFloor(ValueError):
    """A rubric floor outside [0, 1]."""


class ReplayRefused(ValueError):
    """A replay cannot be run again as asked; the message says why. Nothing was written."""


__all__ = ["InvalidFloor", "LeaseLost", "MiningError", "NotAllowed", "ReplayRefused", "check_operator"]


def check_operator(actor: Actor) -> None:
    """Mining, re-running and amending need the operator role (the system actor always may)."""
    if actor.user is not None and not actor.user.may_operate:
        raise NotAllowed("mining procedures needs the operator role")
