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

import contextlib
import hashlib
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from accounts.roles import Role, require_role
from accounts.services import Actor, audit_record
from common.canonical import digest as canonical_digest
from reviews import registry

from .core.certificate import PairedTask, certify
from .core.coverage import coverage
from .core.policy import Policy, judge
from .core.reuse import SplitBudget
from .models import Certificate, CertificationPolicy, CoverageFlag, CriticalTask, HeldOutSplit, SplitDecision
from .selectors import certified_models, critical_task_keys, latest_certificates_with_model, policy_for

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


def _check_kind(kind: str) -> None:
    known = [promotable.key for promotable in registry.kinds()]
    if kind not in known:
        raise UpliftInvalid(f"no promotable kind {kind!r}; known: {', '.join(known)}")


def split_key(task_ids: Iterable[str]) -> str:
    """The digest naming a set of held-out tasks (order and repeats do not matter)."""
    return _split_identity(task_ids)[0]


def _split_identity(task_ids: Iterable[str]) -> tuple[str, int]:
    """split_key and the number of distinct tasks. Sorted before deduplicated: tasks usually come in id order, which
    a sort takes in a pass or a few (a set's order would make it a full sort), repeats dropped only when there are."""
    distinct = sorted(map(str, task_ids))
    if len(set(distinct)) != len(distinct):
        distinct = list(dict.fromkeys(distinct))
    return hashlib.sha256("\n".join(distinct).encode()).hexdigest(), len(distinct)


_SPLIT_DECIDED = (
    "INSERT INTO {table} (kind, parent_key, key, task_count, drawn_at, decisions, created_at)"
    " VALUES (%s, %s, %s, %s, %s, 1, %s)"
    " ON CONFLICT (kind, parent_key, key) DO UPDATE SET decisions = {table}.decisions + 1"
    " RETURNING id, decisions"
)
# A decision other than a certificate: the split's count one up (_SPLIT_DECIDED) and the decision's ledger row, in one
# statement.
_DECISION_RECORDED = (
    "WITH split AS (" + _SPLIT_DECIDED + ")"
    " INSERT INTO {ledger} (split_id, number, what, subject, alpha, passed, created_at)"
    " SELECT id, decisions, %s, %s, %s, %s, %s FROM split RETURNING id, split_id, number"
)


