"""Reads of reviews that care about access, independence of judgments and query counts.

Access (DESIGN.md §7.6): anonymous and inactive users get 404 for everything here; any active user may read; writes
need roles (403 otherwise, checked by the services). Independence: judgments of others on a pending request are
shown only to a reviewer who has submitted their own; once the request is closed, everyone sees every judgment.
Counts (approvals, rejections) are hidden like names and comments from a reviewer who may still judge the request
(not its proposer, not the admin who overrode its gate, not judged yet); the proposer and people who cannot judge see
counts only. Since one rejection closes a request, anything that tells an open request with judgments from one
without them tells a sealed judgment was an approval: so such a reviewer sees an approved request (enough approvals,
waiting for the gate) as open, with no outcome, and the audit lists leave its judgments out (reviews.audit_blinding).

Labels: rows read here carry `candidate_label` and `replaces_label` (the kinds' labels, `v3` or `#2 · 3fa9c1d`),
one query per kind present, never one per row.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import connections
from django.db.models import BooleanField, Count, Exists, OuterRef, Prefetch, Q, QuerySet, Value
from django.http import Http404
from django.utils import timezone

from .models import (
    PENDING_STATUSES,
    Judgment,
    PromotionRequest,
    PromotionStatus,
    QueueLease,
    Verdict,
    WebhookDelivery,
    WebhookEndpoint,
)
from .registry import UnknownKind, get_kind
from .services import gate_satisfied

if TYPE_CHECKING:  # annotations only: other apps read rows through selectors (issue 14)
    from accounts.models import User


def label_rows(rows: Iterable[PromotionRequest], *extra: tuple[str, str | None]) -> dict[tuple[str, str], str]:
    """Set `candidate_label` and `replaces_label` on each row (one `labels` call per kind present), and answer the
    labels of the `extra` (kind, id) pairs too, keyed by (kind, id). An id the kind no longer knows shows as
    `id <id>`; no id as "" (the templates say what that means)."""
    rows = list(rows)
    wanted: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        wanted[row.kind].update(i for i in (row.candidate_id, row.replaces_id) if i)
    for kind, candidate_id in extra:
        if candidate_id:
            wanted[kind].add(candidate_id)
    found: dict[tuple[str, str], str] = {}
    for kind, ids in wanted.items():
        try:
            labels = get_kind(kind).labels(sorted(ids))
        except UnknownKind:
            labels = {}
        for candidate_id in ids:
            found[(kind, candidate_id)] = labels.get(candidate_id) or f"id {candidate_id}"
    for row in rows:
        row.candidate_label = found.get((row.kind, row.candidate_id), "")
        row.replaces_label = found.get((row.kind, row.replaces_id), "") if row.replaces_id else ""
    return found


def require_member(user) -> User:
    """The active, logged-in user; 404 for anyone else (outsiders learn nothing, not even that a thing exists)."""
    if user is None or not user.is_authenticated or not user.is_active:
        raise Http404("not found")
    return user


def _counted(queryset: QuerySet[PromotionRequest]) -> QuerySet[PromotionRequest]:
    return queryset.annotate(
        approvals=Count("judgments", filter=Q(judgments__verdict=Verdict.APPROVE)),
        rejections=Count("judgments", filter=Q(judgments__verdict=Verdict.REJECT)),
    )


def promotion_for_user(user, pk: int) -> PromotionRequest:
    require_member(user)
    request = (
        _counted(PromotionRequest.objects.select_related("proposer", "override_by", "applied_by")).filter(pk=pk).first()
    )
    if request is None:
        raise Http404(f"no promotion request {pk}")
    label_rows([request])
    return request


@dataclass(frozen=True)
class Outcome:
    """What became of a request, in one sentence, and when (None while nothing has happened yet)."""

    status: str
    text: str
    at: datetime | None


@dataclass(frozen=True)
class PromotionView:
    """One request as `user` may see it. `judgments` is None when only counts may be shown; `approvals` and
    `rejections` are None when not even counts may be shown (counts_visible False)."""

    request: PromotionRequest
    approvals: int | None
    rejections: int | None
    judgments: list[Judgment] | None
    my_judgment: Judgment | None
    is_proposer: bool
    can_judge: bool
    can_override: bool
    can_withdraw: bool
    gate_satisfied: bool
    counts_visible: bool = True
    outcome: Outcome | None = None
    status: str = ""  # the status `user` may see (shown_status)


def judgments_visible(user: User, request: PromotionRequest, my_judgment: Judgment | None) -> bool:
    return not request.is_pending or my_judgment is not None


def counts_visible(user: User, request: PromotionRequest, *, judged: bool) -> bool:
    """Counts are hidden from a reviewer who may still judge this pending request (not its proposer, not judged
    yet): knowing "1/2 approvals" before judging is the bias independence is for."""
    return not may_still_judge(user, request, judged=judged)


def may_still_judge(user: User, request: PromotionRequest, *, judged: bool) -> bool:
    """Whether `user` may yet judge this request: it is pending, they are a reviewer, not its proposer, not the admin
    who overrode its gate (four eyes: reviews.access.four_eyes), and they have not judged it."""
    return (
        request.is_pending
        and getattr(user, "may_judge", False)
        and user.pk not in (request.proposer_id, request.override_by_id)
        and not judged
    )


def shown_status(request: PromotionRequest, *, counts_visible: bool) -> str:
    """The status as a viewer may see it: "approved" (enough approvals, waiting for the gate) says how the others
    judged, so whoever may not see counts sees it as "open"."""
    if request.status == PromotionStatus.APPROVED and not counts_visible:
        return PromotionStatus.OPEN
    return request.status


def _names(judgments: list[Judgment], verdict: str) -> str:
    names = [j.reviewer.username for j in judgments if j.verdict == verdict]
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else (names[0] if names else "")


def outcome_of(request: PromotionRequest, judgments: list[Judgment], *, names_visible: bool) -> Outcome | None:
    """The request's outcome as a sentence: approved (and applied, or waiting for the gate), rejected, superseded,
    withdrawn or overridden, with when. Reviewers' names only when `names_visible` (closed requests, or after the
    viewer's own judgment)."""
    status = request.status
    candidate = getattr(request, "candidate_label", "") or request.candidate_id
    replaces = getattr(request, "replaces_label", "") or "no active version"
    approvals = [j for j in judgments if j.verdict == Verdict.APPROVE]
    override = f"; the gate was overridden by {request.override_by.username}" if request.override_by_id else ""
    if status == PromotionStatus.APPLIED:
        if request.is_rollback and request.required_approvals == 0:
            who = request.applied_by.username if request.applied_by_id else "an admin"
            return Outcome(
                status,
                f"Rolled back by {who} in an emergency, without approvals: {candidate} became the active version "
                f"again, replacing {replaces}.",
                request.applied_at,
            )
        by = f" by {_names(judgments, Verdict.APPROVE)}" if names_visible and approvals else ""
        return Outcome(
            status,
            f"Approved{by} and applied: {candidate} became the active version, replacing {replaces}{override}.",
            request.applied_at,
        )
    if status == PromotionStatus.APPROVED:
        by = f" by {_names(judgments, Verdict.APPROVE)}" if names_visible and approvals else ""
        when = max((j.created_at for j in approvals), default=None)
        return Outcome(
            status,
            f"Approved{by}; not applied yet: it waits for a passing gate or an admin's override with a reason.",
            when,
        )
    if status == PromotionStatus.REJECTED:
        rejection = next((j for j in judgments if j.verdict == Verdict.REJECT), None)
        if names_visible and rejection is not None:
            return Outcome(
                status,
                f"Rejected by {rejection.reviewer.username}: {rejection.comment}",
                request.closed_at,
            )
        return Outcome(status, "Rejected.", request.closed_at)
    if status == PromotionStatus.SUPERSEDED:
        return Outcome(
            status,
            f"Superseded: {replaces}, the version it would have replaced, is no longer the active version.",
            request.closed_at,
        )
    if status == PromotionStatus.WITHDRAWN:
        return Outcome(status, "Withdrawn by its proposer or an admin; it was never applied.", request.closed_at)
    if request.override_by_id:
        return Outcome(
            "overridden",
            f"Gate overridden by {request.override_by.username}: {request.override_reason}",
            request.overridden_at,
        )
    return None


