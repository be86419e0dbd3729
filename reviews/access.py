"""Who may do what in reviews beyond the roles (those are accounts.roles.require_role's): an actor's active user and
the four-eyes rule, used by the promotion policy (reviews.services)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accounts.services import Actor

from .errors import Conflict

if TYPE_CHECKING:  # annotations only: other apps read rows through selectors (issue 14)
    from accounts.models import User


def active_user(actor: Actor) -> User | None:
    """The actor's user when it is an active account; None for the system, a token without a user, or inactive."""
    user = actor.user
    return user if user is not None and user.is_active else None


def four_eyes(message: str) -> Conflict:
    """The four-eyes refusal (409 `four_eyes`): one person may not both accept a request's gate and approve it. The
    admin who overrode the gate is not one of its judges (like its proposer), and an approver may not override its
    gate; reviews.services checks both with the request locked, so two attempts at once cannot both pass."""
    return Conflict(
        f"{message}: four eyes means the override and the approvals come from different people", code="four_eyes"
    )
