"""The reference stores on the project's revision chains (DESIGN.md §5, spec §8).

`DbRevisionStore` is the reference RevisionStore over `graphs.models.Revision`: a stale writer gets HeadMoved and a
chain never forks (the unique (workspace, kind, seq) constraint). The layer stores of graphs.core.stores run on it
unchanged, except those of a run, which also keep on the run row what its next step reads, in the transaction of the
write that makes it true, so a step that dies anywhere leaves its successor the state an uninterrupted step would.

A round is written in three transactions (docs/decisions.md, "Evolution runs on Celery"): each is the first durable
write after something that must not be done twice, and holds everything written since the one before.

1. after the refiner: the round's traces and checkpoint #1 (the refiner's reply), with the reply's ledger row and the
   run's meter, in one statement (no BEGIN or COMMIT to wait for);
2. after the evaluation: checkpoint #2 (the candidate's evaluation), with the meter that counts it, in one statement;
3. the record: checkpoint #3 (the gate's decision), the accepted graph with its audit event, the rejection-memory
   revision, the round's `EvolutionRound` row, its decision on the validation split and its candidate's certification
   (graphs.certification_services), and on the run the rounds done, the meter, for an accepted round the retained
   best (the accepted candidate's evaluation), and the step's hand-over: the lease given up.

What lies between two of them is recomputed the same way by a step that resumes the round: the traces are rolled out
again before the refiner is asked, the gate decides again on the checkpointed evaluation against the unchanged
retained best, and the candidate is accepted only in the record. Written with the record, checkpoint #3 is never a
round's pending state, so it keeps only the decision (its stop flag is how a later step learns the round ended the
run) and the sampler's state, marked completed, instead of repeating #2. The loop's own "completed" checkpoint is not
written: the rejection-memory revision that records the round says so already (a round's checkpoint is pending only
while the memory has not recorded it), and the sampler state it repeats is in the round's checkpoints. The first
step's evaluator writes the baseline (as baseline and best, with the meter that counts it) as soon as it is measured.

A store reads the heads of a workspace's four chains in one query when a step starts and keeps them up to date as it
writes, so a round reads no head twice; the parsed rejection memory of a head is kept per process by its digest.
"""

from __future__ import annotations

import hashlib
import operator
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import F, JSONField, QuerySet, Subquery, Value
from django.db.models.expressions import RawSQL
from django.utils import timezone

from accounts.services import Actor, audit_batch, audit_record
from common.fixed_queries import FixedQuery, rows_together
from common.statements import Statement, send, together, update_statement
from graphs.core import canonical_json
from graphs.core.budget import Meter
from graphs.core.diagnostics import GraphError, errors_in
from graphs.core.evaluation import Decision, Evaluation, Trace
from graphs.core.rejections import ACCEPTED, RejectionEntry, RejectionMemory
from graphs.core.stores import (
    CHECKPOINT_WINDOW,
    Candidate,
    HeadMoved,
    Revision,
    RevisionCheckpointStore,
    RevisionGraphStore,
    RevisionRejectionStore,
    RevisionTraceStore,
)
from graphs.core.traces import traces_document
from llm.selectors import subject_totals

from .. import revisions
from ..models import EvolutionRound, EvolutionRun, Workspace
from ..models import Revision as RevisionRow

ROUND_SUBJECT = "graphs.evolutionround"
GRAPH = RevisionRow.Kind.GRAPH
REJECTIONS = RevisionRow.Kind.REJECTIONS
TRACES = RevisionRow.Kind.TRACES
CHECKPOINTS = RevisionRow.Kind.CHECKPOINTS
# The chains whose head document a step reads when it starts; of the others only (seq, digest, meta).
HEAD_DOCUMENTS = (GRAPH, CHECKPOINTS)
MEMORIES_KEPT = 16
# What a decision checkpoint keeps: the round is recorded with it, so nothing else of the round is read from it.
DECISION_KEPT = ("decision", "sampler")


def round_subject(run_id: int, iteration: int) -> tuple[str, str]:
    """The ModelCall subject of the calls a run makes in one round."""
    return ROUND_SUBJECT, f"{run_id}:{iteration}"


def _value(row: RevisionRow, slug: str) -> Revision:
    return Revision(
        workspace=slug,
        kind=row.kind,
        seq=row.seq,
        digest=row.digest,
        parent_digest=row.parent_digest,
        document=row.document,
        meta=row.meta,
        created_at=row.created_at.isoformat(),
    )


def _canonical(document: Any) -> str:
    """The canonical JSON of a document (what graphs.revisions takes its digest over), refusing what cannot be
    stored."""
    try:
        canonical = canonical_json(document)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the document is not JSON: {exc}") from None
    if "\\u0000" in canonical:
        raise ValueError("the document holds a NUL character, which cannot be stored")
    return canonical


