"""The Celery app of the rubric judging fault test's worker subprocess (tests/faults.py): a short job lease, the
scripted judges (no API key in the test settings), and test-only patches that SIGKILL the pool process once at
"call:<judge>" (inside that judge's model call, its ledger row written), "assessed:<judge>" (that judge's
assessments and the score committed) and "finished" (the job settled, before the message is acknowledged)."""

import os
from datetime import timedelta

from tests.faults import die_once_at, note, worker_app

app = worker_app()

from rubrics import services as rubric_services  # noqa: E402

rubric_services.LEASE = timedelta(seconds=float(os.environ.get("FAULT_LEASE_SECONDS", "2")))


class DyingJudge:
    def __init__(self, inner, judge: int) -> None:
        self.inner = inner
        self.judge = judge
        self.model_id = inner.model_id

    def complete(self, request):
        die_once_at(f"call:{self.judge}")
        return self.inner.complete(request)


_judge_model = rubric_services._judge_model


def judge_model(run, rubric, judge):
    return DyingJudge(_judge_model(run, rubric, judge), judge)


rubric_services._judge_model = judge_model

_replace = rubric_services._replace_assessments


def replace_assessments(**kwargs):
    score = _replace(**kwargs)
    note("assessments.log", kwargs["rater"])
    judge = kwargs["judge_name"].rsplit("#", 1)[-1]
    die_once_at(f"assessed:{judge}")
    return score


rubric_services._replace_assessments = replace_assessments

_judge_run = rubric_services.rubric_judge_run


def judge_run(**kwargs):
    job = _judge_run(**kwargs)
    if job is not None:
        note("jobs.log", f"{job.pk}:{job.status}")
        die_once_at("finished")
    return job


rubric_services.rubric_judge_run = judge_run
