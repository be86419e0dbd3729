"""Demo data of rubrics for `manage.py seed_demo`: a rubric for refund requests, judged and assessed.

Through the real services, with the scripted model when no model key is set: otto (operator) asks the model for a
rubric of `refund_request` from four example runs; three model judges assess four refund runs (each judge its own
ModelCall); rita and rob assess some of the same runs themselves, so agreement has people and models to compare.
The version stays a candidate with an open promotion request proposed by otto: it shows in the review queue (a
rubric has no measured gate, so activating it takes two approvals and an admin override), and the run pages show
its scores meanwhile (they use the newest version while none is active).

The jobs run in this process, not on a worker. Idempotent: what is stored already is left alone. Bounded to the
demo (issue 24): only the demo's runs are judged and assessed, only a proposal job over demo runs is worked, and only
a rubric version proposed from demo runs is used and proposed; a rubric of the same key that someone else proposed
from their own runs is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accounts.services import Actor
from common.demo_seeding import SeedContext, demo_seeder
from reviews.selectors import latest_request_for
from reviews.services import promotion_propose

from . import services
from .models import (
    RUBRIC_JOB_OPEN,
    RaterKind,
    Rubric,
    RubricAssessmentRow,
    RubricJob,
    RubricJobKind,
    RubricVersion,
    RubricVersionStatus,
)
from .promotable import KIND
from .runs import any_run_not_of, demo_run_ids, intent_key

if TYPE_CHECKING:  # annotations only: other apps read rows through selectors (issue 14)
    from accounts.models import User

DEMO_SOURCE = "demo-support-agent"  # trajectories.demo's runs
RUBRIC_KEY = "refund_request"
RUBRIC_LABEL = "Refund request"
WORKER = "seed_demo"
EXAMPLE_RUNS = ("demo-001", "demo-002", "demo-009", "demo-012")
JUDGED_RUNS = ("demo-001", "demo-009", "demo-012", "demo-016")
RATIONALE = "Proposed by the model from four refund runs; model judges and two reviewers have used it, see agreement."

# (run, person, {dimension: (score, confidence, evidence steps, explanation)})
PERSON_ASSESSMENTS = (
    (
        "demo-001",
        "rita",
        {
            "task_completed": (0.9, 0.9, [2], "Refund issued and the customer told."),
            "policy_followed": (0.9, 0.8, [0, 1], "Policy read and the account checked before refunding."),
        },
    ),
    (
        "demo-012",
        "rita",
        {
            "task_completed": (0.9, 0.8, [1], "The refund went through."),
            "policy_followed": (0.2, 0.9, [1], "Refunded without checking that the account is verified."),
        },
    ),
    (
        "demo-016",
        "rita",
        {
            "task_completed": (0.2, 0.8, [2], "No refund: the order was delivered 41 days ago."),
            "policy_followed": (0.9, 0.8, [0, 2], "Refusing after 30 days is what the policy says."),
        },
    ),
    (
        "demo-001",
        "rob",
        {
            "task_completed": (1.0, 0.9, [2], "Done in four steps."),
            "policy_followed": (0.8, 0.7, [1], "Account verified first."),
        },
    ),
    (
        "demo-016",
        "rob",
        {
            "task_completed": (0.3, 0.7, [2, 3], "Refused, but the customer was told why."),
            "policy_followed": (0.8, 0.8, [0], "Followed the 30-day rule."),
        },
    ),
)


@dataclass
class DemoRubric:
    rubric: Rubric | None = None
    version: RubricVersion | None = None
    proposed_now: bool = False
    judged_now: int = 0
    judged: int = 0
    assessed_now: int = 0
    request: Any = None  # the version's newest promotion request (reviews.selectors.latest_request_for)
    requested_now: bool = False
    note: str = ""


def _run_ids(external_ids) -> dict[str, int]:
    return demo_run_ids(DEMO_SOURCE, external_ids)


def _from_demo_runs(run_ids) -> bool:
    """True when `run_ids` names runs and none of them is another source's (runs deleted since do not count)."""
    return bool(run_ids) and not any_run_not_of(DEMO_SOURCE, run_ids)


