"""Reads of reviews that care about access, independence of judgments and query counts.

Access (DESIGN.md §7.6): anonymous and inactive users get 404 for everything here; any active user may read; writes
need roles (403 otherwise, checked by the services). Independence: judgments of others on a pending request are
shown only to a reviewer who has submitted their own; the proposer and everyone else see counts; once the request
is closed, everyone sees every judgment.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import BooleanField, Count, Exists, OuterRef, Prefetch, Q, QuerySet, Value
from django.http import Http404
from django.utils import timezone

from accounts.models import User

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
from .services import gate_satisfied


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
    return request


@dataclass(frozen=True)
class PromotionView:
    """One request as `user` may see it. `judgments` is None when only counts may be shown."""

    request: PromotionRequest
    approvals: int
    rejections: int
    judgments: list[Judgment] | None
    my_judgment: Judgment | None
    is_proposer: bool
    can_judge: bool
    can_override: bool
    can_withdraw: bool
    gate_satisfied: bool


def judgments_visible(user: User, request: PromotionRequest, my_judgment: Judgment | None) -> bool:
    return not request.is_pending or my_judgment is not None


def promotion_view(user, request: PromotionRequest) -> PromotionView:
    require_member(user)
    judgments = list(Judgment.objects.filter(request=request).select_related("reviewer"))
    mine = next((j for j in judgments if j.reviewer_id == user.pk), None)
    is_proposer = request.proposer_id == user.pk
    pending = request.is_pending
    return PromotionView(
        request=request,
        approvals=sum(1 for j in judgments if j.verdict == Verdict.APPROVE),
        rejections=sum(1 for j in judgments if j.verdict == Verdict.REJECT),
        judgments=judgments if judgments_visible(user, request, mine) else None,
        my_judgment=mine,
        is_proposer=is_proposer,
        can_judge=pending and user.is_reviewer and not is_proposer and mine is None,
        can_override=pending and user.is_admin and request.gate_passing is not True and not request.is_overridden,
        can_withdraw=pending and (is_proposer or user.is_admin),
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
    if user.is_reviewer:
        queryset = queryset.annotate(
            pending_for_me=~Q(proposer=user.pk) & Q(judged_by_me=False),
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
    return rows


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
    return rows


def pending_requests_for(*, kind: str, parent_key: str) -> dict[str, PromotionRequest]:
    """The pending (open or approved) requests of one artifact keyed by candidate id, in one query; for the owning
    apps' pages, which link a candidate to its open request instead of offering to propose it again."""
    rows = PromotionRequest.objects.filter(kind=kind, parent_key=parent_key, status__in=PENDING_STATUSES)
    return {row.candidate_id: row for row in rows.order_by("id")}


def pending_count() -> int:
    """How many promotion requests wait for judgment or an override (the dashboard's "open reviews")."""
    return PromotionRequest.objects.filter(status__in=PENDING_STATUSES).count()


def recent_closed(user, *, kind: str = "", limit: int = 20) -> list[PromotionRequest]:
    require_member(user)
    queryset = PromotionRequest.objects.exclude(status__in=PENDING_STATUSES).select_related("proposer")
    if kind:
        queryset = queryset.filter(kind=kind)
    return list(queryset.order_by("-closed_at", "-id")[:limit])


def is_superseded(request: PromotionRequest) -> bool:
    return request.status == PromotionStatus.SUPERSEDED


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
