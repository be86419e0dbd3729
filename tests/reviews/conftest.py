"""A test-only promotable kind, and the actors of the review tests.

`FakeKind` keeps no table of its own (reviews ships no test models): its parent row is a real `auth.Group` row
("fake-parent:<key>"), locked with SELECT … FOR UPDATE exactly as an owning app locks its parent, and its active
pointer is the newest `fake.activate` AuditEvent of that parent (append-only, written inside the caller's
transaction). So locking, the expected-version check and rollback behave as in a real app, over real rows.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.db import transaction

from accounts.models import AuditEvent
from accounts.roles import Role
from accounts.services import Actor, audit_record
from reviews.registry import (
    Description,
    DiffView,
    GateEvidence,
    PromotableKind,
    StaleActivation,
    UnknownCandidate,
    register_kind,
    unregister_kind,
)
from tests.factories import user_with

FAKE = "fake"
TARGET_TYPE = "fake.parent"


class FakeKind(PromotableKind):
    key = FAKE
    label = "fake artifact"

    def __init__(self) -> None:
        self.candidates: dict[str, tuple[str, bool | None]] = {}

    def add(self, candidate_id: str, *, parent: str = "p1", passing: bool | None = True) -> str:
        Group.objects.get_or_create(name=f"fake-parent:{parent}")
        self.candidates[candidate_id] = (parent, passing)
        return candidate_id

    def seed_active(self, candidate_id: str) -> None:
        parent, _ = self.candidates[candidate_id]
        with transaction.atomic():
            self.activate(
                actor=Actor.system(), candidate_id=candidate_id, expected_active_id=self.current_active(parent)
            )

    def _latest(self, parent_key: str) -> AuditEvent | None:
        return (
            AuditEvent.objects.filter(verb="fake.activate", target_type=TARGET_TYPE, target_id=parent_key)
            .order_by("-id")
            .first()
        )

    def describe(self, candidate_id: str) -> Description:
        if candidate_id not in self.candidates:
            raise UnknownCandidate(f"no fake candidate {candidate_id}")
        parent, _ = self.candidates[candidate_id]
        return Description(
            title=f"fake {candidate_id}", summary="a test artifact", url="", parent_key=parent, parent_label=parent
        )

    def current_active(self, parent_key: str) -> str | None:
        latest = self._latest(parent_key)
        return latest.after["active"] if latest else None

    def gate_evidence(self, candidate_id: str) -> GateEvidence:
        if candidate_id not in self.candidates:
            raise UnknownCandidate(f"no fake candidate {candidate_id}")
        _, passing = self.candidates[candidate_id]
        summary = {True: "gate passes", False: "gate fails", None: "no gate"}[passing]
        return GateEvidence(passing=passing, summary=summary, details={"score": 1 if passing else 0})

    def diff(self, candidate_id: str, active_id: str | None) -> DiffView:
        return DiffView(template="reviews/diff_text.html", context={"before": active_id or "", "after": candidate_id})

    def activate(self, *, actor, candidate_id: str, expected_active_id: str | None) -> None:
        parent, _ = self.candidates[candidate_id]
        Group.objects.select_for_update().get(name=f"fake-parent:{parent}")
        active = self.current_active(parent)
        if active != expected_active_id:
            raise StaleActivation(parent_key=parent, expected_active_id=expected_active_id, actual_active_id=active)
        audit_record(
            actor=actor,
            verb="fake.activate",
            target=(TARGET_TYPE, parent),
            before={"active": active},
            after={"active": candidate_id},
        )


@pytest.fixture
def fake_kind(db):
    kind = register_kind(FakeKind())
    yield kind
    unregister_kind(FAKE)


@pytest.fixture
def proposer(operator):
    """otto: operator and reviewer; proposes in these tests."""
    return operator


@pytest.fixture
def second_reviewer(db):
    return user_with(Role.REVIEWER, username="rob")


@pytest.fixture
def third_reviewer(db):
    return user_with(Role.REVIEWER, username="ruth")


def act(user) -> Actor:
    return Actor(user=user)


def activations(parent: str = "p1") -> int:
    return AuditEvent.objects.filter(verb="fake.activate", target_type=TARGET_TYPE, target_id=parent).count()


def v0_then_v1_through_a_review(fake_kind, proposer, *judges) -> None:
    """p1 starts at v0 (active without a review, like a first version) and v1 replaces it through an applied
    request: the activation history then names v0 as v1's rollback target."""
    from reviews import services

    for version in ("v0", "v1"):
        fake_kind.add(version)
    fake_kind.seed_active("v0")
    request = services.promotion_propose(actor=act(proposer), kind="fake", candidate_id="v1", rationale="better")
    for judge in judges:
        services.judgment_submit(actor=act(judge), request=request, verdict="approve")
    assert fake_kind.current_active("p1") == "v1"
