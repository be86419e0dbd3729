"""Every write of uplift: issue a certificate (one decision on its split), record another decision on a split (an
evolution round scored on it), tag and untag critical tasks, set a certification policy. One transaction each, with
its audit event.

A certificate is issued under the split's row lock: the decision number, and so the level the certificate is taken
at (uplift.core.reuse), is the split's next one, and two gates deciding on one split at once get consecutive
numbers, never the same one. An exhausted split refuses (SplitExhausted) and writes nothing.

A certificate and a split decision are written inside the caller's transaction when there is one (the replay's
finish, the evolution round's save): the evidence, its decision and its certificate commit together or not at all,
so an evaluation finished twice after a crash is certified once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction

from accounts.services import Actor, audit_record

from .core.certificate import PairedTask, certify
from .core.policy import Policy, judge
from .core.reuse import SplitBudget
from .models import Certificate, CertificationPolicy, CriticalTask, HeldOutSplit, SplitDecision
from .selectors import critical_task_keys, policy_for

MAX_TASK_KEY = 200


class SplitExhausted(Exception):
    """The split has had its policy's number of decisions: a new certificate needs fresh held-out runs."""

    def __init__(self, split: HeldOutSplit, limit: int) -> None:
        super().__init__(
            f"the held-out split {split.key[:12]} has had {split.decisions} decisions, the limit of {limit}: "
            "certify on fresh held-out runs (runs received after "
            f"{split.drawn_at:%Y-%m-%d %H:%M} UTC)"
        )
        self.split = split
        self.limit = limit


class UpliftInvalid(ValueError):
    """A policy or a tag that cannot be stored; the message says why. Nothing was written."""


def split_key(task_ids: Iterable[str]) -> str:
    """The digest naming a set of held-out tasks (order and repeats do not matter)."""
    joined = "\n".join(sorted({str(task_id) for task_id in task_ids}))
    return hashlib.sha256(joined.encode()).hexdigest()


def _locked_split(*, kind: str, parent_key: str, task_ids: Sequence[str], drawn_at: datetime) -> HeldOutSplit:
    """The split of these tasks, created if new, locked for the caller's transaction."""
    key = split_key(task_ids)
    identity = {"kind": kind, "parent_key": parent_key, "key": key}
    try:
        with transaction.atomic():
            HeldOutSplit.objects.get_or_create(
                **identity, defaults={"task_count": len(set(task_ids)), "drawn_at": drawn_at}
            )
    except IntegrityError:  # created by a concurrent decision meanwhile: it exists now
        pass
    return HeldOutSplit.objects.select_for_update().get(**identity)


def _digest(document: dict[str, Any]) -> str:
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def certificate_issue(
    *,
    actor: Actor,
    kind: str,
    parent_key: str,
    candidate_id: str,
    replaces_id: str | None,
    tasks: Sequence[PairedTask],
    drawn_at: datetime,
    provenance: dict[str, Any] | None = None,
    against: str | None = None,
) -> Certificate:
    """Certify `candidate_id` on the paired `tasks` (its split is the set of their ids): the split's next decision,
    judged by the kind's policy for `parent_key`, with the critical tasks tagged there. SplitExhausted when the
    split has had its decisions (nothing written)."""
    task_ids = [task.task_id for task in tasks]
    if not task_ids:
        raise UpliftInvalid("a certificate needs at least one held-out task")
    policy = policy_for(kind, parent_key)
    critical = critical_task_keys(kind, parent_key)
    tasks = [replace(task, critical=task.critical or task.task_id in critical) for task in tasks]
    against = against or ("the version it replaces" if replaces_id else "no artifact at all")
    with transaction.atomic():
        split = _locked_split(kind=kind, parent_key=parent_key, task_ids=task_ids, drawn_at=drawn_at)
        budget = SplitBudget(alpha=policy.alpha, max_decisions=policy.max_decisions, decisions_taken=split.decisions)
        if budget.exhausted:
            raise SplitExhausted(split, policy.max_decisions)
        certificate = certify(tasks, alpha=budget.next_alpha)
        verdict = judge(policy, certificate, against=against)
        split.decisions = budget.next_decision
        split.save(update_fields=["decisions"])
        subject = f"{kind}:{candidate_id}"
        SplitDecision.objects.create(
            split=split,
            number=split.decisions,
            what=SplitDecision.What.CERTIFICATE,
            subject=subject[:200],
            alpha=certificate.alpha,
            passed=verdict.passed,
        )
        document = {
            "kind": kind,
            "candidate_id": candidate_id,
            "replaces_id": replaces_id or "",
            "split": split.key,
            "decision_number": split.decisions,
            "policy": policy.to_document(),
            "passed": verdict.passed,
            "totals": certificate.totals(),
            "tasks": certificate.task_rows(),
        }
        row = Certificate.objects.create(
            kind=kind,
            candidate_id=candidate_id,
            replaces_id=replaces_id or "",
            parent_key=parent_key,
            split=split,
            decision_number=split.decisions,
            alpha=certificate.alpha,
            policy=policy.to_document(),
            passed=verdict.passed,
            reasons=list(verdict.reasons),
            sentence=verdict.sentence,
            totals=certificate.totals(),
            tasks=certificate.task_rows(),
            agent_models=list(certificate.models),
            provenance=provenance or {},
            digest=_digest(document),
            created_by=actor.user if actor.user is not None and actor.user.pk else None,
        )
        audit_record(
            actor=actor,
            verb="certificate.issue",
            target=row,
            after={
                "candidate": subject,
                "split": split.key[:12],
                "decision": split.decisions,
                "passed": verdict.passed,
                "n": certificate.n,
                "repairs": certificate.repairs,
                "breakages": certificate.breakages,
            },
        )
    return row


