"""The dashboard's reads: a fixed number of queries whatever the data size."""

from dataclasses import dataclass

from django.db.models import Count, Q, Sum
from django.urls import NoReverseMatch, reverse

from accounts.blinding import blind
from accounts.models import AuditEvent
from llm.models import ModelCall
from reviews.selectors import pending_count
from trajectories.models import Outcome, Run

RECENT_RUNS = 5
RECENT_EVENTS = 10

# Audit targets that have a page of their own: target_type -> URL name taking the target's primary key.
TARGET_PAGES = {
    "trajectories.run": "trajectories:detail",
}


@dataclass(frozen=True)
class Stat:
    label: str
    value: int
    url: str = ""


def _url(name: str, *args, query: str = "") -> str:
    try:
        return reverse(name, args=args) + (f"?{query}" if query else "")
    except NoReverseMatch:
        return ""


def _counts() -> list[Stat]:
    runs = Run.objects.aggregate(
        total=Count("id"),
        success=Count("id", filter=Q(outcome=Outcome.SUCCESS)),
        failure=Count("id", filter=Q(outcome=Outcome.FAILURE)),
        steps=Sum("step_count", default=0),
    )
    return [
        Stat("Runs", runs["total"], _url("trajectories:list")),
        Stat("Successful runs", runs["success"], _url("trajectories:list", query="outcome=success")),
        Stat("Failed runs", runs["failure"], _url("trajectories:list", query="outcome=failure")),
        Stat("Steps", runs["steps"]),
        Stat("Model calls", ModelCall.objects.count(), _url("llm:calls")),
        Stat("Open reviews", pending_count(), _url("reviews:queue")),
    ]


def _recent_events(viewer) -> list[AuditEvent]:
    """The latest events; a judgment of something still open names no one unless `viewer` has judged it too."""
    events = blind(
        AuditEvent.objects.select_related("actor_user", "actor_token").defer("before", "after")[:RECENT_EVENTS], viewer
    )
    for event in events:
        page = TARGET_PAGES.get(event.target_type)
        event.target_url = _url(page, event.target_id) if page and event.target_id.isdigit() else ""
    return events


def dashboard_context(viewer=None) -> dict:
    recent_runs = Run.objects.only(
        "id", "source", "external_id", "task", "intent", "outcome", "score", "step_count", "created_at"
    )[:RECENT_RUNS]
    return {
        "counts": _counts(),
        "recent_runs": list(recent_runs),
        "recent_events": _recent_events(viewer),
    }