def promotion_view(user, request: PromotionRequest) -> PromotionView:
    require_member(user)
    judgments = list(Judgment.objects.filter(request=request).select_related("reviewer"))
    mine = next((j for j in judgments if j.reviewer_id == user.pk), None)
    is_proposer = request.proposer_id == user.pk
    pending = request.is_pending
    visible = judgments_visible(user, request, mine)
    show_counts = counts_visible(user, request, judged=mine is not None)
    status = shown_status(request, counts_visible=show_counts)
    return PromotionView(
        request=request,
        approvals=sum(1 for j in judgments if j.verdict == Verdict.APPROVE) if show_counts else None,
        rejections=sum(1 for j in judgments if j.verdict == Verdict.REJECT) if show_counts else None,
        counts_visible=show_counts,
        outcome=outcome_of(request, judgments, names_visible=visible) if status == request.status else None,
        status=status,
        judgments=judgments if visible else None,
        my_judgment=mine,
        is_proposer=is_proposer,
        can_judge=may_still_judge(user, request, judged=mine is not None),
        can_override=(
            pending
            and user.may_administer
            and request.gate_passing is not True
            and not request.is_overridden
            and mine is None  # four eyes: an approver does not override (reviews.access.four_eyes)
        ),
        can_withdraw=pending and user.may_withdraw(request),
        gate_satisfied=gate_satisfied(request),
    )


