"""Every write of rubrics: proposals by the model, judging by K model judges, reviewers' and operators' own
assessments (from the pages or with a token; each recorded blind or not), the cached score, and the jobs' leases.

Model calls run in Celery tasks outside any transaction (each recorded in the ModelCall ledger by
RecordedChatModel); what they produce is written afterwards in one durable transaction with its audit event. A
malformed reply is kept on its ledger row (raw text + the parser's error), retried once with the error fed back, and
never becomes a half-valid rubric or assessment. Activation of a rubric version is the promotion policy's
(rubrics.promotable), never this module's.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from accounts.roles import Role, require_role
from accounts.services import Actor, audit_record
from common.leases import RELEASED, LeaseLost, lease_claim, lease_held, lease_write
from common.liveness import lease_owner
from common.text import plain_identifier_error
from llm.core import MalformedModelOutput, ModelError, ModelRequest, ScriptedChatModel
from llm.factory import get_chat_model, model_is_scripted
from llm.recording import RecordedChatModel
from llm.services import model_call_note_rejected_output
from reviews.errors import Conflict, Invalid, NotFound

from .core.prompts import build_judge_request, build_rubric_request
from .core.rubrics import (
    RubricAssessment,
    TrajectoryRubric,
    parse_assessment_reply,
    parse_rubric_assessments,
    parse_rubric_reply,
    score_trajectory_rubric,
)
from .models import (
    RUBRIC_JOB_OPEN,
    RaterKind,
    Rubric,
    RubricAssessmentRow,
    RubricJob,
    RubricJobKind,
    RubricJobStatus,
    RubricScoreRow,
    RubricVersion,
    RubricVersionStatus,
)
from .runs import RunView, intent_key, load_run, production_runs, run_exists, run_views

if TYPE_CHECKING:  # annotations only: other apps read rows through selectors (issue 14)
    from accounts.models import User

DEFAULT_JUDGES = 3
MAX_JUDGES = 5
DEFAULT_EXAMPLES = 5
MAX_EXAMPLES = 20
MAX_JOB_ATTEMPTS = 3
LEASE = timedelta(minutes=5)
REQUIRED_MINIMUM = 0.5
MAX_ITEMS = 50


def rubric_core(version: RubricVersion) -> TrajectoryRubric:
    return TrajectoryRubric.from_document(version.document)


# --- helpers ---------------------------------------------------------------------------------------------------------
def active_user(actor: Actor) -> User | None:
    """The actor's user when it is an active account; None for the system, a token without a user, or inactive."""
    user = actor.user
    return user if user is not None and user.is_active else None


def _version(version_id: int | None) -> RubricVersion:
    version = RubricVersion.objects.select_related("rubric").filter(pk=version_id).first() if version_id else None
    if version is None:
        raise NotFound(f"no rubric version {version_id}", code="unknown_rubric_version")
    return version


def _enqueue(job: RubricJob) -> None:
    from . import tasks

    task = tasks.rubric_propose if job.kind == RubricJobKind.PROPOSE else tasks.rubric_judge
    transaction.on_commit(partial(task.delay, job.pk))


def rubric_for_run(run: RunView) -> Rubric | None:
    key = intent_key(run.intent)
    return Rubric.objects.select_related("active_version").filter(key=key).first() if key else None


def version_in_use(rubric: Rubric) -> RubricVersion | None:
    """The version scores are shown for: the active one, else the newest candidate (assessed before activation)."""
    if rubric.active_version_id:
        return rubric.active_version
    return rubric.versions.order_by("-number").first()


