"""Every write of the promotion policy: proposals, overrides, judgments, activation, rollback and queue leases.

The promotion policy (DESIGN.md §5) lives here; the owning app's activation runs through the promotable registry
inside this module's transactions. Each public function is one durable transaction writing its audit event inside;
an activation's webhook deliveries are outbox rows of the same transaction (reviews.webhooks, which also holds the
endpoints' administration and the HTTP delivery), sent by a Celery task enqueued on commit.
"""

from __future__ import annotations

from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from accounts.roles import Role, require_role
from accounts.services import Actor, audit_record
from uplift import selectors as uplift_selectors

from . import activations, webhooks
from .access import active_user, four_eyes
from .errors import Conflict, Invalid, NotAllowed, NotFound
from .models import (
    PENDING_STATUSES,
    Activation,
    Judgment,
    PromotionRequest,
    PromotionStatus,
    QueueLease,
    Verdict,
)
from .registry import PromotableKind, StaleActivation, UnknownCandidate, UnknownKind, get_kind

if TYPE_CHECKING:  # annotations only: other apps read rows through selectors (issue 14)
    pass

LEASE_DURATION = timedelta(minutes=5)
MAX_TEXT = 5000


def _after_expected_read(request: PromotionRequest) -> None:
    """Runs between reading the expected active version and the owning app's locked check (a seam for race tests)."""


# --- helpers ---------------------------------------------------------------------------------------------------------
def _text(value: str | None, *, what: str, code: str, required: bool = True) -> str:
    text = (value or "").strip()
    if required and not text:
        raise Invalid(f"{what} is required", code=code)
    if len(text) > MAX_TEXT:
        raise Invalid(f"{what} has at most {MAX_TEXT} characters", code="too_long")
    return text


def _promotable(key: str) -> PromotableKind:
    try:
        return get_kind(key)
    except UnknownKind as exc:
        raise Invalid(str(exc), code="unknown_kind") from None


def _lock(request: PromotionRequest) -> PromotionRequest:
    return PromotionRequest.objects.select_for_update(of=("self",)).get(pk=request.pk)


def _close(request: PromotionRequest, status: PromotionStatus) -> None:
    request.status = status
    request.closed_at = timezone.now()
    request.save(update_fields=["status", "closed_at"])
    QueueLease.objects.filter(request=request).delete()


def gate_satisfied(request: PromotionRequest) -> bool:
    return request.gate_passing is True or request.is_overridden


def _mark_superseded(*, actor: Actor, locked: PromotionRequest, active_id: str | None) -> None:
    """Inside a transaction, with the request locked and pending: close it as superseded, audited."""
    before = locked.status
    _close(locked, PromotionStatus.SUPERSEDED)
    audit_record(
        actor=actor,
        verb="promotion.supersede",
        target=locked,
        before={"status": before, "replaces": locked.replaces_id},
        after={"status": locked.status, "active": active_id},
    )


def _supersede(*, actor: Actor, request_id: int, active_id: str | None) -> None:
    with transaction.atomic(durable=True):
        locked = PromotionRequest.objects.select_for_update().get(pk=request_id)
        if locked.is_pending:
            _mark_superseded(actor=actor, locked=locked, active_id=active_id)


def _label(kind: str, candidate_id: str | None, *, none: str = "no active version") -> str:
    """The kind's label of a candidate (`v3`, `#2 · 3fa9c1d`) for messages and audit payloads."""
    try:
        return get_kind(kind).label_of(candidate_id, none=none)
    except UnknownKind:
        return candidate_id or none


def _stale_conflict(request: PromotionRequest, active_id: str | None) -> Conflict:
    return Conflict(
        f"request #{request.pk} is stale: it replaces {_label(request.kind, request.replaces_id, none='nothing')} "
        f"but the active version is {_label(request.kind, active_id, none='none')}; propose again against the new "
        "active version",
        code="stale",
        details={"request": request.pk, "replaces": request.replaces_id, "active": active_id},
    )


def _supersede_if_stale(*, actor: Actor, request: PromotionRequest) -> None:
    """Before judging or overriding: a request whose replaced version is no longer active is superseded (409)."""
    if not request.is_pending:
        return
    active = _promotable(request.kind).current_active(request.parent_key)
    if active != request.replaces_id:
        _supersede(actor=actor, request_id=request.pk, active_id=active)
        raise _stale_conflict(request, active)