def _sha256(canonical: str) -> str:
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def memory_document(row: RevisionRow) -> Any:
    """The whole document of a rejection-memory revision: its own, or, for one stored as what it appends, the
    newest whole document before it with the entries of every revision since appended (graphs.models.Revision)."""
    if row.document is not None and row.document is not _UNREAD:
        return row.document
    return memory_document_at(row.workspace_id, row.seq)


def memory_document_at(workspace_id: int, seq: int) -> Any:
    """The whole rejection-memory document of revision `seq` of a workspace's chain (one query)."""
    chain = RevisionRow.objects.filter(workspace_id=workspace_id, kind=REJECTIONS, seq__lte=seq)
    whole = chain.filter(document__isnull=False).order_by("-seq").values("seq")[:1]
    rows = list(chain.filter(seq__gte=Subquery(whole)).order_by("seq").values_list("document", "appended"))
    if not rows or rows[0][0] is None:
        raise ValueError(f"rejection memory #{seq} of workspace {workspace_id} has no whole document before it")
    document = rows[0][0]
    for _, appended in rows[1:]:
        entries = [*document["entries"], *appended["entries"]]
        document = {**document, "entries": entries, "iteration": appended["iteration"], "schema": appended["schema"]}
    return document


REVISION_COLUMNS = ("workspace", "kind", "seq", "digest", "parent_digest", "document", "appended", "meta", "created_at")


def _insert_statement(count: int, *, in_transaction: bool) -> str:
    """INSERT of `count` revisions, each (workspace, kind, seq, digest, parent, document, appended, meta, created_at)
    with the document (or what it appends) and meta as JSON text. In a transaction it skips a row whose (workspace,
    kind, seq) is taken (the caller compares the rows it gets back): no savepoint is needed to go on reading in the
    transaction after a collision. Outside one a collision fails the statement, which writes nothing then. Plain
    VALUES: Django's bulk_create sends several rows as arrays (UNNEST), escaping every document's text once more."""
    quote = connection.ops.quote_name
    columns = ", ".join(quote(RevisionRow._meta.get_field(name).column) for name in REVISION_COLUMNS)
    values = ", ".join([f"({', '.join(['%s'] * len(REVISION_COLUMNS))})"] * count)
    unique = ", ".join(quote(RevisionRow._meta.get_field(name).column) for name in ("workspace", "kind", "seq"))
    skip = f"ON CONFLICT ({unique}) DO NOTHING " if in_transaction else ""
    return (
        f"INSERT INTO {quote(RevisionRow._meta.db_table)} ({columns}) VALUES {values} "
        f"{skip}RETURNING {quote('id')}, {quote('kind')}, {quote('seq')}"
    )


def _head_branches(workspace: int | Subquery) -> list[QuerySet]:
    """The head of each chain of a workspace (its id, or a subquery giving it), a values_list QuerySet a chain
    (document of HEAD_DOCUMENTS kinds only)."""
    branches = []
    for kind in RevisionRow.Kind.values:
        chain = RevisionRow.objects.filter(workspace_id=workspace, kind=kind).order_by("-seq")
        document = "document" if kind in HEAD_DOCUMENTS else Value(None, JSONField())
        branches.append(chain.values_list("kind", "seq", "digest", "parent_digest", "meta", "created_at", document)[:1])
    return branches


_HEADS: OrderedDict[tuple[str, int], FixedQuery] = OrderedDict()


def _union(branches: list[QuerySet]) -> QuerySet:
    return branches[0].union(*branches[1:], all=True).order_by()


def _heads_query(workspace_id: int) -> FixedQuery:
    """The UNION of a workspace's head branches, compiled by the ORM once per workspace and thread (common/
    fixed_queries.py): compiling four branches cost several times running them, and a run's steps all read the same
    workspace's heads."""
    return _kept(("workspace", workspace_id), lambda: _union(_head_branches(workspace_id)))


def run_heads_query(run_id: int) -> FixedQuery | None:
    """`_heads_query` of a run's workspace, named by the run: a step reads the heads with its claim, before it knows
    the workspace (DbRevisionStore.read_heads takes the rows). None where the database cannot limit the parts of a
    UNION (read_heads reads them itself)."""
    if not connection.features.supports_slicing_ordering_in_compound:
        return None
    workspace = Subquery(EvolutionRun.objects.filter(pk=run_id).values("workspace_id")[:1])
    return _kept(("run", run_id), lambda: _union(_head_branches(workspace)))