# --- rubrics and versions --------------------------------------------------------------------------------------------
def rubric_ensure(*, actor: Actor, key: str, label: str = "") -> Rubric:
    """The rubric of an intent key, created (audited) on first use. The key is normalized like intent labels."""
    for what, text in (("an intent key", key), ("a rubric label", label)):
        if problem := plain_identifier_error((text or "").strip()):  # the key and label name the rubric
            raise Invalid(f"{what} {problem}", code="invisible_characters")
    normalized = intent_key(key)
    if not normalized:
        raise Invalid("an intent or task family is required", code="key_required")
    if len(normalized) > 200:
        raise Invalid("an intent key has at most 200 characters", code="too_long")
    existing = Rubric.objects.filter(key=normalized).first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic(durable=True):
            rubric = Rubric.objects.create(key=normalized, label=(label or key).strip()[:200])
            audit_record(actor=actor, verb="rubric.create", target=rubric, after={"key": normalized})
    except IntegrityError:
        return Rubric.objects.get(key=normalized)
    return rubric


def rubric_version_add(
    *,
    actor: Actor,
    rubric: Rubric,
    document: TrajectoryRubric,
    source_run_ids: Sequence[int] = (),
    model_call_id: int | None = None,
) -> tuple[RubricVersion, bool]:
    """Append a candidate version (immutable document + digest). Same digest as an existing version: that one."""
    digest = document.digest
    existing = RubricVersion.objects.filter(rubric=rubric, digest=digest).first()
    if existing is not None:
        return existing, False
    with transaction.atomic(durable=True):
        locked = Rubric.objects.select_for_update().get(pk=rubric.pk)
        existing = RubricVersion.objects.filter(rubric=locked, digest=digest).first()
        if existing is not None:
            return existing, False
        number = (
            RubricVersion.objects.filter(rubric=locked).order_by("-number").values_list("number", flat=True).first()
            or 0
        ) + 1
        version = RubricVersion.objects.create(
            rubric=locked,
            number=number,
            document=document.to_document(),
            digest=digest,
            proposed_by=active_user(actor),
            model_call_id=model_call_id,
            source_run_ids=list(source_run_ids),
        )
        audit_record(
            actor=actor,
            verb="rubric_version.create",
            target=version,
            after={
                "rubric": locked.key,
                "number": number,
                "digest": digest,
                "dimensions": list(document.dimension_ids),
                "model_call": model_call_id,
            },
        )
    return version, True


def example_run_ids(key: str, *, limit: int = DEFAULT_EXAMPLES) -> list[int]:
    """The newest production runs whose declared intent normalizes to `key` (successful ones first), at most
    `limit`."""
    labels = production_runs().exclude(intent="").values_list("intent", flat=True).distinct().order_by()
    matching = sorted({label for label in labels if intent_key(label) == key})
    if not matching:
        return []
    rows = production_runs().filter(intent__in=matching).order_by("-id").values_list("pk", "outcome")[: limit * 4]
    ordered = sorted(rows, key=lambda row: (row[1] != "success", -row[0]))
    return [pk for pk, _ in ordered[:limit]]


def rubric_propose_start(
    *, actor: Actor, key: str, label: str = "", run_ids: Sequence[int] | None = None, limit: int = DEFAULT_EXAMPLES
) -> RubricJob:
    """Queue a proposal: the model reads example runs of the intent and proposes a rubric (a Celery task)."""
    require_role(actor, Role.REVIEWER, Role.OPERATOR, doing="proposing a rubric", code="not_a_reviewer")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_EXAMPLES:
        raise Invalid(f"between 1 and {MAX_EXAMPLES} example runs", code="invalid_limit")
    rubric = rubric_ensure(actor=actor, key=key, label=label)
    if run_ids:
        ids = sorted({int(pk) for pk in run_ids})[:MAX_EXAMPLES]
        found = set(production_runs().filter(pk__in=ids).values_list("pk", flat=True))
        if missing := [pk for pk in ids if pk not in found]:
            if run_exists(missing[0]):
                raise Conflict(
                    f"run {missing[0]} is an evaluation run (a live replay's): rubrics learn from production runs",
                    code="evaluation_run",
                    details={"run_ids": missing},
                )
            raise NotFound(f"no run {missing[0]}", code="unknown_run", details={"run_ids": missing})
    else:
        ids = example_run_ids(rubric.key, limit=limit)
    if not ids:
        raise Invalid(f"no runs declare the intent {rubric.key!r}; name example runs", code="no_example_runs")
    with transaction.atomic(durable=True):
        job = RubricJob.objects.create(
            kind=RubricJobKind.PROPOSE, rubric=rubric, example_run_ids=ids, requested_by=active_user(actor)
        )
        audit_record(actor=actor, verb="rubric.propose", target=job, after={"rubric": rubric.key, "runs": ids})
        _enqueue(job)
    return job