def promotion_supersede_stale(*, actor: Actor, kind: str, parent_key: str) -> int:
    """Supersede the pending requests of a parent whose replaced version is no longer active. Rows locked by
    another transaction are skipped: that transaction finds the staleness itself. Returns how many."""
    active = _promotable(kind).current_active(parent_key)
    with transaction.atomic(durable=True):
        stale = list(
            PromotionRequest.objects.select_for_update(skip_locked=True)
            .filter(kind=kind, parent_key=parent_key, status__in=PENDING_STATUSES)
            .exclude(replaces_id=active)
        )
        for request in stale:
            _mark_superseded(actor=actor, locked=request, active_id=active)
    return len(stale)


# --- propose ---------------------------------------------------------------------------------------------------------
def gate_snapshot(promotable: PromotableKind, candidate_id: str) -> dict:
    """What a request records of its candidate's evidence when proposed: the kind's gate, the candidate's newest
    certificate (uplift; the kind's gate already counts whether it passed) and the safety scan of its learned text.
    A critical safety finding fails the gate like a failing check: approval then needs an admin's override."""
    snapshot = promotable.gate_evidence(candidate_id).as_json()
    snapshot["certificate"] = uplift_selectors.certificate_summary(
        uplift_selectors.latest_certificate(promotable.key, candidate_id)
    )
    scan = uplift_selectors.safety_report(promotable.learned_texts(candidate_id))
    snapshot["safety"] = scan
    if scan["critical"]:
        plural = "s" if scan["critical"] != 1 else ""
        snapshot["passing"] = False
        snapshot["summary"] = f"{scan['critical']} critical safety finding{plural} in the learned text; " + str(
            snapshot.get("summary") or ""
        )
    return snapshot


ROLLOUTS = ("full", "canary")


def promotion_propose(
    *,
    actor: Actor,
    kind: str,
    candidate_id: str,
    rationale: str,
    is_rollback: bool = False,
    rollout: str = "full",
    canary_share: float = 0.1,
) -> PromotionRequest:
    """A reviewer or operator proposes a candidate; the request records the version it replaces and the gate, and
    how it goes live once approved: for every run (`full`) or as a canary for `canary_share` of runs."""
    user = require_role(actor, Role.REVIEWER, Role.OPERATOR, doing="proposing a promotion", code="not_a_reviewer")
    rationale = _text(rationale, what="a rationale", code="rationale_required")
    promotable = _promotable(kind)
    if rollout not in ROLLOUTS:
        raise Invalid(f"rollout is one of {', '.join(ROLLOUTS)}", code="bad_rollout")
    if rollout == "canary":
        if not promotable.watchable or is_rollback:
            raise Invalid(f"a {promotable.label} goes live for every run at once", code="bad_rollout")
        if not 0 < canary_share < 1:
            raise Invalid("a canary's share is between 0 and 1 (exclusive)", code="bad_rollout")
    candidate_id = str(candidate_id).strip()
    try:
        description = promotable.describe(candidate_id)
        snapshot = gate_snapshot(promotable, candidate_id)
    except UnknownCandidate as exc:
        raise NotFound(str(exc) or f"no {kind} {candidate_id}", code="unknown_candidate") from None
    active = promotable.current_active(description.parent_key)
    if active == candidate_id:
        raise Conflict(f"{description.title} is already the active version", code="already_active")
    if rollout == "canary" and active is None:
        raise Invalid("a first version has no version to serve the other runs: activate it fully", code="bad_rollout")
    if is_rollback and activations.rollback_target(kind, description.parent_key, active) != candidate_id:
        raise Invalid(f"{description.title} is not the previously active version", code="not_rollback_target")
    try:
        with transaction.atomic(durable=True):
            request = PromotionRequest.objects.create(
                kind=kind,
                candidate_id=candidate_id,
                parent_key=description.parent_key,
                title=description.title[:200],
                parent_label=description.parent_label[:200],
                replaces_id=active,
                is_rollback=is_rollback,
                proposer=user,
                rationale=rationale,
                gate_snapshot=snapshot,
                required_approvals=promotable.approvals_required,
                rollout=rollout,
                canary_share=canary_share if rollout == "canary" else 0.0,
            )
            audit_record(
                actor=actor,
                verb="promotion.propose",
                target=request,
                after={
                    "kind": kind,
                    "candidate": candidate_id,
                    "candidate_label": description.label or candidate_id,
                    "replaces": active,
                    "replaces_label": _label(kind, active, none="") or None,
                    "is_rollback": is_rollback,
                    "rollout": rollout,
                    "gate_passing": snapshot["passing"],
                    "certified": (snapshot["certificate"] or {}).get("passed"),
                    "critical_findings": snapshot["safety"]["critical"],
                },
            )
    except IntegrityError:
        raise Conflict(f"{description.title} already has an open promotion request", code="already_open") from None
    return request