def _kept(key: tuple[str, int], build) -> FixedQuery:
    query = _HEADS.get(key)
    if query is None:
        query = _HEADS[key] = FixedQuery(build)
        while len(_HEADS) > MEMORIES_KEPT:
            _HEADS.popitem(last=False)
    _HEADS.move_to_end(key)
    return query


_UNREAD = object()  # a head whose document was not read (or a memory appended as its text: read only if needed)


class DbRevisionStore:
    """RevisionStore over the Revision table; workspaces are named by slug and must exist.

    It knows the heads it read (`read_heads`: the four chains of a workspace in one query) and those it appended, so
    an append states its parent without reading the head again (the unique (workspace, kind, seq) constraint refuses
    it when another writer got there first: HeadMoved). With `deferring` on, appends are kept (`pending`) until
    `write_pending` inserts them in one statement in the caller's transaction."""

    def __init__(self, *known: Workspace) -> None:
        self._workspaces: dict[str, Workspace] = {workspace.slug: workspace for workspace in known}
        self.appended: dict[str, RevisionRow] = {}  # the last row appended per digest, to save a lookup
        self.heads: dict[tuple[str, str], RevisionRow | None] = {}  # known heads; document may be _UNREAD
        # A row to insert with the JSON text of its document (None when it is stored as what it appends), of what it
        # appends (None when it is stored whole) and of its meta.
        self.pending: list[tuple[RevisionRow, str | None, str | None, str]] = []
        self.deferring = False
        # Writes sent with each write_pending, handed over by whoever keeps them (the ledger's replies).
        self.writes_with: list[Callable[[], list[Statement]]] = []

    def workspace(self, slug: str) -> Workspace:
        if slug not in self._workspaces:
            self._workspaces[slug] = Workspace.objects.get(slug=slug)
        return self._workspaces[slug]

    def read_heads(self, workspace: str, heads: list[tuple[Any, ...]] | None = None) -> None:
        """The head of each of the workspace's chains in one query (documents of HEAD_DOCUMENTS kinds only; one query a
        chain where the database cannot limit the parts of a UNION), or `heads` as read already (`run_heads_query`'s
        rows)."""
        ws = self.workspace(workspace)
        for kind in RevisionRow.Kind.values:
            self.heads[(workspace, kind)] = None
        if heads is None and connection.features.supports_slicing_ordering_in_compound:
            heads = _heads_query(ws.pk).rows()
        elif heads is None:  # SQLite (the embedded default): one query a chain
            heads = [head for branch in _head_branches(ws.pk) for head in branch]
        for kind, seq, digest, parent, meta, created_at, document in heads:
            row = RevisionRow(
                workspace=ws,
                kind=kind,
                seq=seq,
                digest=digest,
                parent_digest=parent,
                meta=meta,
                created_at=created_at,
                document=document if kind in HEAD_DOCUMENTS else _UNREAD,
            )
            self.heads[(workspace, kind)] = row

    def _head_row(self, workspace: str, kind: str, *, document: bool = True) -> RevisionRow | None:
        key = (workspace, kind)
        if key not in self.heads:
            self.heads[key] = revisions.head(self.workspace(workspace), kind)
        row = self.heads[key]
        if row is not None and document and kind == REJECTIONS and (row.document is None or row.document is _UNREAD):
            row.document = memory_document_at(row.workspace_id, row.seq)  # on the row in hand only: never saved
        elif row is not None and document and row.document is _UNREAD:
            row.document = (
                RevisionRow.objects.filter(workspace=row.workspace, kind=kind, seq=row.seq)
                .values_list("document", flat=True)
                .get()
            )
        return row

    def head(self, workspace: str, kind: str) -> Revision | None:
        row = self._head_row(workspace, kind)
        return _value(row, workspace) if row is not None else None

    def head_meta(self, workspace: str, kind: str) -> Mapping[str, Any] | None:
        row = self._head_row(workspace, kind, document=False)
        return row.meta if row is not None else None

    def append(
        self, workspace: str, kind: str, document: Any, *, expected_head: str | None, meta: Mapping | None = None
    ) -> Revision:
        canonical = _canonical(document)
        return self.append_canonical(
            workspace, kind, document, canonical, _sha256(canonical), expected_head=expected_head, meta=meta
        )

    def append_canonical(
        self,
        workspace: str,
        kind: str,
        document: Any,
        canonical: str,
        digest: str,
        *,
        expected_head: str | None,
        meta: Mapping | None = None,
        appended: tuple[Any, str] | None = None,
    ) -> Revision:
        """`append` of a document whose canonical JSON and its digest the caller has (RunRejectionStore builds a
        memory's from its entries'); with `appended` (a rejection memory's new entries as a memory document, and its
        canonical JSON) the row stores that instead of the whole document."""
        meta = dict(meta or {})
        meta_text = canonical_json(meta)  # refuses a meta that is not JSON before anything is written
        current = self._head_row(workspace, kind, document=False)
        actual = current.digest if current is not None else None
        if expected_head != actual:
            raise HeadMoved(workspace, kind, expected_head, actual)
        row = RevisionRow(
            workspace=self.workspace(workspace),
            kind=kind,
            seq=0 if current is None else current.seq + 1,
            digest=digest,
            parent_digest=actual,
            document=document if appended is None else None,
            appended=None if appended is None else appended[0],
            meta=meta,
        )
        if appended is None:
            self.pending.append((row, canonical, None, meta_text))
        else:
            self.pending.append((row, None, appended[1], meta_text))
        self.heads[(workspace, kind)] = row
        self.appended = {row.digest: row}
        if not self.deferring:
            with transaction.atomic():
                self.write_pending()
        return _value(row, workspace)

    def write_pending(self, *, also: Sequence[Statement] = ()) -> list[RevisionRow]:
        """Insert the pending appends in one statement with the writes `also` and those of `writes_with` (PostgreSQL:
        one round trip for all, common/statements.py). Outside a transaction that statement commits by itself, all or
        nothing: a collision with another writer's append writes nothing and raises HeadMoved. In the caller's
        transaction, which must end with it, a collision raises HeadMoved and what the statement did write is rolled
        back with the transaction."""
        return self.write_pending_reading(also=also)[0]

    def write_pending_reading(
        self, *, also: Sequence[Statement] = (), then: Sequence[Statement] = (), reads: Sequence[FixedQuery] = ()
    ) -> tuple[list[RevisionRow], list[list[tuple[Any, ...]]]]:
        """write_pending, then in the same round trip the caller's statements `then` (writes whose rows it needs) and
        its `reads`: the rows written, and the rows of each of `then` and `reads` (common.fixed_queries)."""
        writes = [*also]
        for more in self.writes_with:
            writes += more()
        pending, self.pending = self.pending, []
        if connection.vendor != "postgresql" and not connection.in_atomic_block:  # (SQLite) one write after another
            with transaction.atomic():
                return self._write(pending, writes, [*then], [*reads])
        return self._write(pending, writes, [*then], [*reads])

    def _write(
        self,
        pending: list[tuple[RevisionRow, str | None, str | None, str]],
        writes: list[Statement],
        then: list[Statement],
        reads: list[FixedQuery],
    ) -> tuple[list[RevisionRow], list[list[tuple[Any, ...]]]]:
        if not pending:
            send(writes)
            return [], rows_together(*reads, first=then) if then or reads else []
        rows = [row for row, _, _, _ in pending]
        created_at = RevisionRow._meta.get_field("created_at")
        params: list[Any] = []
        for row, document, appended, meta_text in pending:
            params += [
                row.workspace_id,
                row.kind,
                row.seq,
                row.digest,
                row.parent_digest,
                document,
                appended,
                meta_text,
                created_at.get_db_prep_save(row.created_at, connection),
            ]
        in_transaction = connection.in_atomic_block
        insert = (_insert_statement(len(rows), in_transaction=in_transaction), params)
        ids: dict[tuple[str, int], int] = {}
        refused: IntegrityError | None = None
        results: list[list[tuple[Any, ...]]] = []
        try:
            if connection.vendor == "postgresql":
                inserted, *results = rows_together(*reads, first=[together(writes, insert), *then])
            else:
                with connection.cursor() as cursor:
                    for write in writes:
                        cursor.execute(*write)
                inserted, *results = rows_together(*reads, first=[insert, *then])
            ids = {(kind, seq): pk for pk, kind, seq in inserted}
        except IntegrityError as error:
            if in_transaction:
                raise
            refused = error  # alone, the statement wrote nothing
        for row in rows:
            row.pk = ids.get((row.kind, row.seq))
            row._state.adding, row._state.db = False, connection.alias
        lost = [row for row in rows if row.pk is None]
        if not lost:
            return rows, results
        for row in rows:
            self.heads.pop((row.workspace.slug, row.kind), None)
        for row in lost:
            latest = revisions.head_pointer(row.workspace, row.kind)
            if refused is None or (latest is not None and latest[0] >= row.seq):  # another writer's append took it
                raise HeadMoved(row.workspace.slug, row.kind, row.parent_digest, latest[1] if latest else None)
        raise refused  # refused for another reason

    def discard_pending(self) -> None:
        """Forget appends that were never written (the heads are read again when next needed)."""
        for row, _, _, _ in self.pending:
            self.heads.pop((row.workspace.slug, row.kind), None)
        self.pending = []

    def row(self, workspace: str, kind: str, digest: str) -> RevisionRow | None:
        """The stored row of a revision, without a query when this store just appended it."""
        row = self.appended.get(digest)
        if row is not None and row.kind == kind:
            return row
        return revisions.get(self.workspace(workspace), kind, digest)

    def head_digest(self, workspace: str, kind: str) -> str | None:
        row = self._head_row(workspace, kind, document=False)
        return row.digest if row is not None else None

    def get(self, workspace: str, kind: str, digest: str) -> Revision | None:
        row = revisions.get(self.workspace(workspace), kind, digest)
        return _value(_whole(row), workspace) if row is not None else None

    def list(self, workspace: str, kind: str, limit: int = 50) -> list[Revision]:
        rows = revisions.list_revisions(self.workspace(workspace), kind, limit)
        return [_value(_whole(row), workspace) for row in rows]


