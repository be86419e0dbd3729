"""Every write of the watch after activation (uplift.core.watch): start a watch with an activation, take a look
(read the runs since the last one, test, decide, act), change a canary's share or thresholds, stop a canary.

A watch is started inside the activation's transaction (reviews.services._apply), one running watch per parent. A
look is leased work: a worker claims the watch with a conditional update (lease LEASE), reads the new runs of each
arm through the kind (PromotableKind.arm_runs, outside any transaction), and then, in one durable transaction under
the watch's row lock — only while it still holds the lease and the watch still runs — writes the new sums, the
history point and the decision with what the decision does: ending the canary (promote), rolling back through
reviews as the system (a canary found worse), proposing a rollback for people to judge (after a full activation,
where before and after differ in time too), or nothing (expire: operators decide). Two workers never act twice: the
second finds the lease taken or the watch decided. A worker killed mid-look leaves its lease to run out; the next
beat tick's look takes over from the last committed sums (nothing counted twice: `after_id` moves with the sums).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from accounts.roles import Role, require_role
from accounts.services import Actor, audit_record
from common.leases import lease_claim, lease_clear
from reviews import registry

from .core.watch import METRICS, ArmStats, WatchPolicy, decide
from .models import Watch
from .selectors import policy_for

LEASE = timedelta(seconds=60)
HISTORY_KEPT = 500  # points; older ones are thinned (every other one) when the list is full
RUNS_PER_LOOK = 20_000


class WatchInvalid(ValueError):
    """A change to a watch that cannot be made; the message says why. Nothing was written."""


def watch_policy_for(kind: str, parent_key: str) -> WatchPolicy:
    """The watch's thresholds: the certification policy's margin and metric, the configured α and run counts."""
    certification = policy_for(kind, parent_key)
    margin = certification.margin if certification.mode == "non_inferiority" else 0.0
    return WatchPolicy(
        alpha=settings.WAYMARK_WATCH_ALPHA,
        margin=min(margin, 1.0),
        metric=certification.metric,
        min_runs=settings.WAYMARK_WATCH_MIN_RUNS,
        max_canary_runs=settings.WAYMARK_WATCH_MAX_CANARY_RUNS,
    )


def watch_start(
    *,
    actor: Actor,
    kind: str,
    parent_key: str,
    candidate_id: str,
    control_id: str,
    mode: str,
    share: float,
    request_id: int | None,
) -> Watch:
    """INSIDE the activation's transaction: watch the candidate against the version it replaced. A canary watches
    runs from now on; a full activation compares the runs after it with those of the window before it. A parent's
    earlier running watch is stopped (superseded)."""
    promotable = registry.get_kind(kind)
    now = timezone.now()
    for earlier in Watch.objects.select_for_update().filter(kind=kind, parent_key=parent_key, status="running"):
        earlier.status, earlier.reason, earlier.decided_at = Watch.Status.STOPPED, "superseded by a new activation", now
        lease_clear(earlier)
        earlier.save()
        audit_record(actor=actor, verb="watch.stop", target=earlier, after={"why": earlier.reason})
    labels = promotable.labels([candidate_id, control_id])
    description = promotable.describe(candidate_id)
    window = timedelta(hours=settings.WAYMARK_WATCH_WINDOW_HOURS)
    watch = Watch.objects.create(
        kind=kind,
        parent_key=parent_key,
        parent_label=description.parent_label[:200],
        candidate_id=candidate_id,
        candidate_label=labels.get(candidate_id, candidate_id)[:100],
        control_id=control_id,
        control_label=labels.get(control_id, control_id)[:100],
        candidate_ref=promotable.ref_of(candidate_id)[:100],
        control_ref=promotable.ref_of(control_id)[:100],
        mode=mode,
        share=share,
        policy=watch_policy_for(kind, parent_key).to_document(),
        request_id=request_id,
        since=now if mode == Watch.Mode.CANARY else now - window,
        window_ends_at=now + window,
    )
    audit_record(
        actor=actor,
        verb="watch.start",
        target=watch,
        after={"mode": mode, "share": share, "candidate": watch.candidate_label, "control": watch.control_label},
    )
    transaction.on_commit(lambda: _look_soon(watch.pk))
    return watch


def _look_soon(watch_id: int) -> None:
    from .tasks import watch_look

    watch_look.delay(watch_id)


def running_watches() -> list[int]:
    return list(Watch.objects.filter(status=Watch.Status.RUNNING).values_list("pk", flat=True))


def _claim(watch_id: int, worker: str, now: datetime) -> bool:
    running = Watch.objects.filter(pk=watch_id, status=Watch.Status.RUNNING)
    return bool(lease_claim(running, owner=worker, seconds=LEASE, now=now, reclaim=True, attempts=F("attempts") + 1))


def _stats(sums: dict[str, Any]) -> dict[str, tuple[ArmStats, ArmStats]]:
    stats = {}
    for metric in METRICS:
        arms = sums.get(metric) or {}
        stats[metric] = tuple(ArmStats(*(arms.get(arm) or (0, 0.0, 0.0))) for arm in ("canary", "control"))
    return stats


def _sums(stats: dict[str, tuple[ArmStats, ArmStats]]) -> dict[str, Any]:
    return {
        metric: {arm: [s.n, s.total, s.squares] for arm, s in zip(("canary", "control"), pair, strict=True)}
        for metric, pair in stats.items()
    }


def _history(history: list, point: dict) -> list:
    history = [*history, point]
    if len(history) > HISTORY_KEPT:
        history = [*history[:-1:2], history[-1]]
    return history


def watch_look(*, watch_id: int, worker: str, now: datetime | None = None) -> Watch | None:
    """One look at a running watch (see the module docstring). Returns the watch, or None when another worker holds
    it or it no longer runs."""
    now = now or timezone.now()
    if not _claim(watch_id, worker, now):
        return None
    watch = Watch.objects.get(pk=watch_id)
    promotable = registry.get_kind(watch.kind)
    stats = _stats(watch.sums)
    after_id, counted = watch.after_id, 0
    while counted < RUNS_PER_LOOK:
        runs = promotable.arm_runs(
            watch.parent_key, candidate_ref=watch.candidate_ref, control_ref=watch.control_ref, since=watch.since,
            after_id=after_id, limit=5000,
        )  # fmt: skip
        for run in runs:
            canary = run.arm == "canary"
            stats["success"][0 if canary else 1].add(run.success)
            stats["score"][0 if canary else 1].add(run.score)
            after_id = max(after_id, run.run_id)
        counted += len(runs)
        if len(runs) < 5000:
            break
    policy = WatchPolicy.from_document(watch.policy)
    decision = decide(stats, policy, window_over=now >= watch.window_ends_at)
    with transaction.atomic(durable=True):
        locked = Watch.objects.select_for_update().get(pk=watch_id)
        if locked.status != Watch.Status.RUNNING or locked.lease_owner != worker or locked.after_id != watch.after_id:
            return locked  # decided, stopped or taken over meanwhile: this look counts nothing
        locked.sums, locked.after_id = _sums(stats), after_id
        locked.bounds = [bound.to_document() for bound in decision.bounds]
        if counted or not locked.history:
            point = {"at": now.isoformat(), **{b.metric: b.to_document() for b in decision.bounds}}
            locked.history = _history(locked.history, point)
        lease_clear(locked)
        if decision.action != "continue":
            _act(locked, decision.action, decision.reason, now)
        locked.save()
    return locked


def _act(watch: Watch, action: str, reason: str, now: datetime) -> None:
    """Inside the look's transaction, the watch locked: carry out the decision and record it."""
    from reviews import services as review_services

    actor = Actor.system()
    watch.reason, watch.decided_at = reason, now
    if action == "promote":
        watch.status = Watch.Status.PROMOTED
        if watch.mode == Watch.Mode.CANARY:
            registry.get_kind(watch.kind).end_canary(actor=actor, parent_key=watch.parent_key)
    elif action == "rollback" and watch.mode == Watch.Mode.CANARY:
        request = review_services.rollback_by_watch(
            kind=watch.kind, parent_key=watch.parent_key, reason=reason, watch_id=watch.pk
        )
        watch.status, watch.rollback_request_id = Watch.Status.ROLLED_BACK, request.pk
    elif action == "rollback":
        request = review_services.rollback_request_by_watch(
            kind=watch.kind, parent_key=watch.parent_key, reason=reason, watch_id=watch.pk
        )
        watch.status = Watch.Status.ROLLBACK_REQUESTED
        watch.rollback_request_id = request.pk if request is not None else None
    else:
        watch.status = Watch.Status.EXPIRED
    audit_record(actor=actor, verb=f"watch.{action}", target=watch, after={"status": watch.status, "reason": reason})


