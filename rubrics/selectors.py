"""Reads of rubrics with a fixed number of queries: the list, one rubric, the run page's panel, scores for a page of
runs, and the agreement report. Anonymous and inactive users get 404 (require_member); any active user reads.

Blinding: someone who may assess a production run (a reviewer or operator) sees nobody else's scores, reasons,
evidence or counts of that run under a rubric version until they have assessed it under that version themselves —
on the run page's panel, the runs list, the agreement page and the API alike. Sealed means absent: the panel shows
the dimensions and their form, the list an empty cell, the API no score. Whoever cannot assess (a read-only
teammate, an agent) sees the scores, the product's output; so does everyone on an evaluation run, which no person
assesses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import connections
from django.db.models import Count, Exists, OuterRef, Prefetch
from django.http import Http404

from reviews.selectors import pending_requests_for, require_member

from .core.agreement import DimensionAgreement, rubric_agreement
from .models import (
    RUBRIC_JOB_OPEN,
    RaterKind,
    Rubric,
    RubricAssessmentRow,
    RubricJob,
    RubricJobKind,
    RubricScoreRow,
    RubricVersion,
)
from .promotable import KIND
from .runs import intent_key, is_production, production_runs


def can_act(user) -> bool:
    return bool(user.is_authenticated and user.is_active and user.may_assess)


def _mine(row: RubricAssessmentRow, user) -> bool:
    return row.rater_kind == RaterKind.PERSON and row.user_id is not None and row.user_id == user.pk


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
    sealed: bool = False  # the others' scores are hidden until the viewer's own assessment under this version
    production: bool = True  # an evaluation run is judged by the replay gate's rubric floor only
    error: str = ""
    form: dict[str, Any] = field(default_factory=dict)

    @property
    def polling(self) -> bool:
        return self.judging is not None


def run_panel(
    user, run, *, production: bool | None = None, error: str = "", form: dict[str, Any] | None = None
) -> RunPanel:
    """Everything the run page shows about rubrics, in at most five queries (six when `production`, whether the run
    is a production run, is not given): the rubric of the run's intent with its active version (or its newest), the
    cached score, the assessments with their raters, the judging jobs. Blinded for a viewer who may assess the run
    and has not under this version (`sealed`): no score, no one else's assessment, evidence or count."""
    require_member(user)
    if production is None:
        production = is_production(run.pk)
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
    acting = can_act(user) and production
    sealed = acting and version is not None and not any(_mine(row, user) for row in rows)
    if sealed:
        score, rows = None, []
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
                mine=next((row for row in mine if _mine(row, user)), None),
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
        can_act=acting,
        step_count=run.step_count,
        sealed=sealed,
        production=production,
        error=error,
        form=form or {},
    )


@dataclass(frozen=True)
class ListedScore:
    """A run's newest rubric score as a list of runs shows it."""

    overall: float
    required_failures: list[str]
    version_number: int


def scores_for_runs(runs: list, *, blind_for=None, assessable: frozenset[int] = frozenset()) -> dict[int, ListedScore]:
    """The newest cached score of each run (under whichever version scored it last), in one query; for lists. With
    `blind_for` (a viewer), the runs of `assessable` show only scores under versions the viewer has assessed them
    under themselves (the newest of those). A plain statement on a cursor: through the ORM (a join, an IN list, an
    order) compiling it cost four times the query on every page of the explorer."""
    ids = [run.pk for run in runs]
    if not ids:
        return {}
    rows, versions = RubricScoreRow._meta.db_table, RubricVersion._meta.db_table
    assessments = RubricAssessmentRow._meta.db_table
    failures = RubricScoreRow._meta.get_field("required_failures")
    connection = connections[RubricScoreRow.objects.db]
    seen, params = "1", list(ids)
    if blind_for is not None:
        seen = (
            f"EXISTS (SELECT 1 FROM {assessments} a WHERE a.run_id = s.run_id AND a.version_id = s.version_id"
            " AND a.user_id = %s AND a.rater_kind = %s)"
        )
        params = [blind_for.pk, RaterKind.PERSON.value, *ids]
    found: dict[int, ListedScore] = {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT s.run_id, s.overall, s.required_failures, v.number, {seen} FROM {rows} s"
            f" JOIN {versions} v ON v.id = s.version_id WHERE s.run_id IN ({', '.join(['%s'] * len(ids))})"
            " ORDER BY s.updated_at DESC, s.id DESC",
            params,
        )
        for run_id, overall, required_failures, number, own in cursor.fetchall():
            if run_id in found or (blind_for is not None and not own and run_id in assessable):
                continue
            decoded = failures.from_db_value(required_failures, None, connection)
            found[run_id] = ListedScore(overall=overall, required_failures=decoded, version_number=number)
    return found


def attach_rubric_scores(runs: list, *, viewer, production: Callable[[Any], bool] = lambda run: True) -> list:
    """Set `rubric_score` on each run of a page as `viewer` may see it (one query): blinded on the production runs
    (`production(run)`, every run unless told) for a viewer who may assess them."""
    if can_act(viewer):
        assessable = frozenset(run.pk for run in runs if production(run))
        scores = scores_for_runs(runs, blind_for=viewer, assessable=assessable)
    else:
        scores = scores_for_runs(runs)
    for run in runs:
        run.rubric_score = scores.get(run.pk)
    return runs


def scores_of_run(user, run_id: int) -> list[RubricScoreRow]:
    """A run's cached scores, newest first, as `user` may see them: for someone who may assess a production run,
    only those under versions they have assessed it under (two queries, three for an assessor)."""
    require_member(user)
    scores = RubricScoreRow.objects.filter(run_id=run_id).select_related("version__rubric")
    scores = scores.order_by("-updated_at", "-id")
    if can_act(user) and is_production(run_id):
        own = RubricAssessmentRow.objects.filter(
            run_id=run_id, version=OuterRef("version"), user_id=user.pk, rater_kind=RaterKind.PERSON
        )
        scores = scores.filter(Exists(own))
    return list(scores)


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
    not_blind: int = 0  # people's ratings left out: made when their author could see others' scores (or unknown)
    own_runs_only: bool = False  # the viewer may assess: only the runs they assessed themselves are counted


def agreement_for(user, rubric: Rubric, version: RubricVersion | None) -> AgreementReport:
    """Krippendorff's alpha per dimension and per-pair agreement over people and model judges, on production runs,
    over blind ratings only (the others are counted in `not_blind`); for a viewer who may assess, over the runs they
    assessed under this version themselves (the others' scores of the rest stay sealed). Two queries."""
    require_member(user)
    if version is None:
        return AgreementReport(version=None, dimensions=(), raters={}, rating_count=0)
    rows = list(
        RubricAssessmentRow.objects.filter(version=version, run__in=production_runs().values("pk")).select_related(
            "user"
        )
    )
    own_runs_only = can_act(user)
    if own_runs_only:
        assessed = {row.run_id for row in rows if _mine(row, user)}
        rows = [row for row in rows if row.run_id in assessed]
    blind = [row for row in rows if row.blind is True]
    ratings = [(row.rater, str(row.run_id), row.dimension_id, row.score) for row in blind]
    labels = {row.rater: row.rater_label for row in blind}
    return AgreementReport(
        version=version,
        dimensions=rubric_agreement(ratings),
        raters=labels,
        rating_count=len(ratings),
        not_blind=len(rows) - len(blind),
        own_runs_only=own_runs_only,
    )