def _whole(row: RevisionRow) -> RevisionRow:
    """The row with its whole document (a rejection memory stored as what it appends gets it on the row in hand)."""
    if row.document is None:
        row.document = memory_document(row)
    return row


class DbCheckpointStore(RevisionCheckpointStore):
    """The reference checkpoint store, reading the one revision it needs: the chain's head when it is the
    iteration's (always, but for a round that ran before a later one's checkpoint was written), else the newest of
    the last 200 whose meta names the iteration (every checkpoint revision carries meta {iteration}), by index."""

    def __init__(self, store: DbRevisionStore, workspace: str) -> None:
        super().__init__(store, workspace)
        self.store = store

    def _head(self) -> RevisionRow | None:
        return self.store._head_row(self.workspace, CHECKPOINTS, document=False)

    def load(self, iteration: int) -> dict[str, Any] | None:
        head = self._head()
        if head is None:
            return None
        head_iteration = (head.meta or {}).get("iteration")
        if isinstance(head_iteration, int) and head_iteration <= iteration:
            if head_iteration < iteration:
                return None  # checkpoints are written in round order: none is newer than the head
            document = self.store._head_row(self.workspace, CHECKPOINTS).document
        else:
            document = (
                RevisionRow.objects.filter(
                    workspace=self.store.workspace(self.workspace),
                    kind=CHECKPOINTS,
                    seq__gt=head.seq - CHECKPOINT_WINDOW,
                    meta__iteration=iteration,
                )
                .order_by("-seq")
                .values_list("document", flat=True)
                .first()
            )
        if not isinstance(document, Mapping) or document.get("iteration") != iteration:
            return None
        payload = document.get("payload")
        return dict(payload) if isinstance(payload, Mapping) else None

    def decision(self, iteration: int) -> Decision | None:
        """The gate's decision checkpointed for a round (checkpoint #3, stop flag included), None for a round no gate
        decided."""
        head = self._head()
        if head is not None and (head.meta or {}).get("iteration") == iteration:
            # A round's decision is checkpointed with its record: the head is the round's last checkpoint (a
            # "completed" one only in chains written before that, so look further back then).
            payload = self.load(iteration) or {}
            if "decision" in payload:
                return Decision.from_document(payload["decision"])
            if not payload.get("completed"):
                return None
        document = (
            RevisionRow.objects.filter(
                workspace=self.store.workspace(self.workspace),
                kind=CHECKPOINTS,
                meta__iteration=iteration,
                document__payload__has_key="decision",
            )
            .order_by("-seq")
            .values_list("document", flat=True)
            .first()
        )
        if not isinstance(document, Mapping) or document.get("iteration") != iteration:
            return None
        return Decision.from_document(document["payload"]["decision"])