def _version(*, actor: Actor, result: DemoRubric) -> RubricVersion | None:
    rubric = Rubric.objects.filter(key=intent_key(RUBRIC_KEY)).first()
    if rubric is None or not rubric.versions.exists():
        open_jobs = RubricJob.objects.filter(
            kind=RubricJobKind.PROPOSE,
            status__in=RUBRIC_JOB_OPEN,
            lease_owner="",
            rubric__key=intent_key(RUBRIC_KEY),
        )
        for job in open_jobs:  # a proposal an earlier seeding started and did not finish
            if _from_demo_runs(job.example_run_ids):
                services.rubric_propose_run(job_id=job.pk, worker=WORKER)
        rubric = Rubric.objects.filter(key=intent_key(RUBRIC_KEY)).first()
    if rubric is None or not rubric.versions.exists():
        examples = _run_ids(EXAMPLE_RUNS)
        job = services.rubric_propose_start(
            actor=actor,
            key=RUBRIC_KEY,
            label=RUBRIC_LABEL,
            run_ids=[examples[e] for e in EXAMPLE_RUNS if e in examples],
        )
        job = services.rubric_propose_run(job_id=job.pk, worker=WORKER) or job
        job.refresh_from_db()
        if job.result_version_id is None:
            result.note = f"the rubric proposal failed: {job.error}"
            return None
        result.proposed_now = True
        rubric = job.result_version.rubric
    result.rubric = rubric
    version = services.version_in_use(rubric)
    if version is not None and not _from_demo_runs(version.source_run_ids):
        result.note = f"the {rubric.key} rubric in use (v{version.number}) was not proposed from the demo runs"
        return None
    return version


def _judge(*, actor: Actor, version: RubricVersion, run_id: int) -> bool:
    """Judge the run with the model judges unless they have assessed it under `version`; True when judged now."""
    judged = RubricAssessmentRow.objects.filter(run_id=run_id, version=version, rater_kind=RaterKind.MODEL)
    if judged.exists():
        return False
    job = RubricJob.objects.filter(kind=RubricJobKind.JUDGE, run_id=run_id, status__in=RUBRIC_JOB_OPEN).first()
    if job is None:
        job = services.rubric_judge_start(
            actor=actor, run_id=run_id, version_id=version.pk, judges=services.judges_setting()
        )
    services.rubric_judge_run(job_id=job.pk, worker=WORKER)
    return judged.exists()


def _assess(*, person: User, version: RubricVersion, run_id: int, dimensions: dict) -> bool:
    known = {d["dimension_id"] for d in version.dimensions}
    items = [
        {
            "dimension_id": dimension_id,
            "score": score,
            "confidence": confidence,
            "evidence_steps": steps,
            "explanation": explanation,
        }
        for dimension_id, (score, confidence, steps, explanation) in dimensions.items()
        if dimension_id in known
    ]
    mine = RubricAssessmentRow.objects.filter(run_id=run_id, version=version, rater=f"user:{person.pk}")
    if not items or mine.exists():
        return False
    services.rubric_assessment_submit(actor=Actor(user=person), run_id=run_id, version_id=version.pk, items=items)
    return True


def seed_demo_rubrics(*, users: dict[str, User]) -> DemoRubric:
    result = DemoRubric()
    otto = users["otto"]
    if not (otto.is_operator or otto.is_reviewer):
        result.note = "otto has neither the operator nor the reviewer role"
        return result
    operator = Actor(user=otto)
    version = _version(actor=operator, result=result)
    if version is None:
        return result
    result.version = version
    runs = _run_ids({*JUDGED_RUNS, *(run for run, _, _ in PERSON_ASSESSMENTS)})
    for external_id in JUDGED_RUNS:
        if external_id in runs:
            result.judged_now += _judge(actor=operator, version=version, run_id=runs[external_id])
    result.judged = (
        RubricAssessmentRow.objects.filter(version=version, rater_kind=RaterKind.MODEL)
        .values("run_id")
        .distinct()
        .count()
    )
    for external_id, username, dimensions in PERSON_ASSESSMENTS:
        person = users.get(username)
        if person is not None and (person.is_reviewer or person.is_operator) and external_id in runs:
            result.assessed_now += _assess(
                person=person, version=version, run_id=runs[external_id], dimensions=dimensions
            )
    result.request = latest_request_for(kind=KIND, candidate_id=str(version.pk))
    if result.request is None and version.status == RubricVersionStatus.CANDIDATE:
        result.request = promotion_propose(actor=operator, kind=KIND, candidate_id=str(version.pk), rationale=RATIONALE)
        result.requested_now = True
    return result


@demo_seeder("rubrics", after=("intents",), needs=("users", "runs"))
def seed_demo_rubrics_step(ctx: SeedContext) -> str:
    """The seed_demo step (common.demo_seeding): one summary line."""
    result = seed_demo_rubrics(users=ctx.users)
    if result.version is None:
        return f"rubrics: none ({result.note or 'no refund runs'})"
    version = result.version
    people = (
        RubricAssessmentRow.objects.filter(version=version, rater_kind=RaterKind.PERSON)
        .values("run_id", "rater")
        .distinct()
        .count()
    )
    request = result.request
    state = f"request #{request.pk} {request.status}" if request else "no promotion request"
    return (
        f"rubrics: {result.rubric.key} v{version.number} ({version.status}, "
        f"{'proposed now' if result.proposed_now else 'already there'}); "
        f"{result.judged} runs judged by the model judges ({result.judged_now} now), "
        f"{people} person assessments ({result.assessed_now} now); "
        f"{state}{' (opened now)' if result.requested_now else ''}"
    )
