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


def scopes_allowed_for(user) -> list[str]:
    """The one rule for which scopes `user` may grant a token: none when inactive, role-bound ones with the role.

    `user` is an accounts.User (admins and superusers hold every role); taken untyped to keep this module free of
    model imports.
    """
    if not user.is_active:
        return []
    return [scope for scope in SCOPES if scope not in SCOPE_REQUIRES_ROLE or user.has_role(SCOPE_REQUIRES_ROLE[scope])]