def promotion_withdraw(*, actor: Actor, request: PromotionRequest) -> PromotionRequest:
    user = active_user(actor)
    if user is None or not user.may_withdraw(request):
        raise NotAllowed("only the proposer or an admin may withdraw a request", code="not_the_proposer")
    with transaction.atomic(durable=True):
        locked = _lock(request)
        if not locked.is_pending:
            raise Conflict(f"request #{locked.pk} is {locked.status}", code="not_open")
        _close(locked, PromotionStatus.WITHDRAWN)
        audit_record(actor=actor, verb="promotion.withdraw", target=locked, after={"status": locked.status})
    return locked


# --- judge, override, apply ------------------------------------------------------------------------------------------
def judgment_submit(*, actor: Actor, request: PromotionRequest, verdict: str, comment: str = "") -> PromotionRequest:
    """One reviewer's independent verdict. A rejection (with a reason) rejects the request; the approval that meets
    the policy applies the promotion in the same transaction. Stale requests become superseded (Conflict)."""
    user = require_role(actor, Role.REVIEWER, doing="judging", code="not_a_reviewer")
    if verdict not in Verdict.values:
        raise Invalid(f"verdict must be one of {', '.join(Verdict.values)}", code="invalid_verdict")
    comment = _text(comment, what="a reason for the rejection", code="reason_required", required=verdict == "reject")
    if request.proposer_id == user.pk:
        raise NotAllowed("the proposer of a request cannot judge it", code="proposer_cannot_judge")
    _supersede_if_stale(actor=actor, request=request)
    try:
        with transaction.atomic(durable=True):
            locked = _lock(request)
            if not locked.is_pending:
                raise Conflict(f"request #{locked.pk} is {locked.status}", code="not_open")
            if locked.override_by_id == user.pk:
                raise four_eyes(f"you overrode the gate of request #{locked.pk}, so you cannot also judge it")
            try:
                with transaction.atomic():  # a savepoint: the database's one-judgment-per-reviewer constraint
                    Judgment.objects.create(request=locked, reviewer=user, verdict=verdict, comment=comment)
            except IntegrityError:
                raise Conflict("you have already judged this request", code="already_judged") from None
            audit_record(
                actor=actor,
                verb="judgment.submit",
                target=locked,
                after={"reviewer": user.username, "verdict": verdict, "comment": comment},
            )
            if verdict == Verdict.REJECT:
                before = locked.status
                _close(locked, PromotionStatus.REJECTED)
                audit_record(
                    actor=actor,
                    verb="promotion.reject",
                    target=locked,
                    before={"status": before},
                    after={"status": locked.status},
                )
            else:
                # The approver's queue lease is left to run out: a lease ending early on a request still open
                # would tell the others its holder approved it (a rejection closes the request).
                _advance(actor=actor, request=locked)
    except StaleActivation as stale:
        _supersede(actor=actor, request_id=request.pk, active_id=stale.actual_active_id)
        raise _stale_conflict(request, stale.actual_active_id) from None
    return locked


