"""The "agents" evaluator: a graph is measured by evaluation jobs that agents claim and answer over the API.

Each evaluation (baseline or candidate of a round) queues one job per validation task, with the graph to run under
in the payload. Until every job is answered or expired the evaluator raises EvaluationPending: the run shows
`waiting`, and each answer (or the deadline) enqueues the run's next step, which resumes the round from its
checkpoint and asks again. An unanswered task scores 0 and never counts as a pass.

A certification (graphs.certification_services) measures its two arms the same way, under its own subjects
(`graphs.certification:<id>:…`); its control arm may be no graph at all: the job's payload then carries
`"graph": null` and `"graph_ref": null`, and the agent runs the task without guidance.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from graphs.core import Graph
from graphs.core.evaluation import Evaluation, EvaluationPending, TaskOutcome
from trajectories.choices import JobStatus
from trajectories.job_services import answering_agents, jobs_create
from trajectories.selectors import jobs_for_subject

from ..models import Workspace

JOB_KIND = "graph_evaluation"
SUBJECT_PREFIX = "graphs.evolutionrun:"
CERTIFICATION_PREFIX = "graphs.certification:"


def job_subject(run_id: int, purpose: str, iteration: int, ref: str | None) -> str:
    return _subject(f"{SUBJECT_PREFIX}{run_id}:", purpose, iteration, ref)


def _subject(prefix: str, purpose: str, iteration: int, ref: str | None) -> str:
    return f"{prefix}{purpose}:{iteration}:{(ref or 'none')[:16]}"


def _id_after(prefix: str, subject: str) -> int | None:
    if not subject.startswith(prefix):
        return None
    head = subject[len(prefix) :].split(":", 1)[0]
    return int(head) if head.isascii() and head.isdigit() else None


def run_id_of_subject(subject: str) -> int | None:
    return _id_after(SUBJECT_PREFIX, subject)


def certification_prefix(certification_id: int) -> str:
    return f"{CERTIFICATION_PREFIX}{certification_id}:"


def certification_id_of_subject(subject: str) -> int | None:
    return _id_after(CERTIFICATION_PREFIX, subject)


def _outcome(job) -> TaskOutcome:
    task_id = str(job.payload.get("task_id") or f"job-{job.pk}")
    run = job.result_run if job.status == JobStatus.DONE else None
    if run is None:
        return TaskOutcome(task_id, 0.0, False, meta={"job": job.pk, "answered": False})
    score = (
        run.score if run.score is not None and 0.0 <= run.score <= 1.0 else (1.0 if run.outcome == "success" else 0.0)
    )
    return TaskOutcome(task_id, score, run.outcome == "success", meta={"job": job.pk, "run": run.pk, "answered": True})


class AgentJobsEvaluator:
    """Jobs of an evolution run (`run_id`; its validation tasks read from the run) or, with `subject_prefix` and
    `tasks`, of another evaluation (a certification)."""

    evaluates_without_graph = True

    def __init__(
        self,
        *,
        workspace: Workspace,
        run_id: int | None = None,
        tasks: list[dict[str, Any]] | None = None,
        subject_prefix: str | None = None,
    ) -> None:
        if run_id is None and subject_prefix is None:
            raise TypeError("an agents evaluator needs a run or a subject prefix")
        self.workspace = workspace
        self.run_id = run_id
        self.tasks = tasks
        self.subject_prefix = subject_prefix or f"{SUBJECT_PREFIX}{run_id}:"

    def _tasks(self) -> list[dict[str, Any]]:
        if self.tasks is None and self.run_id is not None:
            from ..models import EvolutionRun

            config = EvolutionRun.objects.values_list("config", flat=True).get(pk=self.run_id)
            self.tasks = list(config.get("validation_tasks") or [])
        return list(self.tasks or [])

    def evaluate(self, ref: str | None, graph: Graph | None, *, iteration: int, purpose: str) -> Evaluation:
        subject = _subject(self.subject_prefix, purpose, iteration, ref)
        jobs = list(jobs_for_subject(subject))
        if not jobs:
            tasks = self._tasks()
            if not tasks:
                raise ValueError("the agents evaluator needs validation tasks: the workspace has no stored runs")
            seconds = int(getattr(settings, "WAYMARK_EVALUATION_JOB_SECONDS", 15 * 60))
            payloads = [
                {
                    "workspace": self.workspace.slug,
                    "graph_ref": ref,
                    "graph": graph.to_document() if graph is not None else None,
                    "purpose": purpose,
                    "iteration": iteration,
                    "task_id": task["task_id"],
                    "task": task["task"],
                }
                for task in tasks
            ]
            with transaction.atomic():
                jobs_create(
                    kind=JOB_KIND,
                    subject=subject,
                    payloads=payloads,
                    deadline=timezone.now() + timedelta(seconds=seconds),
                )
            raise EvaluationPending(f"{len(payloads)} evaluation job(s) queued for agents")
        open_jobs = [job for job in jobs if job.status in (JobStatus.QUEUED, JobStatus.LEASED)]
        if open_jobs:
            raise EvaluationPending(f"{len(open_jobs)} of {len(jobs)} evaluation job(s) still unanswered")
        outcomes = [_outcome(job) for job in jobs]
        answered = sum(1 for job in jobs if job.status == JobStatus.DONE)
        aggregate = {"purpose": purpose, "iteration": iteration, "answered": answered, "jobs": len(jobs)}
        aggregate["agents"] = answering_agents(subject)
        return Evaluation.from_outcomes(ref, outcomes, aggregate)