def _split_decided(*, kind: str, parent_key: str, task_ids: Sequence[str], drawn_at: datetime) -> HeldOutSplit:
    """The split of these tasks, created if new, its decisions counted one up and its row locked for the caller's
    transaction, in one statement (an upsert: a concurrent decision on the split waits for this one's commit, then
    counts from it). A caller that finds the budget exhausted raises, and the count rolls back with its block.
    The split returned holds the new count; drawn_at is the caller's (the stored one only matters for a refusal)."""
    key, count = _split_identity(task_ids)
    sql = _SPLIT_DECIDED.format(table=HeldOutSplit._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(sql, [kind, parent_key, key, count, drawn_at, timezone.now()])
        pk, decisions = cursor.fetchone()
    split = HeldOutSplit(
        id=pk, kind=kind, parent_key=parent_key, key=key, task_count=count, drawn_at=drawn_at, decisions=decisions
    )
    split._state.adding, split._state.db = False, connection.alias  # a stored row, as if read
    return split


def pack_tasks(canonical: bytes) -> tuple[bytes, str]:
    """The per-task columns' canonical JSON (uplift.core.certificate.canonical_columns) as a certificate stores it:
    compressed (zlib, level 1: about a fourteenth of the JSON, and far cheaper to write than the JSONB of 10,000
    tasks), and its sha256, which stands for the tasks in the certificate's digest."""
    return zlib.compress(canonical, 1), "sha256:" + hashlib.sha256(canonical).hexdigest()


def _digest(document: dict[str, Any]) -> str:
    """The certificate's digest: common.canonical's, over a document of strings, ints, bools, None and finite floats
    only (its policy and totals are stored as JSON too, which no NaN passes), so its bytes are those the digests of
    certificates stored before were taken over (tests/uplift/test_certificate_digest.py)."""
    return canonical_digest(document)


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
    against = against or ("the version it replaces" if replaces_id else "no artifact at all")
    with transaction.atomic():
        split = _split_decided(kind=kind, parent_key=parent_key, task_ids=task_ids, drawn_at=drawn_at)
        taken = split.decisions - 1  # before this one
        budget = SplitBudget(alpha=policy.alpha, max_decisions=policy.max_decisions, decisions_taken=taken)
        if budget.exhausted:  # the count rolls back with this block
            refused = HeldOutSplit.objects.get(pk=split.pk)
            refused.decisions = taken
            raise SplitExhausted(refused, policy.max_decisions)
        certificate = certify(tasks, alpha=budget.next_alpha, critical=critical)
        verdict = judge(policy, certificate, against=against)
        subject = f"{kind}:{candidate_id}"
        SplitDecision.objects.create(
            split=split,
            number=split.decisions,
            what=SplitDecision.What.CERTIFICATE,
            subject=subject[:200],
            alpha=certificate.alpha,
            passed=verdict.passed,
        )
        packed, tasks_digest = pack_tasks(certificate.canonical_columns()[1])
        document = {
            "kind": kind,
            "candidate_id": candidate_id,
            "replaces_id": replaces_id or "",
            "split": split.key,
            "decision_number": split.decisions,
            "policy": policy.to_document(),
            "passed": verdict.passed,
            "totals": certificate.totals(),
            "tasks": tasks_digest,
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
            tasks={},
            tasks_packed=packed,
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
        _kind_changed(kind, parent_key)
        if CoverageFlag.objects.filter(kind=kind, candidate_id=candidate_id).exists():
            transaction.on_commit(lambda: _coverage_check_later(kind))
    return row


def _kind_changed(kind: str, parent_key: str) -> None:
    with contextlib.suppress(registry.UnknownKind):
        registry.get_kind(kind).certification_changed(parent_key)


def _coverage_check_later(kind: str) -> None:
    from .tasks import coverage_check

    coverage_check.delay(kind)


@dataclass
class DecisionToRecord:
    """A decision other than a certificate taken on a split (an evolution round scored on the validation tasks), not
    recorded yet: it counts against the split's budget like a certificate does. On PostgreSQL `statement` records it
    (the split's count one up and the decision's ledger row: _DECISION_RECORDED), for a caller to send with its own
    statements in its transaction; `recorded` takes the row that statement returned (None elsewhere: it records the
    decision itself) and audits the decision."""

    actor: Actor
    kind: str
    parent_key: str
    task_ids: Sequence[str]
    drawn_at: datetime
    what: str
    subject: str
    alpha: float
    passed: bool | None
    statement: tuple[str, list[Any]] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.what not in SplitDecision.What.values:
            raise UpliftInvalid(f"unknown decision kind {self.what!r}")
        self.subject = self.subject[:200]
        self.key, self.count = _split_identity(self.task_ids)
        self.now = timezone.now()
        if connection.vendor == "postgresql":
            sql = _DECISION_RECORDED.format(table=HeldOutSplit._meta.db_table, ledger=SplitDecision._meta.db_table)
            split = [self.kind, self.parent_key, self.key, self.count, self.drawn_at, self.now]
            self.statement = (sql, [*split, self.what, self.subject, self.alpha, self.passed, self.now])

    def recorded(self, row: Sequence[Any] | None) -> SplitDecision:
        """The decision, recorded (by `statement`, whose row is given, or here) and audited, in the caller's
        transaction."""
        if row is None:  # no INSERT in a WITH (SQLite): the upsert, then the row
            split = _split_decided(
                kind=self.kind, parent_key=self.parent_key, task_ids=self.task_ids, drawn_at=self.drawn_at
            )
            decision = SplitDecision.objects.create(
                split=split,
                number=split.decisions,
                what=self.what,
                subject=self.subject,
                alpha=self.alpha,
                passed=self.passed,
            )
        else:
            pk, split_id, number = row
            split = HeldOutSplit(
                id=split_id,
                kind=self.kind,
                parent_key=self.parent_key,
                key=self.key,
                task_count=self.count,
                drawn_at=self.drawn_at,
            )
            split.decisions = number
            decision = SplitDecision(
                id=pk,
                split=split,
                number=number,
                what=self.what,
                subject=self.subject,
                alpha=self.alpha,
                passed=self.passed,
                created_at=self.now,
            )
            for stored in (split, decision):
                stored._state.adding, stored._state.db = False, connection.alias  # stored rows, as if read
        audit_record(
            actor=self.actor,
            verb="split.decision",
            target=decision,
            after={"split": split.key[:12], "number": decision.number, "what": self.what, "subject": self.subject},
        )
        return decision


def split_decision_record(*, actor: Actor, **decision: Any) -> SplitDecision:
    """Record a DecisionToRecord (its fields as keywords) at once, in one statement on PostgreSQL."""
    to_record = DecisionToRecord(actor=actor, **decision)
    # Inside a caller's transaction no savepoint: an error rolls the caller's back.
    with transaction.atomic(savepoint=False):
        row = None
        if to_record.statement is not None:
            with connection.cursor() as cursor:
                cursor.execute(*to_record.statement)
                row = cursor.fetchone()
        return to_record.recorded(row)


def coverage_check(*, actor: Actor | None = None, kind: str | None = None) -> dict[str, int]:
    """Flag every active artifact whose recent production runs come mostly from an agent model no passing
    certificate of it covers (uplift.core.coverage), and clear the flags that no longer hold. One transaction per
    change, audited (`coverage.flag` / `coverage.clear`). Returns {"checked", "flagged", "cleared"}."""
    actor = actor or Actor.system()
    counts = {"checked": 0, "flagged": 0, "cleared": 0}
    for promotable in registry.kinds():
        if kind is not None and promotable.key != kind:
            continue
        artifacts = promotable.active_artifacts()
        certified = certified_models(promotable.key, [artifact.candidate_id for artifact in artifacts])
        active_parents = set()
        for artifact in artifacts:
            counts["checked"] += 1
            active_parents.add(artifact.parent_key)
            recent = promotable.recent_run_models(artifact, limit=settings.WAYMARK_COVERAGE_RUNS)
            found = coverage(recent, certified.get(artifact.candidate_id, set()))
            if found.flagged:
                counts["flagged"] += _flag(actor, promotable.key, artifact, found)
            else:
                counts["cleared"] += _clear(actor, promotable.key, artifact.parent_key, why="covered")
        stale = CoverageFlag.objects.filter(kind=promotable.key).exclude(parent_key__in=active_parents)
        for parent_key in stale.values_list("parent_key", flat=True):
            counts["cleared"] += _clear(actor, promotable.key, parent_key, why="no active version")
    return counts


def _flag(actor: Actor, kind: str, artifact: registry.ActiveArtifact, found) -> int:
    """Write the flag (1 when it is new or names another model or version, else 0)."""
    failed = latest_certificates_with_model(kind, artifact.candidate_id, found.model)
    fields = {
        "candidate_id": artifact.candidate_id,
        "parent_label": artifact.parent_label[:200],
        "label": artifact.label[:100],
        "url": artifact.url[:500],
        "model": found.model[:200],
        "share": found.share,
        "runs": found.runs,
        "failed_certificate": failed if failed is not None and not failed.passed else None,
    }
    with transaction.atomic(durable=True):
        row = CoverageFlag.objects.select_for_update().filter(kind=kind, parent_key=artifact.parent_key).first()
        new = row is None or (row.model, row.candidate_id) != (fields["model"], fields["candidate_id"])
        if row is None:
            row = CoverageFlag.objects.create(kind=kind, parent_key=artifact.parent_key, **fields)
        else:
            for name, value in fields.items():
                setattr(row, name, value)
            row.save()
        if new:
            audit_record(
                actor=actor,
                verb="coverage.flag",
                target=row,
                after={"candidate": artifact.candidate_id, "model": row.model, "share": round(row.share, 3)},
            )
            _kind_changed(kind, artifact.parent_key)
    return int(new)


def _clear(actor: Actor, kind: str, parent_key: str, *, why: str) -> int:
    with transaction.atomic(durable=True):
        row = CoverageFlag.objects.select_for_update().filter(kind=kind, parent_key=parent_key).first()
        if row is None:
            return 0
        audit_record(
            actor=actor,
            verb="coverage.clear",
            target=row,
            before={"candidate": row.candidate_id, "model": row.model},
            after={"why": why},
        )
        row.delete()
        _kind_changed(kind, parent_key)
    return 1


def recertification_start(*, actor: Actor, kind: str, candidate_id: str, model: str | None = None) -> str:
    """An operator starts a candidate's paired evaluation again on fresh runs (of `model` only, when given): what a
    "not certified for <model>" flag or an exhausted split asks for. The owning kind queues the evaluation and
    audits it; the sentence it returns says what was started. UpliftInvalid says why it cannot."""
    require_role(actor, Role.OPERATOR, doing="re-certifying a candidate", code="not_an_operator", system=True)
    model = (model or "").strip() or None
    if model is not None and len(model) > 200:
        raise UpliftInvalid("a model name is at most 200 characters")
    try:
        promotable = registry.get_kind(kind)
    except registry.UnknownKind as exc:
        raise UpliftInvalid(str(exc)) from None
    try:
        return promotable.recertify(actor=actor, candidate_id=str(candidate_id), model=model)
    except NotImplementedError as exc:
        raise UpliftInvalid(str(exc)) from None
    except registry.UnknownCandidate as exc:
        raise UpliftInvalid(str(exc) or f"no {kind} {candidate_id}") from None
    except ValueError as exc:
        raise UpliftInvalid(str(exc)) from None


def critical_task_tag(*, actor: Actor, kind: str, parent_key: str, task_key: str, reason: str = "") -> CriticalTask:
    require_role(actor, Role.OPERATOR, doing="tagging a critical task", code="not_an_operator", system=True)
    _check_kind(kind)
    if not (parent_key or "").strip():
        raise UpliftInvalid("a critical task belongs to one parent (a procedure's id, a workspace's slug)")
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
    require_role(actor, Role.OPERATOR, doing="untagging a critical task", code="not_an_operator", system=True)
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
    require_role(actor, Role.OPERATOR, doing="setting a certification policy", code="not_an_operator", system=True)
    _check_kind(kind)
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
