"""Roles are Django groups; API scopes are strings a token carries. Both are closed sets, listed here.

A person without a role is read-only: every scope that writes needs a role (or, for what agents send, an agent
identity), so such a person's tokens read and do nothing else. The scopes any active user may hold (READ_SCOPES)
only read; `graphs:guide` is one of them: guidance is computed from the active graph and stored nowhere (its
generative modes record their model call in the ledger, as every model call is).

Who may act is decided here too: every service that writes on someone's behalf asks `require_role` first, and its
one refusal, RoleRequired (Django's PermissionDenied), is what the API and the pages answer 403 with: the API through
config.api, a page through Django's 403 handler (config.error_views), or, for a page that shows itself with the
refusal, through `refusal_shown`. Views check no role of their own before calling a service.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from functools import wraps
from typing import TYPE_CHECKING, Any, Literal, overload

from django.core.exceptions import PermissionDenied

if TYPE_CHECKING:  # annotations only: this module reads users through their methods
    from django.http import HttpRequest, HttpResponse

    from .models import User
    from .services import Actor


class Role(StrEnum):
    REVIEWER = "reviewer"
    OPERATOR = "operator"
    ADMIN = "admin"


SCOPES: dict[str, str] = {
    "trajectories:read": "read runs and their steps",
    "trajectories:write": "push runs (ingest)",
    "graphs:read": "read workspaces, active graphs and revisions",
    "graphs:guide": "ask for step guidance",
    "procedures:read": "read procedures and their versions",
    "procedures:mine": "start procedure mining (operators)",
    "evolutions:run": "start and cancel graph evolution runs (operators)",
    "evaluations:run": "claim replay and evaluation jobs and answer them",
    "reviews:judge": "read the review queue, propose and judge (reviewers)",
    "rubrics:read": "read rubrics and runs' rubric scores",
    "rubrics:write": "post your own rubric assessments of runs, with evidence steps (reviewers and operators)",
    "intents:read": "read intent candidates",
    "intents:write": "post intent labels (with evidence) and vectors, judge candidates, analyse windows, decide "
    "alerts (agents, reviewers and operators; each action checks its own role)",
    "certification:read": "read certificates, certification policies, critical tasks and model-coverage flags",
    "certification:write": "set certification policies, tag critical tasks, start re-certifications (operators)",
}


@dataclass(frozen=True)
class Holders:
    """Who may hold a scope that writes: a person with one of `roles`, and agent identities when `agents`."""

    roles: frozenset[Role] = frozenset()
    agents: bool = False

    def admit(self, user) -> bool:
        if getattr(user, "is_agent", False):
            return self.agents
        return any(user.has_role(role) for role in self.roles)

    def describe(self) -> str:
        names = [role.value for role in Role if role in self.roles]
        parts = [f"the {' or '.join(names)} role"] if names else []
        if self.agents:
            parts.append("an agent identity")
        return " or ".join(parts)


_REVIEWER = frozenset({Role.REVIEWER})
_OPERATOR = frozenset({Role.OPERATOR})
_ASSESSORS = frozenset({Role.REVIEWER, Role.OPERATOR})

# Every scope that writes, with who may hold it; every other scope only reads and is open to any active user.
WRITE_SCOPES: dict[str, Holders] = {
    "trajectories:write": Holders(agents=True),
    "evaluations:run": Holders(agents=True),
    "reviews:judge": Holders(roles=_REVIEWER),
    "procedures:mine": Holders(roles=_OPERATOR),
    "evolutions:run": Holders(roles=_OPERATOR),
    "rubrics:write": Holders(roles=_ASSESSORS),
    "intents:write": Holders(roles=_ASSESSORS, agents=True),
    "certification:write": Holders(roles=_OPERATOR),
}
READ_SCOPES: frozenset[str] = frozenset(SCOPES) - frozenset(WRITE_SCOPES)

# Scopes whose writes become evidence (runs, job answers): only agent identities (User.is_agent, created by
# operators with accounts.services.agent_create) may hold them, never a person, whatever their roles.
AGENT_SCOPES: frozenset[str] = frozenset(
    scope for scope, holders in WRITE_SCOPES.items() if holders.agents and not holders.roles
)

# Every scope that is not open to any active user: checked again at every call (api_token_authenticate).
RESTRICTED_SCOPES: frozenset[str] = frozenset(WRITE_SCOPES)


def scope_requirement(scope: str) -> str | None:
    """Who may hold `scope`, in words ("the operator role", "an agent identity"); None when any active user may."""
    holders = WRITE_SCOPES.get(scope)
    return holders.describe() if holders is not None else None


def scopes_allowed_for(user) -> list[str]:
    """The one rule for which scopes `user` may grant a token: none when inactive; the read scopes for any active
    user (a person without a role gets nothing else: read-only); a scope that writes only to its holders
    (WRITE_SCOPES: a role, or an agent identity).

    `user` is an accounts.User (admins and superusers hold every role, agents none); taken untyped to keep this
    module free of model imports.
    """
    if not user.is_active:
        return []
    return [scope for scope in SCOPES if scope in READ_SCOPES or WRITE_SCOPES[scope].admit(user)]


def agent_scopes_allowed() -> list[str]:
    """The scopes any (active) agent identity may hold: the read scopes and the writes open to agents."""
    return [scope for scope in SCOPES if scope in READ_SCOPES or WRITE_SCOPES[scope].agents]


class RoleRequired(PermissionDenied):
    """The actor does not hold the role an action needs: 403, with `code` (the API's Error code) and `message` (what
    the API and the pages say). Raised only by `require_role`, before anything is read or written."""

    status = 403

    def __init__(self, message: str, *, code: str = "forbidden") -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.details = None


@overload
def require_role(
    actor: Actor, *roles: Role, doing: str, code: str = ..., agents: bool = ..., system: Literal[False] = ...
) -> User: ...


@overload
def require_role(
    actor: Actor, *roles: Role, doing: str, code: str = ..., agents: bool = ..., system: Literal[True]
) -> User | None: ...


def require_role(
    actor: Actor,
    *roles: Role,
    doing: str,
    code: str = "forbidden",
    agents: bool = False,
    system: bool = False,
) -> User | None:
    """The one check of who may act, called first by every service that writes on someone's behalf.

    Passes an active person holding one of `roles` (admins and superusers hold every role) and, when `agents`, an
    active agent identity: returns their user. The system actor (no user, no token: commands, tasks, seeders) passes
    only when `system`, and gets None. Anyone else, inactive accounts included, gets RoleRequired: "`doing` needs the
    operator role" (the roles in words, as roles.Holders describes them), with `code` for the API.
    """
    user = actor.user
    if user is None:
        if system and actor.token is None:
            return None
    elif user.is_active and Holders(roles=frozenset(roles), agents=agents).admit(user):
        return user
    needs = Holders(roles=frozenset(roles), agents=agents).describe()
    raise RoleRequired(f"{doing} needs {needs}", code=code)


View = Callable[..., "HttpResponse"]


def refusal_shown(page: Callable[..., HttpResponse]) -> Callable[[View], View]:
    """A view decorator: the service the view calls refused the actor (RoleRequired), and the view's own page says so
    with status 403, as it shows its other refusals. `page(request, reason, *args, **kwargs)`, given the view's own
    arguments, renders that page with `reason` (the refusal's message as a sentence). A view whose refusal is the 403
    page lets RoleRequired reach Django's 403 handler instead. The role rule stays in the service."""

    def decorate(view: View) -> View:
        @wraps(view)
        def refusing(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            try:
                return view(request, *args, **kwargs)
            except RoleRequired as refused:
                reason = refused.message[:1].upper() + refused.message[1:].rstrip(".") + "."
                response = page(request, reason, *args, **kwargs)
                response.status_code = 403
                return response

        return refusing

    return decorate
