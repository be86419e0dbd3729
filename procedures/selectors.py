"""Reads of procedures with a fixed number of queries, for the API and the pages."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.models import Prefetch, Q
from django.shortcuts import get_object_or_404

from reviews.choices import PromotionStatus
from reviews.selectors import latest_requests_for
from uplift import selectors as uplift_selectors

from .mining import intent_key
from .models import Procedure, ProcedureVersion, ReplayCase, ReplayRun, VersionStatus
from .promotable import KIND as PROMOTION_KIND

NEWEST_CANDIDATE_STATES = (VersionStatus.CANDIDATE, VersionStatus.REPLAYING, VersionStatus.READY, VersionStatus.FAILED)
SOURCE_RUNS_SHOWN = 50
RUN_LISTS = ("source_run_ids", "training_run_ids", "held_out_run_ids", "skipped_run_ids")
_ACTIVE_LISTS = tuple(f"active_version__{name}" for name in RUN_LISTS)


def active_procedures(*, intent: str | None = None) -> list[Procedure]:
    """Procedures with an active version (optionally one intent), the version and a canary's control joined: one
    query."""
    rows = Procedure.objects.select_related("active_version", "canary_control").filter(active_version__isnull=False)
    if intent is not None:
        rows = rows.filter(intent=intent_key(intent))
    return list(rows.order_by("intent"))


def active_etag(procedures: list[Procedure]) -> str:
    """A strong ETag over the active versions' content revisions (and which procedure holds each)."""
    return active_etag_of(
        [(p.pk, p.revision, p.active_version.content_revision, p.certification_stamp,
          "control" if p.active_version_id == p.canary_control_id else "") for p in procedures]
    )  # fmt: skip


def active_etag_of(stamps: list[tuple]) -> str:
    """active_etag from active_stamps (or any rows starting with id, revision, content revision and certification
    stamp: the certificate shown with an active version is part of what the list says)."""
    text = "\n".join(
        f"{pk}:{revision}:{content_revision}:{certified}{':control' if rest and rest[0] == 'control' else ''}"
        for pk, revision, content_revision, certified, *rest in stamps
    )
    return '"' + hashlib.sha256(text.encode()).hexdigest() + '"'


def active_stamps(*, intent: str | None = None) -> list[tuple]:
    """What active_procedures' answer shows changes only with, in its order: per procedure its id, revision, active
    version's content revision, certification stamp, the version's status, updated_at, and the canary's share and
    control's content revision (uplift.core.canary). One light query on every
    agent step (procedures.active_body), so its SQL is compiled by the ORM once per shape and then run on a plain
    cursor (values as the database driver returns them: compare them only with each other)."""
    with_intent = intent is not None
    sql = _STAMPS_SQL.get(with_intent)
    if sql is None:
        rows = Procedure.objects.filter(active_version__isnull=False)
        if with_intent:
            rows = rows.filter(intent="")
        fields = (
            "pk",
            "revision",
            "active_version__content_revision",
            "certification_stamp",
            "active_version__status",
            "updated_at",
            "canary_share",
            "canary_control__content_revision",
        )
        sql, _ = rows.order_by("intent").values_list(*fields).query.sql_with_params()
        _STAMPS_SQL[with_intent] = sql
    with connection.cursor() as cursor:
        cursor.execute(sql, [intent_key(intent)] if with_intent else [])
        return cursor.fetchall()


_STAMPS_SQL: dict[bool, str] = {}


def attach_certification(procedures: list[Procedure]) -> None:
    """Set `certificate` (the summary of the active version's newest certificate) and `not_certified_for` (its
    coverage flag's summary) on each procedure (two queries)."""
    ids = [str(p.active_version_id) for p in procedures if p.active_version_id]
    certificates = uplift_selectors.certificates_of(PROMOTION_KIND, ids) if ids else {}
    flags = uplift_selectors.coverage_flags_of(PROMOTION_KIND, ids) if ids else {}
    for procedure in procedures:
        key = str(procedure.active_version_id)
        procedure.certificate = uplift_selectors.certificate_summary(certificates.get(key))
        procedure.not_certified_for = uplift_selectors.coverage_summary(flags.get(key))


def procedure_by_id(procedure_id: int) -> Procedure:
    return get_object_or_404(Procedure.objects.select_related("active_version"), pk=procedure_id)


def versions_with_replays(procedure: Procedure) -> list[ProcedureVersion]:
    """Newest first, each with its replays: two queries."""
    replays = Prefetch("replays", queryset=ReplayRun.objects.order_by("-id"))
    return list(procedure.versions.order_by("-number").prefetch_related(replays))


# A reviews promotion request (reviews.selectors hands them over; procedures reads its id and status).
PromotionRequest = Any


def review_outcomes(version_ids: list[int]) -> dict[int, PromotionRequest]:
    """The newest promotion request of each version (any status), one query."""
    newest = latest_requests_for(kind=PROMOTION_KIND, candidate_ids=[str(pk) for pk in version_ids])
    return {int(candidate_id): request for candidate_id, request in newest.items()}


def shown_status(version: ProcedureVersion, request: PromotionRequest | None) -> str:
    """The status a page shows: a version whose newest promotion request was rejected reads "rejected" (its replay
    status, ready or failed, says nothing about that); otherwise the version's own status."""
    if (
        request is not None
        and request.status == PromotionStatus.REJECTED
        and version.status not in (VersionStatus.ACTIVE, VersionStatus.RETIRED, VersionStatus.REPLAYING)
    ):
        return "rejected"
    return version.status


