"""Roles are Django groups; API scopes are strings a token carries. Both are closed sets, listed here."""

from enum import StrEnum


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
    "rubrics:write": "post your own rubric assessments of runs (with evidence steps)",
    "intents:read": "read intent candidates",
    "intents:write": "post your own intent labels (with evidence) and vectors",
}

# Scopes a token may carry only when its user holds the role; every other scope is open to any active user.
SCOPE_REQUIRES_ROLE: dict[str, Role] = {
    "reviews:judge": Role.REVIEWER,
    "procedures:mine": Role.OPERATOR,
    "evolutions:run": Role.OPERATOR,
}

# Scopes whose writes become evidence (runs, job answers): only agent identities (User.is_agent, created by
# operators with accounts.services.agent_create) may hold them, never a person, whatever their roles.
AGENT_SCOPES: frozenset[str] = frozenset({"trajectories:write", "evaluations:run"})

# Every scope that is not open to any active user: checked again at every call (api_token_authenticate).
RESTRICTED_SCOPES: frozenset[str] = AGENT_SCOPES | frozenset(SCOPE_REQUIRES_ROLE)


def scope_requirement(scope: str) -> str | None:
    """Who may hold `scope`, in words ("the operator role", "an agent identity"); None when any active user may."""
    if scope in AGENT_SCOPES:
        return "an agent identity"
    role = SCOPE_REQUIRES_ROLE.get(scope)
    return f"the {role} role" if role is not None else None


def scopes_allowed_for(user) -> list[str]:
    """The one rule for which scopes `user` may grant a token: none when inactive, role-bound ones with the role,
    agent-only ones (AGENT_SCOPES) only to agent identities.

    `user` is an accounts.User (admins and superusers hold every role, agents none); taken untyped to keep this
    module free of model imports.
    """
    if not user.is_active:
        return []
    is_agent = bool(getattr(user, "is_agent", False))

    def allowed(scope: str) -> bool:
        if scope in AGENT_SCOPES:
            return is_agent
        if scope in SCOPE_REQUIRES_ROLE:
            return user.has_role(SCOPE_REQUIRES_ROLE[scope])
        return True

    return [scope for scope in SCOPES if allowed(scope)]


def agent_scopes_allowed() -> list[str]:
    """The scopes any (active) agent identity may hold: the agent-only ones and the open ones, no role-bound one."""
    return [scope for scope in SCOPES if scope in AGENT_SCOPES or scope not in SCOPE_REQUIRES_ROLE]