def record_progress(run: EvolutionRun, **fields: Any) -> None:
    """Write on the run what its next step reads, in the caller's transaction (and on the instance in hand)."""
    EvolutionRun.objects.filter(pk=run.pk).update(**fields)
    for key, value in fields.items():
        setattr(run, key, value)


class RunCheckpointStore(DbCheckpointStore):
    """The checkpoint store of one run. Checkpoint #1 (the refiner's reply) and #2 (the candidate's evaluation) are
    written at once, each with what is pending (the round's traces, the reply's ledger row) and the run's meter in one
    statement that commits by itself (DbRevisionStore.write_pending): #2's evaluation is reused by a resumed round
    without counting it again, so the count must be on the run exactly when that checkpoint is. Checkpoint #3 (the
    gate's decision, which a resumed round takes again from the same evaluation and retained best) waits for the
    record, which makes it the round's last: it keeps the decision and the sampler's state and says the round is
    completed, instead of repeating #2. The loop's own "completed" checkpoint is not written (module doc)."""

    def __init__(self, store: DbRevisionStore, workspace: str, *, run: EvolutionRun, meter: Meter) -> None:
        super().__init__(store, workspace)
        self.run = run
        self.meter = meter

    def save(self, iteration: int, payload: Mapping[str, Any]) -> None:
        if payload.get("completed"):
            return
        if "decision" in payload:
            # Written with the round's record (the store defers during a step), so never a round's pending state:
            # what a later step reads of it is the decision (its stop flag) and the sampler's state.
            kept = {key: payload[key] for key in DECISION_KEPT if key in payload}
            super().save(iteration, {**kept, "completed": True})
            return
        meter = self.meter.to_dict()
        super().save(iteration, payload)  # pending: the store defers during a step
        self.store.write_pending(also=[update_statement(EvolutionRun.objects.filter(pk=self.run.pk), meter=meter)])
        self.run.meter = meter