def promotion_override(*, actor: Actor, request: PromotionRequest, reason: str) -> PromotionRequest:
    """An admin accepts a failing or missing gate with a written reason (shown wherever the request is)."""
    require_role(actor, Role.ADMIN, doing="overriding a gate", code="admin_required")
    reason = _text(reason, what="a reason for the override", code="reason_required")
    _supersede_if_stale(actor=actor, request=request)
    try:
        with transaction.atomic(durable=True):
            locked = _lock(request)
            if not locked.is_pending:
                raise Conflict(f"request #{locked.pk} is {locked.status}", code="not_open")
            if locked.gate_passing is True:
                raise Invalid("the gate passes; there is nothing to override", code="gate_passing")
            if locked.is_overridden:
                raise Conflict("the gate of this request is already overridden", code="already_overridden")
            if locked.judgments.filter(reviewer=actor.user, verdict=Verdict.APPROVE).exists():
                raise four_eyes(f"you approved request #{locked.pk}, so you cannot also override its gate")
            locked.override_by = actor.user
            locked.override_reason = reason
            locked.overridden_at = timezone.now()
            locked.save(update_fields=["override_by", "override_reason", "overridden_at"])
            audit_record(
                actor=actor,
                verb="promotion.override",
                target=locked,
                before={"gate_passing": locked.gate_passing},
                after={"override_by": actor.user.username, "reason": reason},
            )
            _advance(actor=actor, request=locked)
    except StaleActivation as stale:
        _supersede(actor=actor, request_id=request.pk, active_id=stale.actual_active_id)
        raise _stale_conflict(request, stale.actual_active_id) from None
    return locked


def _advance(*, actor: Actor, request: PromotionRequest) -> None:
    """Inside the caller's transaction, with the request locked: apply when the policy is met."""
    approvals = request.judgments.filter(verdict=Verdict.APPROVE).count()
    if approvals < request.required_approvals:
        return
    if gate_satisfied(request):
        _apply(actor=actor, request=request)
    elif request.status == PromotionStatus.OPEN:
        request.status = PromotionStatus.APPROVED
        request.save(update_fields=["status"])
        audit_record(
            actor=actor,
            verb="promotion.approve",
            target=request,
            before={"status": PromotionStatus.OPEN},
            after={"status": request.status, "waiting_for": "a passing gate or an admin override"},
        )


def _record_activation(request: PromotionRequest) -> None:
    """The activation history row of an applied request, in the activation's transaction."""
    Activation.objects.create(
        kind=request.kind,
        parent_key=request.parent_key,
        version_id=request.candidate_id,
        replaced_id=request.replaces_id or "",
        request=request,
        activated_by=request.applied_by,
        activated_at=request.applied_at,
    )


def _apply(*, actor: Actor, request: PromotionRequest) -> None:
    """Inside the caller's transaction: the owning app moves its pointer (or raises StaleActivation), then the
    request is applied, audited and announced through the outbox."""
    expected = request.replaces_id
    _after_expected_read(request)
    promotable = _promotable(request.kind)
    canary = request.rollout == "canary" and expected is not None
    if canary:
        promotable.start_canary(
            actor=actor, candidate_id=request.candidate_id, expected_active_id=expected, share=request.canary_share
        )
    else:
        promotable.activate(actor=actor, candidate_id=request.candidate_id, expected_active_id=expected)
    now = timezone.now()
    request.status = PromotionStatus.APPLIED
    request.applied_at = request.closed_at = now
    request.applied_by = actor.user
    request.save(update_fields=["status", "applied_at", "closed_at", "applied_by"])
    _record_activation(request)
    QueueLease.objects.filter(request=request).delete()
    if promotable.watchable and expected is not None:
        from uplift.watch_services import watch_start

        watch_start(
            actor=actor, kind=request.kind, parent_key=request.parent_key, candidate_id=request.candidate_id,
            control_id=expected, mode="canary" if canary else "full",
            share=request.canary_share if canary else 0.0, request_id=request.pk,
        )  # fmt: skip
    audit_record(
        actor=actor,
        verb="promotion.apply",
        target=request,
        before={"active": expected, "label": _label(request.kind, expected, none="") or None},
        after={
            "active": request.candidate_id,
            "label": _label(request.kind, request.candidate_id),
            "is_rollback": request.is_rollback,
        },
    )
    _announce(actor=actor, request=request)


def _announce(*, actor: Actor, request: PromotionRequest) -> None:
    webhooks.webhook_outbox(request, actor)
    transaction.on_commit(
        partial(_supersede_after_commit, actor=actor, kind=request.kind, parent_key=request.parent_key)
    )