def watch_set(*, actor: Actor, watch: Watch, share: float | None = None, **thresholds: Any) -> Watch:
    """An operator changes a running canary's share and the watch's thresholds (alpha, margin, min_runs,
    max_canary_runs, window_hours). Audited; WatchInvalid when it cannot."""
    require_role(actor, Role.OPERATOR, doing="changing a watch", code="refused", system=True)
    promotable = registry.get_kind(watch.kind)
    window_hours = thresholds.pop("window_hours", None)
    unknown = sorted(set(thresholds) - {"alpha", "margin", "min_runs", "max_canary_runs"})
    if unknown:
        raise WatchInvalid(f"unknown thresholds: {', '.join(unknown)}")
    if window_hours is not None and not 1 <= window_hours <= 24 * 90:
        raise WatchInvalid("the window is 1 hour to 90 days")
    if share is not None:
        if watch.mode != Watch.Mode.CANARY:
            raise WatchInvalid("only a canary has a share")
        try:
            promotable.set_canary_share(actor=actor, parent_key=watch.parent_key, share=share)
        except ValueError as exc:
            raise WatchInvalid(str(exc)) from None
    with transaction.atomic(durable=True):
        locked = Watch.objects.select_for_update().get(pk=watch.pk)
        if locked.status != Watch.Status.RUNNING:
            raise WatchInvalid(f"the watch is {locked.get_status_display()}: nothing to change")
        try:
            policy = WatchPolicy.from_document({**locked.policy, **thresholds})
        except (TypeError, ValueError) as exc:
            raise WatchInvalid(str(exc)) from None
        before = {"share": locked.share, **locked.policy, "window_ends_at": locked.window_ends_at.isoformat()}
        locked.policy = policy.to_document()
        if share is not None:
            locked.share = share
        if window_hours is not None:
            locked.window_ends_at = locked.created_at + timedelta(hours=window_hours)
        locked.save()
        audit_record(
            actor=actor,
            verb="watch.set",
            target=locked,
            before=before,
            after={"share": locked.share, **locked.policy, "window_ends_at": locked.window_ends_at.isoformat()},
        )
    return locked


