"""Demo data of reviews for `manage.py seed_demo`: one open promotion request per demo kind, proposed by otto.

The owning apps pick (or create) the candidate through their registered kind; reviews imports none of them.
Idempotent: a kind that already has a request is left alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accounts.services import Actor
from common.demo_seeding import SeedContext, demo_seeder

from .errors import ReviewError
from .models import PromotionRequest
from .registry import UnknownKind, get_kind
from .services import promotion_propose

if TYPE_CHECKING:  # annotations only: other apps read rows through selectors (issue 14)
    from accounts.models import User

DEMO_KINDS = ("procedure_version", "graph_revision")
RATIONALES = {
    "procedure_version": "Mined from the successful refund runs; the offline replay on held-out runs is attached.",
    "graph_revision": "The evolution loop accepted this refinement of the two-hop graph; please review the diff.",
}


def seed_demo_reviews(*, actor: Actor, proposer: User) -> list[str]:
    lines = []
    for key in DEMO_KINDS:
        try:
            kind = get_kind(key)
        except UnknownKind:
            lines.append(f"{key}: kind not registered")
            continue
        if PromotionRequest.objects.filter(kind=key).exists():
            lines.append(f"{key}: already there")
            continue
        candidate = kind.demo_candidate(actor=actor)
        if candidate is None:
            lines.append(f"{key}: no candidate")
            continue
        try:
            request = promotion_propose(
                actor=Actor(user=proposer), kind=key, candidate_id=candidate, rationale=RATIONALES[key]
            )
        except ReviewError as exc:
            lines.append(f"{key}: not proposed ({exc.message})")
            continue
        lines.append(f"{key}: request #{request.pk} open for {request.title}")
    return lines


@demo_seeder("reviews", after=("procedures", "graphs"), needs=("users",))
def seed_demo_reviews_step(ctx: SeedContext) -> str:
    """The seed_demo step (common.demo_seeding): otto proposes, rita and rob (and admin) can judge."""
    return "reviews: " + "; ".join(seed_demo_reviews(actor=ctx.actor, proposer=ctx.users["otto"]))
