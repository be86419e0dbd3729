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
    "evaluations:run": "claim replay and evaluation jobs and answer them",
    "reviews:judge": "read the review queue, propose and judge (reviewers)",
}
