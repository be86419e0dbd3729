"""Test helper: make a candidate active the only way the product allows, through a review.

An operator proposes, two reviewers approve; when the gate is failing or missing (a seeded graph, a version without
a passing replay) an admin overrides it with a reason. On-commit work (cache invalidation, superseding, webhooks)
runs as it would after a real commit.
"""

from django.test import TestCase

from accounts.roles import Role
from accounts.services import Actor
from reviews import services
from reviews.models import PromotionRequest, PromotionStatus
from tests.factories import user_with


def promote(
    kind: str, candidate_id: object, *, rationale: str = "promoted in a test", on_commit: bool = True
) -> PromotionRequest:
    """`on_commit=False` leaves the after-commit work undone: the window before the winner supersedes the parent's
    other pending requests, where a competing request is still open but stale."""
    proposer = user_with(Role.OPERATOR)
    with TestCase.captureOnCommitCallbacks(execute=on_commit):
        request = services.promotion_propose(
            actor=Actor(user=proposer), kind=kind, candidate_id=str(candidate_id), rationale=rationale
        )
        for _ in range(request.required_approvals):
            request = services.judgment_submit(
                actor=Actor(user=user_with(Role.REVIEWER)), request=request, verdict="approve"
            )
        if request.status == PromotionStatus.APPROVED:
            request = services.promotion_override(
                actor=Actor(user=user_with(Role.ADMIN)), request=request, reason="no passing gate in this test"
            )
    assert request.status == PromotionStatus.APPLIED, request.status
    return request


def promote_graph_revision(revision, **options) -> PromotionRequest:
    return promote("graph_revision", revision.pk, **options)


def promote_procedure_version(version, **options) -> PromotionRequest:
    return promote("procedure_version", version.pk, **options)