def watch_stop(*, actor: Actor, watch: Watch, reason: str) -> Watch:
    """An operator's emergency stop of a canary: the version it replaced goes back for every run now (a rollback
    applied through reviews), the watch ends `stopped`. After a full activation there is no canary to stop: the
    watch just ends. WatchInvalid when it no longer runs."""
    from reviews import services as review_services

    require_role(actor, Role.OPERATOR, doing="stopping a watch", code="refused", system=True)
    reason = (reason or "").strip()
    if not reason:
        raise WatchInvalid("stopping a canary needs a written reason")
    with transaction.atomic(durable=True):
        locked = Watch.objects.select_for_update().get(pk=watch.pk)
        if locked.status != Watch.Status.RUNNING:
            raise WatchInvalid(f"the watch is {locked.get_status_display()} already")
        now = timezone.now()
        locked.status, locked.reason, locked.decided_at = Watch.Status.STOPPED, f"stopped: {reason[:1000]}", now
        lease_clear(locked)
        if locked.mode == Watch.Mode.CANARY:
            try:
                request = review_services.rollback_by_watch(
                    kind=locked.kind, parent_key=locked.parent_key, reason=f"stopped by {actor.label}: {reason}",
                    watch_id=locked.pk,
                )  # fmt: skip
            except registry.StaleActivation as exc:
                raise WatchInvalid(f"the canary is no longer running: {exc}") from None
            locked.rollback_request_id = request.pk
        locked.save()
        audit_record(actor=actor, verb="watch.stop", target=locked, after={"reason": reason[:1000]})
    return locked
