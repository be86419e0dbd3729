"""Reads of rubrics with a fixed number of queries: the list, one rubric, the run page's panel, scores for a page of
runs, and the agreement report. Anonymous and inactive users get 404 (require_member); any active user reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import connections
from django.db.models import Count, Prefetch
from django.http import Http404

from .agreement import DimensionAgreement, rubric_agreement
from .rubric_models import (
    RUBRIC_JOB_OPEN,
    RaterKind,
    Rubric,
    RubricAssessmentRow,
    RubricJob,
    RubricJobKind,
    RubricScoreRow,
    RubricVersion,
)
from .rubric_promotable import KIND
from .rubrics import intent_key
from .selectors import pending_requests_for, require_member


def can_act(user) -> bool:
    return bool(user.is_authenticated and user.is_active and user.may_assess)


def rubric_list(user) -> list[Rubric]:
    """Every rubric with its active version and version count (one query)."""
    require_member(user)
    return list(Rubric.objects.select_related("active_version").annotate(version_count=Count("versions")))


def open_jobs(user, *, rubric: Rubric | None = None, limit: int = 20) -> list[RubricJob]:
    require_member(user)
    jobs = RubricJob.objects.filter(status__in=RUBRIC_JOB_OPEN)
    if rubric is not None:
        jobs = jobs.filter(rubric=rubric)
    return list(jobs.select_related("rubric").order_by("-id")[:limit])


def recent_jobs(user, *, rubric: Rubric, limit: int = 10) -> list[RubricJob]:
    require_member(user)
    return list(
        RubricJob.objects.filter(rubric=rubric, kind=RubricJobKind.PROPOSE)
        .select_related("result_version", "requested_by")
        .order_by("-id")[:limit]
    )


def rubric_for_user(user, pk: int) -> Rubric:
    require_member(user)
    rubric = Rubric.objects.select_related("active_version").filter(pk=pk).first()
    if rubric is None:
        raise Http404(f"no rubric {pk}")
    return rubric


def rubric_versions(rubric: Rubric) -> list[RubricVersion]:
    """Versions newest first, with proposer and each one's pending promotion request (two queries)."""
    versions = list(rubric.versions.select_related("proposed_by").order_by("-number"))
    pending = pending_requests_for(kind=KIND, parent_key=str(rubric.pk))
    for version in versions:
        version.pending_request = pending.get(str(version.pk))
    return versions


def version_for_user(user, rubric: Rubric, version_id: int | None) -> RubricVersion | None:
    """`version_id` of this rubric, else its active version, else its newest."""
    require_member(user)
    versions = rubric.versions.all()
    if version_id is not None:
        version = versions.filter(pk=version_id).first()
        if version is None:
            raise Http404(f"no version {version_id} of this rubric")
        return version
    return rubric.active_version or versions.order_by("-number").first()


# --- the run page's panel --------------------------------------------------------------------------------------------
@dataclass
class DimensionLine:
    dimension_id: str
    description: str
    weight: float
    required: bool
    score: float | None
    confidence: float | None
    missing: bool
    failed: bool
    assessments: list[RubricAssessmentRow] = field(default_factory=list)
    mine: RubricAssessmentRow | None = None
    typed: dict[str, str] | None = None  # what the person typed, when the panel answers a refused assessment


@dataclass
class RunPanel:
    run_id: int
    key: str
    rubric: Rubric | None
    version: RubricVersion | None
    score: RubricScoreRow | None
    lines: list[DimensionLine]
    evidence_steps: frozenset[int]
    evidence_by_step: dict[int, list[str]]
    judging: RubricJob | None
    last_judging: RubricJob | None
    can_act: bool
    step_count: int
    error: str = ""
    form: dict[str, Any] = field(default_factory=dict)

    @property
    def polling(self) -> bool:
        return self.judging is not None