@dataclass
class ProcedureRow:
    procedure: Procedure
    newest_candidate: ProcedureVersion | None = None
    last_replay: ReplayRun | None = None
    candidate_status: str = ""
    candidate_request: PromotionRequest | None = None


def procedure_rows() -> list[ProcedureRow]:
    """Each procedure with its active version, its newest candidate (a non-active version newer than the active
    one: an older one is history, not news), that version's last replay and review outcome: four queries whatever
    the number of procedures (the big run-id lists are left unread)."""
    procedures = list(Procedure.objects.select_related("active_version").defer(*_ACTIVE_LISTS).order_by("intent"))
    rows = {p.pk: ProcedureRow(procedure=p) for p in procedures}
    versions = (
        ProcedureVersion.objects.filter(procedure__in=procedures, status__in=NEWEST_CANDIDATE_STATES)
        .defer(*RUN_LISTS)
        .order_by("procedure_id", "-number")
    )
    for version in versions:
        row = rows[version.procedure_id]
        active = row.procedure.active_version
        if row.newest_candidate is None and (active is None or version.number > active.number):
            row.newest_candidate = version
    candidates = [row.newest_candidate for row in rows.values() if row.newest_candidate is not None]
    latest: dict[int, ReplayRun] = {}
    if candidates:
        for replay in (
            ReplayRun.objects.filter(version__in=candidates).defer("held_out_run_ids", "report").order_by("-id")
        ):
            latest.setdefault(replay.version_id, replay)
    outcomes = review_outcomes([version.pk for version in candidates]) if candidates else {}
    for row in rows.values():
        if row.newest_candidate is not None:
            row.last_replay = latest.get(row.newest_candidate.pk)
            row.candidate_request = outcomes.get(row.newest_candidate.pk)
            row.candidate_status = shown_status(row.newest_candidate, row.candidate_request)
    return list(rows.values())


@dataclass
class ReplayView:
    replay: ReplayRun
    regressions: list[ReplayCase] = field(default_factory=list)
    counterexamples: list[ReplayCase] = field(default_factory=list)
    unanswered: list[ReplayCase] = field(default_factory=list)


@dataclass
class VersionPage:
    version: ProcedureVersion
    procedure: Procedure
    replays: list[ReplayView]
    active_replay: ReplayRun | None
    source_run_ids: list[int]
    source_runs_more: int
    review: PromotionRequest | None = None  # the version's newest promotion request
    status: str = ""  # what the page shows (shown_status)


CASES_SHOWN = 100


def version_page(version_id: int) -> VersionPage:
    """The version, its procedure, its replays with their regressions, counterexamples and unanswered cases, and
    the newest finished replay of the active version: a fixed number of queries."""
    version = get_object_or_404(
        ProcedureVersion.objects.select_related("procedure__active_version", "parent"), pk=version_id
    )
    procedure = version.procedure
    replays = list(version.replays.select_related("compared_with").order_by("-id"))
    views = {replay.pk: ReplayView(replay=replay) for replay in replays}
    notable = Q(result__regression=True) | Q(result__counterexample=True) | Q(answered=False)
    cases = ReplayCase.objects.filter(replay__in=replays, arm="candidate").filter(notable).order_by("case_run_id")
    for case in cases[: CASES_SHOWN * 3]:
        view = views[case.replay_id]
        if not case.answered:
            view.unanswered.append(case)
        elif case.result.get("regression"):
            view.regressions.append(case)
        if case.answered and case.result.get("counterexample"):
            view.counterexamples.append(case)
    _attach_active_runs([case for view in views.values() for case in view.regressions], replays)
    active_replay = None
    active = procedure.active_version
    if active is not None and active.pk != version.pk:
        active_replay = active.replays.filter(status="done").order_by("-id").first()
    sources = list(version.source_run_ids)
    review = review_outcomes([version.pk]).get(version.pk)
    return VersionPage(
        version=version,
        procedure=procedure,
        replays=list(views.values()),
        active_replay=active_replay,
        source_run_ids=sources[:SOURCE_RUNS_SHOWN],
        source_runs_more=max(0, len(sources) - SOURCE_RUNS_SHOWN),
        review=review,
        status=shown_status(version, review),
    )


def _attach_active_runs(regressions: list[ReplayCase], replays: list[ReplayRun]) -> None:
    """Give each regression case `active_result_run_id`: the run the active arm produced (live replays)."""
    live = [replay for replay in replays if replay.mode == "live"]
    for case in regressions:
        case.active_result_run_id = None
    if not live or not regressions:
        return
    rows = ReplayCase.objects.filter(
        replay__in=live, arm="active", case_run_id__in=[case.case_run_id for case in regressions]
    ).values_list("replay_id", "case_run_id", "result_run_id")
    runs = {(replay_id, case_run_id): run_id for replay_id, case_run_id, run_id in rows}
    for case in regressions:
        case.active_result_run_id = runs.get((case.replay_id, case.case_run_id))


def version_by_id(version_id: int) -> ProcedureVersion:
    return get_object_or_404(ProcedureVersion.objects.defer(*RUN_LISTS), pk=version_id)