def _supersede_after_commit(*, actor: Actor, kind: str, parent_key: str) -> None:
    promotion_supersede_stale(actor=actor, kind=kind, parent_key=parent_key)


def _rollback_row(
    *,
    kind: str,
    parent_key: str,
    target: str,
    description,
    active: str | None,
    user,
    rationale: str,
    gate_snapshot: dict,
    applied_because: str | None = None,
    required_approvals: int = 0,
) -> PromotionRequest:
    """A rollback's request row: `target` (described) back in place of `active`. Applied at once, with the override
    that let it skip review (`applied_because`), or else open for `required_approvals` reviewers."""
    applied = {}
    if applied_because is not None:
        now = timezone.now()
        applied = {
            "override_by": user,
            "override_reason": applied_because,
            "overridden_at": now,
            "status": PromotionStatus.APPLIED,
            "applied_by": user,
            "applied_at": now,
            "closed_at": now,
        }
    return PromotionRequest.objects.create(
        kind=kind,
        candidate_id=target,
        parent_key=parent_key,
        title=description.title[:200],
        parent_label=description.parent_label[:200],
        replaces_id=active,
        is_rollback=True,
        proposer=user,
        rationale=rationale,
        gate_snapshot=gate_snapshot,
        required_approvals=required_approvals,
        **applied,
    )


def rollback_by_watch(*, kind: str, parent_key: str, reason: str, watch_id: int) -> PromotionRequest:
    """INSIDE the watch's transaction: the watch found the canary worse than the version it replaced and puts that
    version back for every run, as the system (the `waymark-watch` identity): the pointer moves back, the canary
    ends, and the activation history row, the audit event and the webhook are written as for any rollback. The
    request it records (applied, a rollback) is the card on the review queue saying why. StaleActivation when the
    parent changed meanwhile (the caller's transaction then writes nothing)."""
    from accounts.services import system_user

    user = system_user()
    actor = Actor(user=user)
    promotable = _promotable(kind)
    state = promotable.canary_state(parent_key)
    active = promotable.current_active(parent_key)
    if state is None or active != state.candidate_id:
        raise StaleActivation(
            parent_key=parent_key, expected_active_id=state.candidate_id if state else None, actual_active_id=active
        )
    description = promotable.describe(state.control_id)
    request = _rollback_row(
        kind=kind,
        parent_key=parent_key,
        target=state.control_id,
        description=description,
        active=active,
        user=user,
        rationale=reason,
        gate_snapshot={"passing": None, "summary": f"rolled back by the watch #{watch_id}: {reason}"},
        applied_because=f"the watch after activation (#{watch_id}) found a significant regression",
    )
    promotable.activate(actor=actor, candidate_id=state.control_id, expected_active_id=active)
    promotable.end_canary(actor=actor, parent_key=parent_key)
    _record_activation(request)
    audit_record(
        actor=actor,
        verb="promotion.rollback_automatic",
        target=request,
        before={"active": active, "label": _label(kind, active, none="") or None},
        after={"active": state.control_id, "label": description.label, "reason": reason, "watch": watch_id},
    )
    _announce(actor=actor, request=request)
    return request


def rollback_request_by_watch(*, kind: str, parent_key: str, reason: str, watch_id: int) -> PromotionRequest | None:
    """INSIDE the watch's transaction: after a full activation the before/after comparison is confounded by time,
    so the watch proposes the rollback (as `waymark-watch`) for reviewers to judge instead of acting. None when there
    is nothing to roll back to or a request for it is open already."""
    from accounts.services import system_user

    user = system_user()
    promotable = _promotable(kind)
    active = promotable.current_active(parent_key)
    target = activations.rollback_target(kind, parent_key, active)
    if target is None:
        return None
    if PromotionRequest.objects.filter(kind=kind, candidate_id=target, status__in=PENDING_STATUSES).exists():
        return None
    request = _rollback_row(
        kind=kind,
        parent_key=parent_key,
        target=target,
        description=promotable.describe(target),
        active=active,
        user=user,
        rationale=f"The watch after activation (#{watch_id}) found the runs after the activation worse than before:"
        f" {reason}. Runs before and after differ in time as well, so people decide.",
        gate_snapshot=gate_snapshot(promotable, target),
        required_approvals=promotable.approvals_required,
    )
    audit_record(
        actor=Actor(user=user),
        verb="promotion.propose",
        target=request,
        after={"kind": kind, "candidate": target, "replaces": active, "is_rollback": True, "watch": watch_id},
    )
    return request