class RunBaselineRecorder:
    """The evaluator of a run's first step: the baseline it measures is written on the run (as its baseline and its
    retained best, with the meter that counts it) before the loop goes on, so a step that dies after measuring it
    leaves its successor nothing to measure again. In objective mode a baseline that does not name the graph it was
    asked about is left for the loop to refuse."""

    def __init__(
        self, evaluator: Any, *, run: EvolutionRun, meter: Meter, first_iteration: int, objective_mode: bool
    ) -> None:
        self.evaluator = evaluator
        self.run = run
        self.meter = meter
        self.first_iteration = first_iteration
        self.objective_mode = objective_mode

    def evaluate(self, ref: str | None, graph: Any, *, iteration: int, purpose: str) -> Evaluation:
        evaluation = self.evaluator.evaluate(ref, graph, iteration=iteration, purpose=purpose)
        if purpose == "baseline" and (not self.objective_mode or evaluation.ref == ref):
            document = evaluation.to_document()
            # The loop counts the evaluation as soon as this returns: the meter recorded is the one that counts it.
            meter = {**self.meter.to_dict(), "evaluations": self.meter.evaluations + 1}
            record_progress(
                self.run,
                meter=meter,
                baseline=document,
                best=document,
                first_iteration=self.first_iteration,
                attempts=0,
            )
        return evaluation


class RunTraceStore(RevisionTraceStore):
    """RevisionTraceStore.put with the round's traces document serialized once, for its digest and as stored."""

    def __init__(self, store: DbRevisionStore, workspace: str) -> None:
        super().__init__(store, workspace)
        self.store = store

    def put(self, traces: Sequence[Trace], *, iteration: int) -> str:
        document = traces_document(list(traces), iteration)
        canonical = _canonical(document)
        digest = _sha256(canonical)
        expected = self.store.head_digest(self.workspace, TRACES)
        if expected == digest:  # the round run again after a crash: its traces are stored already
            return digest
        return self.store.append_canonical(
            self.workspace, TRACES, document, canonical, digest, expected_head=expected, meta={"iteration": iteration}
        ).digest


class RunGraphStore(RevisionGraphStore):
    """The graph store of one run: an accepted candidate is checked as graphs.services checks it and appended with
    its revision meta naming the run (which is how a promotion finds the measured evaluation behind it); the append
    and its audit event are written with the round's record."""

    def __init__(self, store: DbRevisionStore, workspace: str, *, run: EvolutionRun) -> None:
        super().__init__(store, workspace)
        self.store = store
        self.run = run
        self.accepted: tuple[RevisionRow, str | None] | None = None  # the row and the head it follows

    def accept(self, candidate: Candidate, *, expected_ref: str) -> str:
        failures = errors_in(candidate.graph.validate(cycle_policy="allow"))
        if failures:
            raise GraphError(failures, "an accepted graph must pass the structural checks")
        meta = {
            **dict(candidate.meta),
            "edits": candidate.edits.to_dict(candidate.graph.attribute_fields),
            "evolution_run": self.run.pk,
            "origin": "accepted",
        }
        revision = self.store.append(
            self.workspace, GRAPH, candidate.graph.to_document(), expected_head=expected_ref, meta=meta
        )
        self.accepted = (self.store.appended[revision.digest], expected_ref)
        return revision.digest

    def audit_accepted(self, row: RevisionRow) -> None:
        """The accepted revision's audit event, in the record's transaction (as graphs.services writes it)."""
        if self.accepted is None or self.accepted[0] is not row:
            return
        actor = Actor(user=self.run.started_by) if self.run.started_by_id else Actor.system()
        audit_record(
            actor=actor,
            verb="graph_revision.append",
            target=row,
            before={"head": self.accepted[1]},
            after={"workspace": self.workspace, "seq": row.seq, "digest": row.digest},
        )
        self.accepted = None