def rubric_judge_start(*, actor: Actor, run_id: int, version_id: int, judges: int = DEFAULT_JUDGES) -> RubricJob:
    """Queue judging of one production run under one rubric version by `judges` model judges (a Celery task)."""
    require_role(actor, Role.REVIEWER, Role.OPERATOR, doing="judging a run with models", code="not_a_reviewer")
    if isinstance(judges, bool) or not isinstance(judges, int) or not 1 <= judges <= MAX_JUDGES:
        raise Invalid(f"between 1 and {MAX_JUDGES} judges", code="invalid_judges")
    version = _version(version_id)
    run = load_run(run_id, production=True)
    with transaction.atomic(durable=True):
        if RubricJob.objects.filter(kind=RubricJobKind.JUDGE, run_id=run.pk, status__in=RUBRIC_JOB_OPEN).exists():
            raise Conflict("this run is already being judged", code="already_judging")
        job = RubricJob.objects.create(
            kind=RubricJobKind.JUDGE,
            rubric=version.rubric,
            version=version,
            run_id=run.pk,
            judges=judges,
            requested_by=active_user(actor),
        )
        audit_record(
            actor=actor,
            verb="rubric.judge",
            target=job,
            after={"run": run.pk, "version": version.pk, "judges": judges},
        )
        _enqueue(job)
    return job


# --- job leases ------------------------------------------------------------------------------------------------------
def _claim(job_id: int, worker: str) -> RubricJob | None:
    """Take the job's lease with a conditional update; None when it is finished or held by a live worker."""
    now = timezone.now()
    with transaction.atomic(durable=True):
        taken = lease_claim(
            RubricJob.objects.filter(pk=job_id, status__in=RUBRIC_JOB_OPEN),
            owner=worker,
            seconds=LEASE,
            now=now,
            ended_at_expiry=True,
            status=RubricJobStatus.RUNNING,
            attempts=F("attempts") + 1,
        )
        if not taken:
            return None
        job = RubricJob.objects.select_related("rubric", "version").get(pk=job_id)
        if job.started_at is None:
            RubricJob.objects.filter(pk=job_id).update(started_at=now)
    return job


def _finish(job: RubricJob, worker: str, **fields: Any) -> bool:
    """Inside the caller's transaction: settle the job if we still hold its lease."""
    fields.setdefault("finished_at", timezone.now())
    held = lease_held(RubricJob.objects.filter(pk=job.pk, status=RubricJobStatus.RUNNING), worker)
    return bool(held.update(**RELEASED, **fields))


def _keep_progress(job: RubricJob, worker: str, log: list[dict]) -> None:
    """Inside a judge's assessments transaction: save the job's log (that judge done) and renew the lease, only while
    we hold it, so a worker taking the job over after a crash skips the judges already written."""
    held = RubricJob.objects.filter(pk=job.pk, status=RubricJobStatus.RUNNING)
    renewed = timezone.now() + LEASE
    lease_write(held, owner=worker, what=f"rubric job {job.pk}", attempts_log=list(log), lease_expires_at=renewed)


def _fail(job: RubricJob, worker: str, error: str, log: list[dict]) -> None:
    with transaction.atomic(durable=True):
        if _finish(job, worker, status=RubricJobStatus.FAILED, error=error[:4000], attempts_log=log):
            audit_record(
                actor=Actor.system(), verb="rubric_job.fail", target=job, after={"kind": job.kind, "error": error}
            )