def run_panel(user, run, *, error: str = "", form: dict[str, Any] | None = None) -> RunPanel:
    """Everything the run page shows about rubrics, in at most five queries: the rubric of the run's intent with its
    active version (or its newest), the cached score, the assessments with their raters, the judging jobs."""
    require_member(user)
    key = intent_key(run.intent)
    rubric = Rubric.objects.select_related("active_version").filter(key=key).first() if key else None
    version = None
    if rubric is not None:
        version = rubric.active_version or rubric.versions.order_by("-number").first()
    score = None
    rows: list[RubricAssessmentRow] = []
    jobs: list[RubricJob] = []
    if version is not None:
        score = RubricScoreRow.objects.filter(run_id=run.pk, version=version).first()
        rows = list(
            RubricAssessmentRow.objects.filter(run_id=run.pk, version=version)
            .select_related("user")
            .order_by("dimension_id", "rater_kind", "rater")
        )
        jobs = list(RubricJob.objects.filter(run_id=run.pk, kind=RubricJobKind.JUDGE).order_by("-id")[:1])
    lines = []
    for dimension in version.dimensions if version else []:
        did = dimension["dimension_id"]
        mine = [row for row in rows if row.dimension_id == did]
        lines.append(
            DimensionLine(
                dimension_id=did,
                description=dimension.get("description", ""),
                weight=dimension.get("weight", 1.0),
                required=bool(dimension.get("required")),
                score=(score.dimension_scores.get(did) if score else None),
                confidence=(score.dimension_confidence.get(did) if score else None),
                missing=score is None or did in score.missing_dimensions,
                failed=bool(dimension.get("required")) and (score is None or did in score.required_failures),
                assessments=mine,
                mine=next((row for row in mine if row.rater_kind == RaterKind.PERSON and row.user_id == user.pk), None),
                typed=(form or {}).get(did),
            )
        )
    evidence_by_step: dict[int, list[str]] = {}
    for row in rows:
        for step in row.evidence_steps:
            evidence_by_step.setdefault(int(step), []).append(f"{row.dimension_id} ({row.rater_label})")
    latest = jobs[0] if jobs else None
    return RunPanel(
        run_id=run.pk,
        key=key,
        rubric=rubric,
        version=version,
        score=score,
        lines=lines,
        evidence_steps=frozenset(evidence_by_step),
        evidence_by_step=evidence_by_step,
        judging=latest if latest is not None and latest.is_open else None,
        last_judging=latest,
        can_act=can_act(user),
        step_count=run.step_count,
        error=error,
        form=form or {},
    )


@dataclass(frozen=True)
class ListedScore:
    """A run's newest rubric score as a list of runs shows it."""

    overall: float
    required_failures: list[str]
    version_number: int


def scores_for_runs(runs: list) -> dict[int, ListedScore]:
    """The newest cached score of each run (under whichever version scored it last), in one query; for lists. A
    plain statement on a cursor: through the ORM (a join, an IN list, an order) compiling it cost four times the
    query on every page of the explorer."""
    ids = [run.pk for run in runs]
    if not ids:
        return {}
    rows, versions = RubricScoreRow._meta.db_table, RubricVersion._meta.db_table
    failures = RubricScoreRow._meta.get_field("required_failures")
    connection = connections[RubricScoreRow.objects.db]
    found: dict[int, ListedScore] = {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT s.run_id, s.overall, s.required_failures, v.number FROM {rows} s"
            f" JOIN {versions} v ON v.id = s.version_id WHERE s.run_id IN ({', '.join(['%s'] * len(ids))})"
            " ORDER BY s.updated_at DESC, s.id DESC",
            ids,
        )
        for run_id, overall, required_failures, number in cursor.fetchall():
            if run_id not in found:
                decoded = failures.from_db_value(required_failures, None, connection)
                found[run_id] = ListedScore(overall=overall, required_failures=decoded, version_number=number)
    return found


def attach_rubric_scores(runs: list) -> list:
    """Set `rubric_score` on each run of a page (one query)."""
    scores = scores_for_runs(runs)
    for run in runs:
        run.rubric_score = scores.get(run.pk)
    return runs


def scores_of_run(user, run_id: int) -> list[RubricScoreRow]:
    require_member(user)
    return list(
        RubricScoreRow.objects.filter(run_id=run_id).select_related("version__rubric").order_by("-updated_at", "-id")
    )


def rubrics_with_versions(user) -> list[Rubric]:
    require_member(user)
    return list(
        Rubric.objects.select_related("active_version").prefetch_related(
            Prefetch("versions", queryset=RubricVersion.objects.order_by("-number"))
        )
    )


# --- agreement -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AgreementReport:
    version: RubricVersion | None
    dimensions: tuple[DimensionAgreement, ...]
    raters: dict[str, str]
    rating_count: int


def agreement_for(user, rubric: Rubric, version: RubricVersion | None) -> AgreementReport:
    """Krippendorff's alpha per dimension and per-pair agreement over people and model judges (two queries)."""
    require_member(user)
    if version is None:
        return AgreementReport(version=None, dimensions=(), raters={}, rating_count=0)
    rows = list(RubricAssessmentRow.objects.filter(version=version).select_related("user"))
    ratings = [(row.rater, str(row.run_id), row.dimension_id, row.score) for row in rows]
    labels = {row.rater: row.rater_label for row in rows}
    return AgreementReport(
        version=version, dimensions=rubric_agreement(ratings), raters=labels, rating_count=len(ratings)
    )