class _Known:
    """A rejection memory this process parsed or wrote, with the canonical JSON of each entry once computed (its
    revision never changes, so neither do they)."""

    def __init__(self, memory: RejectionMemory, texts: tuple[str, ...] | None = None) -> None:
        self.memory = memory
        self.texts = texts

    def entry_texts(self) -> tuple[str, ...]:
        if self.texts is None:
            self.texts = tuple(_canonical(entry.to_document()) for entry in self.memory.entries)
        return self.texts


_MEMORIES: OrderedDict[tuple[int, str], _Known] = OrderedDict()


def _remember(workspace_id: int, digest: str, known: _Known) -> None:
    _MEMORIES[(workspace_id, digest)] = known
    _MEMORIES.move_to_end((workspace_id, digest))
    while len(_MEMORIES) > MEMORIES_KEPT:
        _MEMORIES.popitem(last=False)


def memory_canonical(memory: RejectionMemory, entry_texts: tuple[str, ...]) -> str:
    """canonical_json(memory.to_document()) from the canonical JSON of its entries: the document's keys in order
    (entries, iteration, schema), the entries' texts joined as the list's items."""
    return (
        f'{{"entries":[{",".join(entry_texts)}],"iteration":{canonical_json(memory.iteration)},'
        f'"schema":{canonical_json(memory.schema)}}}'
    )


def _entry_texts(memory: RejectionMemory, parent: _Known | None) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
    """The canonical JSON of each entry of `memory`, and of those it adds to its parent's (None when it does not
    extend the parent's memory, which is then written whole): the parent's as computed once, when `memory` extends
    it (the loop appends one entry to the memory it loaded), and the new entries'."""
    known = parent.memory.entries if parent is not None else ()
    entries = memory.entries
    if parent is not None and len(entries) > len(known) and all(map(operator.is_, known, entries)):
        added = tuple(_canonical(entry.to_document()) for entry in entries[len(known) :])
        return parent.entry_texts() + added, added
    return tuple(_canonical(entry.to_document()) for entry in entries), None


