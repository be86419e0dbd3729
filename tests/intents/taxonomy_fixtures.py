"""Shared state of the taxonomy tests: runs, stored intent candidates and the actors who judge them.

Candidates are stored rows (as a proposal run or an API client leaves them); judgments, drafts and promotions go
through the real services.
"""

from __future__ import annotations

import hashlib

import pytest

from accounts.roles import Role
from accounts.services import Actor
from intents.core import normalize_intent
from intents.models import IntentCandidateRecord
from intents.taxonomy.services import intent_judgment_submit, taxonomy_draft, taxonomy_propose
from reviews.services import judgment_submit
from tests.factories import user_with
from trajectories.models import Run


def act(user) -> Actor:
    return Actor(user=user)


def make_run(number: int, *, intent: str = "", outcome: str = "success") -> Run:
    return Run.objects.create(source="t", external_id=str(number), intent=intent, outcome=outcome, step_count=3)


def make_candidate(label: str, runs: list[Run], *, kind: str = "inferred", source: str = "model", by=None):
    evidence = [{"run_id": r.pk, "trajectory_id": f"t:{r.external_id}", "start": 0, "end": 1} for r in runs]
    digest = hashlib.sha256(f"{kind}\0{label}\0{[r.pk for r in runs]}".encode()).hexdigest()[:20]
    return IntentCandidateRecord.objects.create(
        source=source,
        candidate_id=f"intent:{digest}",
        intent=label,
        normalized=normalize_intent(label),
        kind=kind,
        evidence=evidence,
        actual_outcome="the password was reset",
        limitations=["one run only"],
        schema_version="trajectory-intents-v1",
        submitted_by=by,
    )


def judge(candidate, verdict: str, *users, target: str = "") -> None:
    for user in users:
        intent_judgment_submit(actor=act(user), candidate=candidate, verdict=verdict, merge_target=target)


def activate_draft(drafter, approvers, relabels=None):
    """Draft, propose and approve (two approvers): the new version becomes active. Returns (version, request)."""
    version = taxonomy_draft(actor=act(drafter), relabels=relabels).version
    request = taxonomy_propose(actor=act(drafter), version=version, rationale="next version")
    for user in approvers:
        request = judgment_submit(actor=act(user), request=request, verdict="approve")
    return version, request


@pytest.fixture
def rita(db):
    return user_with(Role.REVIEWER, username="rita")


@pytest.fixture
def rob(db):
    return user_with(Role.REVIEWER, username="rob")


@pytest.fixture
def ruth(db):
    return user_with(Role.REVIEWER, username="ruth")


@pytest.fixture
def otto(db):
    """Operator and reviewer: drafts in these tests."""
    return user_with(Role.OPERATOR, Role.REVIEWER, username="otto")


@pytest.fixture
def vera(db):
    """A read-only teammate."""
    return user_with(username="vera")


@pytest.fixture
def oscar(db):
    """An outsider: an inactive account."""
    return user_with(username="oscar", is_active=False)