def split_decision_record(
    *,
    actor: Actor,
    kind: str,
    parent_key: str,
    task_ids: Sequence[str],
    drawn_at: datetime,
    what: str,
    subject: str,
    alpha: float,
    passed: bool | None,
) -> SplitDecision:
    """Record a decision other than a certificate taken on a split (an evolution round scored on the validation
    tasks): it counts against the split's budget like a certificate does."""
    if what not in SplitDecision.What.values:
        raise UpliftInvalid(f"unknown decision kind {what!r}")
    with transaction.atomic():
        split = _locked_split(kind=kind, parent_key=parent_key, task_ids=task_ids, drawn_at=drawn_at)
        split.decisions += 1
        split.save(update_fields=["decisions"])
        decision = SplitDecision.objects.create(
            split=split, number=split.decisions, what=what, subject=subject[:200], alpha=alpha, passed=passed
        )
        audit_record(
            actor=actor,
            verb="split.decision",
            target=decision,
            after={"split": split.key[:12], "number": decision.number, "what": what, "subject": subject[:200]},
        )
    return decision


def critical_task_tag(*, actor: Actor, kind: str, parent_key: str, task_key: str, reason: str = "") -> CriticalTask:
    task_key = (task_key or "").strip()
    if not task_key or len(task_key) > MAX_TASK_KEY:
        raise UpliftInvalid(f"a task key is 1 to {MAX_TASK_KEY} characters")
    with transaction.atomic(durable=True):
        row, created = CriticalTask.objects.get_or_create(
            kind=kind,
            parent_key=parent_key,
            task_key=task_key,
            defaults={"reason": reason[:500], "tagged_by": actor.user},
        )
        if created:
            audit_record(actor=actor, verb="critical_task.tag", target=row, after={"reason": row.reason})
    return row


def critical_task_untag(*, actor: Actor, kind: str, parent_key: str, task_key: str) -> bool:
    with transaction.atomic(durable=True):
        row = CriticalTask.objects.filter(kind=kind, parent_key=parent_key, task_key=task_key).first()
        if row is None:
            return False
        audit_record(actor=actor, verb="critical_task.untag", target=row, before={"reason": row.reason})
        row.delete()
    return True


def policy_set(*, actor: Actor, kind: str, parent_key: str = "", **fields: Any) -> CertificationPolicy:
    """Set the policy of `kind` for `parent_key` ("" for every parent of the kind); unknown or bad values raise
    UpliftInvalid."""
    current = policy_for(kind, parent_key).to_document()
    unknown = sorted(set(fields) - set(current))
    if unknown:
        raise UpliftInvalid(f"unknown policy fields: {', '.join(unknown)}")
    try:
        policy = Policy.from_document({**current, **fields})
    except (TypeError, ValueError) as error:
        raise UpliftInvalid(str(error)) from None
    with transaction.atomic(durable=True):
        row, _ = CertificationPolicy.objects.select_for_update().get_or_create(kind=kind, parent_key=parent_key)
        before = {key: getattr(row, key) for key in current}
        for key, value in policy.to_document().items():
            setattr(row, key, value)
        row.updated_by = actor.user
        row.save()
        audit_record(actor=actor, verb="certification_policy.set", target=row, before=before, after=fields)
    return row