def queue_for(user, *, kind: str = "") -> list[PromotionRequest]:
    """Pending requests, the ones waiting for `user`'s judgment first (then oldest first). Each row carries
    approvals, rejections, judged_by_me, pending_for_me and its lease (with holder)."""
    require_member(user)
    queryset = _counted(
        PromotionRequest.objects.filter(status__in=PENDING_STATUSES).select_related("proposer", "override_by")
    ).annotate(judged_by_me=Exists(Judgment.objects.filter(request=OuterRef("pk"), reviewer=user.pk)))
    if kind:
        queryset = queryset.filter(kind=kind)
    if user.may_judge:
        queryset = queryset.annotate(
            pending_for_me=~Q(proposer=user.pk) & ~Q(override_by=user.pk) & Q(judged_by_me=False),
        )
    else:
        queryset = queryset.annotate(pending_for_me=Value(False, output_field=BooleanField()))
    rows = list(queryset.order_by("-pending_for_me", "created_at", "id"))
    now = timezone.now()
    leases = {
        lease.request_id: lease
        for lease in QueueLease.objects.filter(request__in=[r.pk for r in rows], expires_at__gt=now).select_related(
            "holder"
        )
    }
    for row in rows:
        row.active_lease = leases.get(row.pk)
        row.counts_visible = counts_visible(user, row, judged=row.judged_by_me)
        row.shown_status = shown_status(row, counts_visible=row.counts_visible)
        row.needs_override = row.gate_passing is not True and not row.is_overridden
    label_rows(rows)
    return rows


def held_by_others(user, *, kind: str = "") -> list[QueueLease]:
    """The live leases other reviewers hold on pending requests still waiting for `user`'s judgment (not proposed
    or overridden by them, not judged by them), soonest to run out first, with request and holder (one query): why
    "take the next item" found nothing free."""
    require_member(user)
    if not user.may_judge:
        return []
    leases = (
        QueueLease.objects.filter(expires_at__gt=timezone.now(), request__status__in=PENDING_STATUSES)
        .exclude(holder=user.pk)
        .exclude(request__proposer=user.pk)
        .exclude(request__override_by=user.pk)
        .exclude(request__judgments__reviewer=user.pk)
        .select_related("request", "holder")
    )
    if kind:
        leases = leases.filter(request__kind=kind)
    return list(leases.order_by("expires_at", "id"))


def history_for(user, *, kind: str, parent_key: str) -> list[PromotionRequest]:
    """Every request of one artifact (kind, parent), newest first, with judgments prefetched; each row carries
    `visible_judgments` (None when only counts may be shown to `user`)."""
    require_member(user)
    rows = list(
        _counted(PromotionRequest.objects.filter(kind=kind, parent_key=parent_key))
        .select_related("proposer", "override_by", "applied_by")
        .prefetch_related(Prefetch("judgments", queryset=Judgment.objects.select_related("reviewer")))
        .order_by("-created_at", "-id")
    )
    for row in rows:
        judgments = list(row.judgments.all())
        mine = next((j for j in judgments if j.reviewer_id == user.pk), None)
        row.visible_judgments = judgments if judgments_visible(user, row, mine) else None
        row.counts_visible = counts_visible(user, row, judged=mine is not None)
        row.shown_status = shown_status(row, counts_visible=row.counts_visible)
    label_rows(rows)
    for row in rows:
        shown = row.shown_status == row.status
        row.outcome = (
            outcome_of(row, list(row.judgments.all()), names_visible=row.visible_judgments is not None)
            if shown
            else None
        )
    return rows