def _ask_with_one_retry(model: RecordedChatModel, request: ModelRequest, parse, log: list[dict], who: str):
    """Ask; on a malformed reply note the error on the ledger row and ask once more with the error fed back.
    Returns the parsed value and the call id of the accepted reply, or raises MalformedModelOutput."""
    error: MalformedModelOutput | None = None
    for attempt in (1, 2):
        if error is not None:
            request = ModelRequest(
                role=request.role,
                system=request.system,
                parts=(
                    *request.parts,
                    f"Your previous reply was rejected: {error}. Reply again with one valid JSON object only.",
                ),
                max_tokens=request.max_tokens,
                metadata={**request.metadata, "retry_of": log[-1]["call"] if log else None},
            )
        response = model.complete(request)
        call_id = model.last_call.pk if model.last_call else None
        try:
            value = parse(response.text)
        except MalformedModelOutput as rejected:
            if call_id is not None:
                model_call_note_rejected_output(call_id=call_id, error=rejected)
            log.append({"who": who, "attempt": attempt, "call": call_id, "error": str(rejected)})
            error = rejected
            continue
        log.append({"who": who, "attempt": attempt, "call": call_id, "error": ""})
        return value, call_id
    raise error


def rubric_propose_run(*, job_id: int, worker: str | None = None) -> RubricJob | None:
    """The proposal task's work: claim, ask the "rubric" role, retry a malformed reply once, append the version."""
    worker = worker or lease_owner()
    job = _claim(job_id, worker)
    if job is None:
        return None
    log = list(job.attempts_log)
    if job.attempts > MAX_JOB_ATTEMPTS:
        _fail(job, worker, f"gave up after {MAX_JOB_ATTEMPTS} attempts", log)
        return RubricJob.objects.get(pk=job.pk)
    runs = run_views(job.example_run_ids)
    task = job.rubric.label or job.rubric.key
    model = RecordedChatModel(get_chat_model(), "rubric", subject=job.rubric)
    try:
        document, call_id = _ask_with_one_retry(
            model, build_rubric_request(task, runs), lambda text: parse_rubric_reply(task, text), log, "rubric"
        )
    except MalformedModelOutput as error:
        _fail(job, worker, f"the model's rubric was rejected twice: {error}", log)
        return RubricJob.objects.get(pk=job.pk)
    except ModelError as error:  # no reply, or one that is not an answer: the ledger row has its diagnostics
        log.append(_no_answer(model, "rubric", error, log))
        _fail(job, worker, f"the model gave no answer: {type(error).__name__}: {error}", log)
        return RubricJob.objects.get(pk=job.pk)
    actor = Actor(user=job.requested_by) if job.requested_by_id else Actor.system()
    version, _ = rubric_version_add(
        actor=actor, rubric=job.rubric, document=document, source_run_ids=job.example_run_ids, model_call_id=call_id
    )
    with transaction.atomic(durable=True):
        _finish(job, worker, status=RubricJobStatus.SUCCEEDED, result_version=version, attempts_log=log, error="")
    return RubricJob.objects.get(pk=job.pk)


# --- scripted judges (no ANTHROPIC_API_KEY) --------------------------------------------------------------------------
def scripted_judge_reply(run: RunView, rubric: TrajectoryRubric, judge: int) -> str:
    """A deterministic judge for the offline demo: scores follow the run's outcome and failed steps, each judge a
    little apart from the others; evidence is the failed steps (else the last step)."""
    import json

    failed = [i for i, step in enumerate(run.steps) if step.ok is False]
    evidence = failed[:3] or ([len(run.steps) - 1] if run.steps else [])
    base = {"success": 0.85, "failure": 0.3}.get(run.outcome, 0.55) - 0.1 * min(len(failed), 3)
    rows = []
    for dimension in rubric.dimensions:
        jitter = (zlib.crc32(f"{run.trajectory_id}|{dimension.dimension_id}|{judge}".encode()) % 21 - 10) / 100
        score = round(min(1.0, max(0.0, base + jitter)), 2)
        rows.append(
            {
                "dimension_id": dimension.dimension_id,
                "score": score,
                "confidence": 0.6 + 0.1 * (judge % 3),
                "evidence_steps": evidence,
                "explanation": f"Scripted judge {judge}: outcome {run.outcome}, {len(failed)} failed step(s).",
            }
        )
    return json.dumps({"assessments": rows})


