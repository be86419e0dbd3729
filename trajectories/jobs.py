"""Evaluation job kinds: the registry of work an agent claims over the API with a lease and answers with a run.

Two kinds are registered, each from its app's AppConfig.ready, with callbacks run on commit when a job of that kind is
answered or expires (typically enqueueing the task that checks whether the whole evaluation is complete):
`procedure_replay` (procedures: a live replay's cases, procedures.replay.services.live) and `graph_evaluation`
(graphs: the `agents` evaluator of evolution runs and certifications, graphs.evolution.jobs).

    register_job_kind("procedure_replay", on_answered=..., on_expired=...)

The rows are trajectories' `Job` model; every write (create, claim, answer, reap) is in trajectories.job_services and
the agents' API in trajectories.jobs_api (`/api/v1/jobs`; procedures' `/api/v1/replays` is the same restricted to
replays). This module holds the registry and the beat task `reap_job_leases` (every minute): leases that ran out return
to the queue, jobs past their deadline expire.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from celery import shared_task

OnAnswered = Callable[[int, str], None]


@dataclass(frozen=True)
class JobKind:
    name: str
    on_answered: OnAnswered | None = None
    on_expired: OnAnswered | None = None


_kinds: dict[str, JobKind] = {}


def register_job_kind(name: str, *, on_answered: OnAnswered | None = None, on_expired: OnAnswered | None = None):
    """Declare a job kind (from an AppConfig.ready()). Registering again replaces the callbacks."""
    if not name or len(name) > 60:
        raise ValueError("a job kind is a non-empty name of at most 60 characters")
    kind = JobKind(name=name, on_answered=on_answered, on_expired=on_expired)
    _kinds[name] = kind
    return kind


def job_kind(name: str) -> JobKind | None:
    return _kinds.get(name)


def registered_job_kinds() -> tuple[str, ...]:
    return tuple(sorted(_kinds))


@shared_task(name="trajectories.jobs.reap_job_leases", ignore_result=True)
def reap_job_leases() -> dict[str, int]:
    """Celery beat, every minute: expired leases back to the queue, overdue jobs expired."""
    from .job_services import jobs_reap

    return jobs_reap()