def rollback_emergency(*, actor: Actor, kind: str, parent_key: str, reason: str) -> PromotionRequest:
    """An admin alone puts the previously active version back, with a written reason; audited and announced."""
    user = require_role(actor, Role.ADMIN, doing="an emergency rollback", code="admin_required")
    reason = _text(reason, what="a reason for the rollback", code="reason_required")
    promotable = _promotable(kind)
    target = activations.rollback_target(kind, parent_key, promotable.current_active(parent_key))
    if target is None:
        raise Conflict(f"{parent_key} has no previously active version to roll back to", code="no_rollback_target")
    try:
        description = promotable.describe(target)
        gate = promotable.gate_evidence(target)
    except UnknownCandidate as exc:
        raise NotFound(str(exc), code="unknown_candidate") from None
    active = promotable.current_active(parent_key)
    try:
        with transaction.atomic(durable=True):
            request = _rollback_row(
                kind=kind,
                parent_key=parent_key,
                target=target,
                description=description,
                active=active,
                user=user,
                rationale=reason,
                gate_snapshot=gate.as_json(),
                applied_because=reason,
            )
            _after_expected_read(request)
            promotable.activate(actor=actor, candidate_id=target, expected_active_id=active)
            _record_activation(request)
            audit_record(
                actor=actor,
                verb="promotion.rollback_emergency",
                target=request,
                before={"active": active, "label": _label(kind, active, none="") or None},
                after={"active": target, "label": description.label or target, "reason": reason},
            )
            _announce(actor=actor, request=request)
    except StaleActivation as stale:
        raise Conflict(
            f"{parent_key} changed meanwhile (active is now {_label(kind, stale.actual_active_id, none='none')}); "
            "reload and retry",
            code="stale",
            details={"active": stale.actual_active_id},
        ) from None
    return request


# --- queue leases ----------------------------------------------------------------------------------------------------
def queue_next(*, actor: Actor, kind: str = "") -> PromotionRequest | None:
    """Lease the next item for this reviewer: the one they already hold, else the oldest pending item they have not
    judged, did not propose, did not override and nobody else holds. Leases last LEASE_DURATION (an approval leaves
    its lease to run out, a closed request drops it). None when nothing is left.

    Leases are queue bookkeeping, not a change of any reviewed state: they write no audit event."""
    user = require_role(actor, Role.REVIEWER, doing="the review queue", code="not_a_reviewer")
    now = timezone.now()
    with transaction.atomic(durable=True):
        mine = (
            QueueLease.objects.select_for_update()
            .filter(holder=user, expires_at__gt=now, request__status__in=PENDING_STATUSES)
            .exclude(request__judgments__reviewer=user)  # judged: the lease only runs out (judgment_submit)
            .select_related("request")
        )
        if kind:
            mine = mine.filter(request__kind=kind)
        held = mine.order_by("request__created_at").first()
        if held is not None:
            held.expires_at = now + LEASE_DURATION
            held.save(update_fields=["expires_at"])
            return held.request
        free = (
            PromotionRequest.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(status__in=PENDING_STATUSES)
            .filter(Q(lease__isnull=True) | Q(lease__expires_at__lte=now))
            .exclude(proposer=user)
            .exclude(override_by=user)  # four eyes: who overrode the gate does not judge
            .exclude(judgments__reviewer=user)
            .order_by("created_at", "id")
        )
        if kind:
            free = free.filter(kind=kind)
        taken: list[int] = []
        for _ in range(20):
            request = free.exclude(pk__in=taken).first()  # locks this one row only (LIMIT 1, SKIP LOCKED)
            if request is None:
                return None
            # Re-read under the row lock: a lease committed after this statement's snapshot still counts.
            if QueueLease.objects.filter(request=request, expires_at__gt=now).exclude(holder=user).exists():
                taken.append(request.pk)
                continue
            QueueLease.objects.update_or_create(
                request=request, defaults={"holder": user, "expires_at": now + LEASE_DURATION}
            )
            return request
    return None