def _judge_model(run: RunView, rubric: TrajectoryRubric, judge: int):
    if model_is_scripted():
        return ScriptedChatModel([scripted_judge_reply(run, rubric, judge)], model_id="scripted-judge")
    return get_chat_model()


# --- judging ---------------------------------------------------------------------------------------------------------
def rubric_judge_run(*, job_id: int, worker: str | None = None) -> RubricJob | None:
    """The judging task's work: each of K judges is its own "judge" call (subject: the run); each judge's accepted
    assessments replace its earlier ones and the score is recomputed. A judge whose reply is rejected twice adds
    nothing; the job fails only when every judge failed."""
    worker = worker or lease_owner()
    job = _claim(job_id, worker)
    if job is None:
        return None
    log = list(job.attempts_log)
    if job.attempts > MAX_JOB_ATTEMPTS:
        _fail(job, worker, f"gave up after {MAX_JOB_ATTEMPTS} attempts", log)
        return RubricJob.objects.get(pk=job.pk)
    run = load_run(job.run_id)
    version = job.version
    rubric = rubric_core(version)
    done = {entry["who"] for entry in log if not entry.get("error")}
    accepted = 0
    for index in range(1, job.judges + 1):
        inner = _judge_model(run, rubric, index)
        name = f"{getattr(inner, 'model_id', 'model')}#{index}"
        if name in done:
            accepted += 1
            continue
        model = RecordedChatModel(inner, "judge", subject=("trajectories.run", run.pk))
        base = build_judge_request(run, rubric)
        request = ModelRequest(
            role=base.role,
            system=base.system,
            parts=(*base.parts, f"You are judge {index} of {job.judges}; judge independently."),
            max_tokens=base.max_tokens,
            metadata={**base.metadata, "judge": name},
        )
        try:
            assessments, call_id = _ask_with_one_retry(
                model, request, lambda text: parse_assessment_reply(run, rubric, text), log, name
            )
        except MalformedModelOutput:
            continue
        except ModelError as error:  # this judge adds nothing; the others still judge
            log.append(_no_answer(model, name, error, log))
            continue
        try:
            _replace_assessments(
                actor=Actor.system(),
                run=run,
                version=version,
                rater=f"judge:{name}",
                assessments=assessments,
                kind=RaterKind.MODEL,
                judge_name=name,
                model_call_id=call_id,
                blind=True,  # a judge's prompt holds the run and the rubric, never another rater's score
                on_written=partial(_keep_progress, job, worker, log),
            )
        except LeaseLost:
            return RubricJob.objects.get(pk=job.pk)
        accepted += 1
    with transaction.atomic(durable=True):
        if accepted:
            _finish(job, worker, status=RubricJobStatus.SUCCEEDED, attempts_log=log, error="")
        else:
            _finish(job, worker, status=RubricJobStatus.FAILED, attempts_log=log, error=_no_judge_reason(log))
    return RubricJob.objects.get(pk=job.pk)


def _no_answer(model: RecordedChatModel, who: str, error: ModelError, log: list[dict]) -> dict:
    """The log entry of a call that gave no answer (unreachable, rate-limited, or a reply that is not one), naming
    its ledger row, where the diagnostics are."""
    call_id = model.last_call.pk if model.last_call else None
    attempt = 1 + sum(entry["who"] == who for entry in log)  # after a rejected reply, the retry gave no answer
    return {"who": who, "attempt": attempt, "call": call_id, "error": f"no answer: {type(error).__name__}: {error}"}


def _no_judge_reason(log: list[dict]) -> str:
    """Why a judging job that accepted nothing failed: the first judge that gave no answer says why, else every
    reply was rejected."""
    missing = [entry for entry in log if entry["error"].startswith("no answer: ")]
    if missing:
        first = missing[0]
        return f"no judge's assessments were accepted: {first['who']} gave {first['error']}"
    return "every judge's reply was rejected"


