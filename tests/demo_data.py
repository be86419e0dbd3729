"""The user's own data beside the demo's (issue 24): runs of the user's agent with the demo's intents and tools, so
that a seeder selecting runs by intent or tool rather than by the demo's source would take them."""

from __future__ import annotations

from accounts.services import Actor
from trajectories.models import Run
from trajectories.services import run_ingest_batch

USER_SOURCE = "acme-support-bot"
DEMO_INTENTS = ("refund_request", "cancel_order", "change_address", "order_status")
BATCH = 1000  # what one ingest request may carry (WAYMARK_INGEST_MAX_RUNS)


def user_run_items(count: int, *, prefix: str = "user", intents=DEMO_INTENTS) -> list[dict]:
    return [
        {
            "source": USER_SOURCE,
            "external_id": f"{prefix}-{number}",
            "task": f"Refund order U-{number}",
            "intent": intents[number % len(intents)],
            "outcome": "failure" if number % 5 == 0 else "success",
            "steps": [
                {"tool": "lookup_order", "arguments": {"order_id": f"U-{number}"}, "ok": True},
                {"tool": "issue_refund", "arguments": {"order_id": f"U-{number}"}, "ok": True},
            ],
        }
        for number in range(count)
    ]


def push_user_runs(count: int, **options) -> list[int]:
    """Store `count` of the user's runs through the ingest service, BATCH at a time like an agent; their ids."""
    items = user_run_items(count, **options)
    ids: list[int] = []
    for start in range(0, count, BATCH):
        ids += run_ingest_batch(actor=Actor.system(), items=items[start : start + BATCH]).created_ids
    return ids


def user_runs():
    return Run.objects.filter(source=USER_SOURCE)


def assert_the_users_runs_were_left_alone() -> None:
    """No demo proposal, rubric judgment or procedure version read any of the user's runs."""
    from intents.models import IntentBatchRun
    from procedures.models import ProcedureVersion
    from rubrics.models import RubricAssessmentRow

    user_ids = set(user_runs().values_list("pk", flat=True))
    assert not IntentBatchRun.objects.filter(trajectory_run__source=USER_SOURCE).exists()
    assert not RubricAssessmentRow.objects.filter(run__source=USER_SOURCE).exists()
    for version in ProcedureVersion.objects.all():
        used = {*version.training_run_ids, *version.held_out_run_ids, *version.source_run_ids}
        assert not used & user_ids, f"procedure version {version.pk} was mined from the user's runs"


def demo_run_count() -> int:
    """The demo's runs: the support agent's, those it made under a new model after an activation, and those of both
    arms of the demo's canaries (procedures.demo)."""
    from procedures.demo import CANARY_RUNS, NEW_MODEL_RUNS
    from trajectories.demo import demo_run_items

    return len(demo_run_items()) + NEW_MODEL_RUNS + 2 * sum(CANARY_RUNS.values())