class RunRejectionStore(RevisionRejectionStore):
    """The rejection store of one run. Loading reuses the memory this process parsed for the head's digest (a
    revision never changes). Each save is the round's record (module doc): one transaction with what is pending,
    the round's row (once: unique (run, iteration)) and, on the run, the rounds done, the meter and, for an accepted
    round, the retained best: the next step compares its candidate with that best, so it must be on the run exactly
    when the round is."""

    def __init__(
        self,
        store: DbRevisionStore,
        workspace: str,
        *,
        run: EvolutionRun,
        meter: Meter,
        graphs: RunGraphStore | None = None,
    ) -> None:
        super().__init__(store, workspace)
        self.store = store
        self.run = run
        self.meter = meter
        self.graphs = graphs
        self.handed_over = False  # a round was recorded: the run's lease is given up

    def load(self) -> tuple[str | None, RejectionMemory]:
        head = self.store._head_row(self.workspace, REJECTIONS, document=False)
        if head is None:
            return None, RejectionMemory()
        key = (head.workspace_id, head.digest)
        known = _MEMORIES.get(key)
        if known is None:
            known = _Known(RejectionMemory.from_document(self.store._head_row(self.workspace, REJECTIONS).document))
            _remember(*key, known)
        return head.digest, known.memory

    def _append(self, memory: RejectionMemory, *, expected_ref: str | None, iteration: int) -> tuple[str, _Known]:
        """RevisionRejectionStore.save's append, the document's canonical JSON built from its entries' (the memory
        it extends was parsed or written by this process: only the new entry is serialized)."""
        workspace_id = self.store.workspace(self.workspace).pk
        parent = _MEMORIES.get((workspace_id, expected_ref)) if expected_ref is not None else None
        texts, added = _entry_texts(memory, parent)
        known = _Known(memory, texts)
        canonical = memory_canonical(memory, texts)
        appended = None
        if added is not None:  # stored as the entries it appends to its parent's memory
            new = RejectionMemory(memory.entries[len(texts) - len(added) :], memory.iteration)
            appended = (new.to_document(), memory_canonical(new, added))
        revision = self.store.append_canonical(
            self.workspace,
            REJECTIONS,
            _UNREAD,
            canonical,
            _sha256(canonical),
            expected_head=expected_ref,
            meta={"iteration": iteration},
            appended=appended,
        )
        return revision.digest, known

    def save(self, memory: RejectionMemory, *, expected_ref: str | None, iteration: int) -> str:
        from graphs.certification_services import round_parts, round_recorded_in_transaction

        workspace = self.store.workspace(self.workspace)
        # The record's audit events (the accepted revision's, its split decision's and its certification's) in one
        # INSERT.
        entry = memory.entries[-1]
        # The run's progress goes in the statement of the record's revisions; the round's cost, which the round row
        # records too, is summed from the ledger there. Progress: the count of steps that died in a row starts again.
        # The record is also the step's hand-over: it gives the lease up (the holder's name stays, so the step can
        # still end the run under it; services._settle) and clears the stage and a transient error's message.
        now = timezone.now()
        progress: dict[str, Any] = {
            "rounds_done": F("rounds_done") + 1,
            "cost": F("cost") + _round_cost(self.run.pk, entry.iteration),
            "meter": self.meter.to_dict(),
            "attempts": 0,
            "stage": "",
            "error": "",
            "lease_expires_at": now,
            "updated_at": now,
        }
        if entry.kind == ACCEPTED and entry.validation is not None:
            progress["best"] = entry.validation.to_document()
        # The round's decision on the validation split and the active revision's read (its candidate's certification
        # compares with it) go in the round trip of the record's revisions.
        parts = round_parts(run=self.run, workspace=workspace, entry=entry)
        with transaction.atomic(), audit_batch():
            ref, known = self._append(memory, expected_ref=expected_ref, iteration=iteration)
            run_progress = update_statement(EvolutionRun.objects.filter(pk=self.run.pk), **progress)
            written, results = self.store.write_pending_reading(
                also=[run_progress], then=parts.statements, reads=parts.reads
            )
            accepted = None
            if entry.kind == ACCEPTED and entry.candidate_digest:
                accepted = next(
                    (row for row in written if row.kind == GRAPH and row.digest == entry.candidate_digest), None
                )
                if accepted is not None and self.graphs is not None:
                    self.graphs.audit_accepted(accepted)
                if accepted is None:  # accepted by an earlier step (recorded from its checkpoint)
                    accepted = revisions.get(workspace, GRAPH, entry.candidate_digest)
            round_row = record_round(
                run=self.run,
                workspace=workspace,
                entry=entry,
                rejections_revision=self.store.row(self.workspace, REJECTIONS, ref),
                graph_revision=accepted,
            )
            # The round's decision on the validation split and its candidate's certification, once with the round.
            # The instance's best is still the retained graph's evaluation here: the accepted one replaces it below.
            round_recorded_in_transaction(
                run=self.run,
                workspace=workspace,
                entry=entry,
                round_row=round_row,
                retained=self.run.best,
                parts=parts,
                results=results,
            )
        self.run.rounds_done += 1
        self.run.cost += round_row.cost
        for key in ("meter", "attempts", "stage", "error", "lease_expires_at", "updated_at"):
            setattr(self.run, key, progress[key])
        self.handed_over = True
        if "best" in progress:
            self.run.best = progress["best"]
        _remember(workspace.pk, ref, known)
        return ref


def _round_cost(run_id: int, iteration: int) -> RawSQL:
    """The cost of a round's calls as the ledger holds them (0 when none has a price), as a subquery."""
    return subject_totals(*round_subject(run_id, iteration))[1]


def record_round(
    *,
    run: EvolutionRun,
    workspace: Workspace,
    entry: RejectionEntry,
    rejections_revision: RevisionRow,
    graph_revision: RevisionRow | None,
) -> EvolutionRound:
    """The round row of a rejection-memory entry, with the calls and cost the ledger holds for that round."""
    decision = entry.decision if isinstance(entry.decision, Mapping) else None
    disposition = decision.get("disposition") if decision else None
    # The calls and cost as the ledger holds them, summed in the INSERT (and read back with the row).
    model_calls, cost = subject_totals(*round_subject(run.pk, entry.iteration))
    return EvolutionRound.objects.create(
        run=run,
        iteration=entry.iteration,
        outcome=entry.kind,
        disposition=disposition if isinstance(disposition, str) else "",
        mode=entry.mode or "",
        retained_score=entry.retained_score,
        candidate_score=entry.validation.score if entry.validation is not None else None,
        edits=entry.edits or {},
        edit_counts=entry.edit_counts(),
        diagnostics=[diagnostic.to_dict() for diagnostic in entry.diagnostics],
        decision=dict(decision) if decision else None,
        candidate_digest=entry.candidate_digest or "",
        base_digest=entry.base_digest or "",
        duplicate_of=entry.duplicate_of,
        trace_ids=list(entry.trace_ids),
        rejections_revision=rejections_revision,
        graph_revision=graph_revision,
        model_calls=model_calls,
        cost=cost,
    )
