"""Demo procedures for `manage.py seed_demo`: the demo support runs mined into real candidates, replayed offline.

Only the demo's own runs (trajectories.demo's source) are mined and replayed on, whatever else is stored: a user's
runs of the same intents are theirs to mine (issue 24). Idempotent: mining the same runs again finds the identical
version (and leaves the procedure's mined-through mark alone), and a replay that already ran is left alone.
"""

from __future__ import annotations

from accounts.services import Actor
from config.demo_seeding import SeedContext, demo_seeder
from trajectories.demo import DEMO_SOURCE

from . import errors, mining_services, offline_replay_services
from .models import ProcedureVersion, ReplayMode, ReplayStatus, VersionStatus

DEMO_INTENTS = ("refund_request", "cancel_order", "change_address", "order_status")
REVIEW_INTENT = "refund_request"  # the version reviews' demo proposes (procedures.promotable.demo_candidate)


def seed_demo_procedures(*, actor: Actor) -> list[str]:
    """Mine each demo intent from the demo runs and finish its offline replay now (the worker may not run yet).
    One line per intent."""
    lines = []
    for intent in DEMO_INTENTS:
        try:
            result = mining_services.procedure_mine(actor=actor, intent=intent, live=False, source=DEMO_SOURCE)
        except errors.MiningError as exc:
            lines.append(f"{intent}: not mined ({exc})")
            continue
        version = result.version
        for replay in version.replays.filter(mode=ReplayMode.OFFLINE, status=ReplayStatus.QUEUED):
            offline_replay_services.replay_offline_run(replay=replay, actor=actor)
        version.refresh_from_db()
        verb = "mined" if result.created else "already there"
        lines.append(f"{intent}: v{version.number} {' → '.join(version.tools)} ({version.status}, {verb})")
    return lines


def demo_review_version(*, actor: Actor) -> ProcedureVersion | None:
    """The refund procedure's version learnt from the demo runs (mining them again finds it and writes nothing),
    when it is replayed and not active yet; None otherwise."""
    try:
        mined = mining_services.procedure_mine(actor=actor, intent=REVIEW_INTENT, live=False, source=DEMO_SOURCE)
    except errors.MiningError:
        return None
    version = mined.version
    return version if version.status in (VersionStatus.READY, VersionStatus.FAILED) else None


@demo_seeder("procedures", after=("runs",), needs=("runs",))
def seed_demo_procedures_step(ctx: SeedContext) -> str:
    """The seed_demo step (config.demo_seeding)."""
    return "procedures: " + "; ".join(seed_demo_procedures(actor=ctx.actor))