# --- assessments and the score ---------------------------------------------------------------------------------------
def _recompute(run: RunView, version: RubricVersion) -> RubricScoreRow:
    """Inside the caller's transaction: fold every stored assessment of (run, version) into the cached score."""
    rubric = rubric_core(version)
    rows = list(RubricAssessmentRow.objects.filter(run_id=run.pk, version=version))
    known = set(rubric.dimension_ids)
    assessments = [
        RubricAssessment(
            trajectory_id=run.trajectory_id,
            dimension_id=row.dimension_id,
            score=row.score,
            confidence=row.confidence,
            evidence_steps=tuple(row.evidence_steps),
            explanation=row.explanation,
        )
        for row in rows
        if row.dimension_id in known
    ]
    score = score_trajectory_rubric(run, rubric, assessments, required_minimum=REQUIRED_MINIMUM)
    cached, _ = RubricScoreRow.objects.update_or_create(
        run_id=run.pk,
        version=version,
        defaults={
            "overall": score.overall,
            "dimension_scores": dict(score.dimension_scores),
            "dimension_confidence": dict(score.dimension_confidence),
            "missing_dimensions": list(score.missing_dimensions),
            "required_failures": list(score.required_failures),
            "assessment_count": len(assessments),
            "rater_count": len({row.rater for row in rows}),
            "updated_at": timezone.now(),
        },
    )
    return cached


def _replace_assessments(
    *,
    actor: Actor,
    run: RunView,
    version: RubricVersion,
    rater: str,
    assessments: Sequence[RubricAssessment],
    kind: str,
    user: User | None = None,
    judge_name: str = "",
    model_call_id: int | None = None,
    blind: bool | None = None,
    on_written: Callable[[], None] | None = None,
) -> RubricScoreRow:
    """One transaction: the rater's assessments of these dimensions replace their earlier ones; score recomputed;
    `on_written` runs inside it (a judging job records its progress there). A person's `blind` (None) is decided
    here, from what they could see: blind when they had assessed this run under no version of its rubric (the
    others' scores are shown to a person only after their own, rubrics.selectors)."""
    dimensions = [a.dimension_id for a in assessments]
    with transaction.atomic(durable=True):
        if blind is None:
            blind = not _has_assessed(user, run.pk, version)
        before = list(
            RubricAssessmentRow.objects.filter(
                run_id=run.pk, version=version, rater=rater, dimension_id__in=dimensions
            ).values("dimension_id", "score")
        )
        RubricAssessmentRow.objects.filter(
            run_id=run.pk, version=version, rater=rater, dimension_id__in=dimensions
        ).delete()
        RubricAssessmentRow.objects.bulk_create(
            [
                RubricAssessmentRow(
                    run_id=run.pk,
                    version=version,
                    dimension_id=a.dimension_id,
                    score=a.score,
                    confidence=a.confidence,
                    evidence_steps=list(a.evidence_steps),
                    explanation=a.explanation,
                    rater=rater,
                    rater_kind=kind,
                    user=user,
                    judge_name=judge_name,
                    model_call_id=model_call_id,
                    blind=blind,
                )
                for a in assessments
            ]
        )
        score = _recompute(run, version)
        if on_written is not None:
            on_written()
        audit_record(
            actor=actor,
            verb="rubric.assess",
            target=("trajectories.run", str(run.pk)),
            before={"assessments": before} if before else None,
            after={
                "version": version.pk,
                "rater": rater,
                "blind": blind,
                "scores": {a.dimension_id: a.score for a in assessments},
                "overall": score.overall,
                "required_failures": score.required_failures,
            },
        )
    return score


def _has_assessed(user: User | None, run_id: int, version: RubricVersion) -> bool:
    """Whether `user` had assessed the run under any version of this rubric: from then on its scores were theirs to
    see, so what they assess next is not blind."""
    if user is None:
        return False
    return RubricAssessmentRow.objects.filter(
        run_id=run_id, user=user, rater_kind=RaterKind.PERSON, version__rubric_id=version.rubric_id
    ).exists()


