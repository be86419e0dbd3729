"""Demo procedures for `manage.py seed_demo`: the demo support runs mined into real candidates, replayed offline.

Idempotent: mining the same runs again finds the identical version, and a replay that already ran is left alone.
"""

from __future__ import annotations

from accounts.services import Actor
from config.demo_seeding import SeedContext, demo_seeder

from . import errors, mining_services, offline_replay_services
from .models import ReplayMode, ReplayStatus

DEMO_INTENTS = ("refund_request", "cancel_order", "change_address", "order_status")


def seed_demo_procedures(*, actor: Actor) -> list[str]:
    """Mine each demo intent and finish its offline replay now (the worker may not run yet). One line per intent."""
    lines = []
    for intent in DEMO_INTENTS:
        try:
            result = mining_services.procedure_mine(actor=actor, intent=intent, live=False)
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


@demo_seeder("procedures", after=("runs",))
def seed_demo_procedures_step(ctx: SeedContext) -> str:
    """The seed_demo step (config.demo_seeding)."""
    return "procedures: " + "; ".join(seed_demo_procedures(actor=ctx.actor))