def pending_requests_for(*, kind: str, parent_key: str) -> dict[str, PromotionRequest]:
    """The pending (open or approved) requests of one artifact keyed by candidate id, in one query; for the owning
    apps' pages, which link a candidate to its open request instead of offering to propose it again. Their `status`
    reads "open" for both: those pages know nothing of their viewer, and "approved" would tell a reviewer who may
    still judge how the others judged (the request page shows it to whoever may see it)."""
    rows = PromotionRequest.objects.filter(kind=kind, parent_key=parent_key, status__in=PENDING_STATUSES)
    pending = {}
    for row in rows.order_by("id"):
        row.status = shown_status(row, counts_visible=False)  # display only: nothing saves these rows
        pending[row.candidate_id] = row
    return pending


def pending_candidates() -> dict[tuple[str, str], int]:
    """(kind, candidate id) → the id of its pending request, for every pending request (one query): the Propose
    form shows these candidates as already proposed."""
    rows = PromotionRequest.objects.filter(status__in=PENDING_STATUSES).values_list("kind", "candidate_id", "pk")
    return {(kind, candidate_id): pk for kind, candidate_id, pk in rows}


def pending_count() -> int:
    """How many promotion requests wait for judgment or an override (the dashboard's "open reviews")."""
    table = PromotionRequest._meta.db_table  # a plain statement: the ORM's compiling cost as much as the count
    with connections[PromotionRequest.objects.db].cursor() as cursor:
        placeholders = ", ".join(["%s"] * len(PENDING_STATUSES))
        cursor.execute(f"SELECT COUNT(*) FROM {table} WHERE status IN ({placeholders})", list(PENDING_STATUSES))
        return cursor.fetchone()[0]


def latest_request_for(*, kind: str, candidate_id: str) -> PromotionRequest | None:
    """The newest promotion request for one candidate of `kind`, whatever its status, or None (one query): the
    owning app's activation records which request moved its pointer and whether it was a rollback."""
    return PromotionRequest.objects.filter(kind=kind, candidate_id=candidate_id).order_by("-id").first()


def latest_requests_for(*, kind: str, candidate_ids: Iterable[str]) -> dict[str, PromotionRequest]:
    """The newest promotion request of each of several candidates of `kind` (any status), keyed by candidate id
    (one query; only the id, candidate id and status are read): the owning app's pages show review outcomes."""
    rows = PromotionRequest.objects.filter(kind=kind, candidate_id__in=list(candidate_ids))
    newest: dict[str, PromotionRequest] = {}
    for request in rows.only("pk", "candidate_id", "status").order_by("-id"):
        newest.setdefault(request.candidate_id, request)
    return newest


def has_judged(request: PromotionRequest, user) -> bool:
    """Whether `user` has submitted a judgment of `request` (one query)."""
    return Judgment.objects.filter(request=request, reviewer=user).exists()


def recent_closed(user, *, kind: str = "", limit: int = 20) -> list[PromotionRequest]:
    require_member(user)
    queryset = PromotionRequest.objects.exclude(status__in=PENDING_STATUSES).select_related("proposer")
    if kind:
        queryset = queryset.filter(kind=kind)
    rows = list(queryset.order_by("-closed_at", "-id")[:limit])
    label_rows(rows)
    return rows


def webhook_endpoints(user) -> list[WebhookEndpoint]:
    require_member(user)
    return list(
        WebhookEndpoint.objects.select_related("created_by").annotate(
            delivery_count=Count("deliveries"),
            failed_count=Count("deliveries", filter=Q(deliveries__status="failed")),
        )
    )


def webhook_endpoint(user, pk: int) -> WebhookEndpoint:
    require_member(user)
    endpoint = WebhookEndpoint.objects.filter(pk=pk).first()
    if endpoint is None:
        raise Http404(f"no webhook endpoint {pk}")
    return endpoint


def webhook_deliveries(user, *, endpoint_id: int | None = None, limit: int = 100) -> list[WebhookDelivery]:
    require_member(user)
    queryset = WebhookDelivery.objects.select_related("endpoint").prefetch_related("attempt_log")
    if endpoint_id is not None:
        queryset = queryset.filter(endpoint_id=endpoint_id)
    return list(queryset.order_by("-created_at", "-id")[:limit])