def validate_items(run: RunView, rubric: TrajectoryRubric, items: Sequence[Mapping[str, Any]]) -> tuple:
    """People's and clients' assessments, checked with the judges' parser one item at a time so a refusal names
    the item (Invalid with details {index, dimension_id}); nothing is returned unless every item is valid."""
    if not isinstance(items, Sequence) or isinstance(items, str | bytes) or not items:
        raise Invalid("at least one assessment is required", code="no_assessments")
    if len(items) > MAX_ITEMS:
        raise Invalid(f"at most {MAX_ITEMS} assessments at once", code="too_many")
    seen: set[str] = set()
    parsed = []
    for index, item in enumerate(items):
        dimension_id = item.get("dimension_id") if isinstance(item, Mapping) else None
        details = {"index": index, "dimension_id": dimension_id}
        if dimension_id in seen:
            raise Invalid(
                f"assessment {index}: rubric assessment dimension is unknown or repeated",
                code="invalid_assessment",
                details=details,
            )
        try:
            (one,) = parse_rubric_assessments(run, rubric, {"assessments": [dict(item)]})
        except (MalformedModelOutput, TypeError, ValueError) as error:
            raise Invalid(f"assessment {index}: {error}", code="invalid_assessment", details=details) from None
        seen.add(one.dimension_id)
        parsed.append(one)
    return tuple(parsed)


def rubric_assessment_submit(
    *, actor: Actor, run_id: int, version_id: int, items: Sequence[Mapping[str, Any]]
) -> RubricScoreRow:
    """A reviewer's or operator's own assessments of a production run, from the page or with a token: one per
    person per dimension (a new one replaces theirs), evidence steps checked against the run, nothing written unless
    every item is valid. Whether it was made blind is recorded with it (_replace_assessments)."""
    user = require_role(actor, Role.REVIEWER, Role.OPERATOR, doing="assessing a run", code="not_a_reviewer")
    version = _version(version_id)
    run = load_run(run_id, production=True)
    if version.status == RubricVersionStatus.RETIRED:
        raise Conflict(f"rubric v{version.number} is retired; assess under the active version", code="retired")
    assessments = validate_items(run, rubric_core(version), items)
    return _replace_assessments(
        actor=actor,
        run=run,
        version=version,
        rater=f"user:{user.pk}",
        assessments=assessments,
        kind=RaterKind.PERSON,
        user=user,
    )


# --- reaping ---------------------------------------------------------------------------------------------------------
def rubric_jobs_to_resume() -> list[int]:
    """Open jobs nobody holds (a lost message, or a worker that died and let its lease run out)."""
    now = timezone.now()
    return list(
        RubricJob.objects.filter(status__in=RUBRIC_JOB_OPEN)
        .filter(Q(lease_expires_at__lte=now) | Q(lease_expires_at__isnull=True, created_at__lte=now - LEASE))
        .order_by("id")
        .values_list("pk", flat=True)[:100]
    )


def judges_setting() -> int:
    return int(getattr(settings, "WAYMARK_RUBRIC_JUDGES", DEFAULT_JUDGES))


def rubric_judge_for_gate(run_id: int, version: RubricVersion, judges: int) -> RubricJob | None:
    """For a replay gate (system actor): the succeeded judging job of (run, version), judging the run now, in this
    process, when there is none; None while another judging of the run is open."""
    jobs = RubricJob.objects.filter(kind=RubricJobKind.JUDGE, run_id=run_id)
    if jobs.filter(status__in=RUBRIC_JOB_OPEN).exists():
        return None
    done = jobs.filter(version=version, status=RubricJobStatus.SUCCEEDED).order_by("-id").first()
    if done is not None:
        return done
    with transaction.atomic(durable=True):
        job = RubricJob.objects.create(
            kind=RubricJobKind.JUDGE, rubric=version.rubric, version=version, run_id=run_id, judges=judges
        )
        audit_record(
            actor=Actor.system(),
            verb="rubric.judge",
            target=job,
            after={"run": run_id, "version": version.pk, "judges": judges, "for": "replay gate rubric floor"},
        )
    return rubric_judge_run(job_id=job.pk) or RubricJob.objects.get(pk=job.pk)
