"""Thin Celery tasks of rubrics: ids in, the service claims the job's lease (returns early when it is finished or
held by a live worker). The task names are the ones they had while rubrics lived in reviews (`reviews.rubric_…`), so
messages queued before the move and the beat schedule still name them."""

from __future__ import annotations

from celery import shared_task

from common.liveness import lease_owner
from common.retry import RETRY

from . import services


@shared_task(name="reviews.rubric_propose", bind=True, ignore_result=True, **RETRY)
def rubric_propose(self, job_id: int) -> None:
    services.rubric_propose_run(job_id=job_id, worker=lease_owner(self.request.id))


@shared_task(name="reviews.rubric_judge", bind=True, ignore_result=True, **RETRY)
def rubric_judge(self, job_id: int) -> None:
    services.rubric_judge_run(job_id=job_id, worker=lease_owner(self.request.id))


@shared_task(name="reviews.rubric_reap", ignore_result=True)
def rubric_reap() -> list[int]:
    """Celery beat (every minute, when scheduled): open rubric jobs whose lease ran out or whose message was lost."""
    from .models import RubricJob, RubricJobKind

    ids = services.rubric_jobs_to_resume()
    kinds = dict(RubricJob.objects.filter(pk__in=ids).values_list("pk", "kind"))
    for job_id in ids:
        (rubric_propose if kinds.get(job_id) == RubricJobKind.PROPOSE else rubric_judge).delay(job_id)
    return ids
