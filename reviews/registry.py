"""The promotable registry (DESIGN.md §5): how reviews and uplift learn about the things they can activate.

Each owning app subclasses `PromotableKind` in its `promotable.py` and registers it with `register_kind` when its
AppConfig.ready imports that module: procedure versions (procedures), graph revisions (graphs), intent taxonomy
versions (intents) and rubric versions (rubrics). `reviews` runs the promotion policy; a kind describes candidates,
reports their gate evidence, shows their diff (and optionally a panel of what else its reviewers should read,
review_panel) and activates a candidate inside the review's transaction (`move_active_version` does it for kinds
whose parent row holds the active version). The optional methods serve uplift: the learned texts the safety scan
reads, the active artifacts and their runs' models (model coverage), re-certification, and for `watchable` kinds the
watch after activation (a canary's start, share and end, the runs of each arm). Neither reviews nor uplift imports
the owning apps (import-linter contracts).

Ids crossing the registry are strings (a version pk, a revision pk) so one table can hold requests of every kind.
People never see those ids: every page, message and API answer names a candidate by its kind's *label* (`v3` for a
version, `#2 · 3fa9c1d` for a graph revision), which `labels()` answers for many ids at once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Model, QuerySet

from common.parsing import int_or_none

DEFAULT_APPROVALS_REQUIRED = 2


class StaleActivation(Exception):
    """The version a promotion replaces is no longer the active one: the request must be superseded."""

    def __init__(self, *, parent_key: str, expected_active_id: str | None, actual_active_id: str | None) -> None:
        super().__init__(
            f"{parent_key}: the active version is {actual_active_id or 'none'}, "
            f"not {expected_active_id or 'none'} as this request expected"
        )
        self.parent_key = parent_key
        self.expected_active_id = expected_active_id
        self.actual_active_id = actual_active_id


class UnknownCandidate(LookupError):
    """describe()/gate_evidence() of a candidate id the kind does not know."""


@dataclass(frozen=True)
class Description:
    """`label` names the candidate (`v3`, `#2 · 3fa9c1d`); `title` names it with its parent."""

    title: str
    summary: str
    url: str
    parent_key: str
    parent_label: str
    label: str = ""


@dataclass(frozen=True)
class Choice:
    """One candidate that can be proposed now (PromotableKind.proposable): its id (the form's value, never shown),
    its label, its parent, and its gate state (passing True/False, None = no gate evidence) with a short note."""

    id: str
    label: str
    parent_key: str
    parent_label: str
    gate_passing: bool | None
    gate_note: str = ""


@dataclass(frozen=True)
class GateEvidence:
    """passing: True/False, or None when the candidate has no gate evidence at all (needs an admin override)."""

    passing: bool | None
    summary: str
    details: dict[str, Any] = field(default_factory=dict)
    url: str = ""
    # Measured metrics, one row each: {"metric", "value", "bound", "active", "delta", "passed", "reason"} (numbers
    # as measured; pages round them, see metric_text). "active" is the active version's value (None: none).
    metrics: list[dict[str, Any]] = field(default_factory=list)
    # Held-out cases, one row each: {"case_run_id", "passed", "answered", "result_run_id", "active_passed",
    # "active_result_run_id", "regression"}; run ids link to the runs' pages.
    cases: list[dict[str, Any]] = field(default_factory=list)
    cases_total: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "passing": self.passing,
            "summary": self.summary,
            "details": self.details,
            "url": self.url,
            "metrics": self.metrics,
            "cases": self.cases,
            "cases_total": self.cases_total or len(self.cases),
        }


@dataclass(frozen=True)
class CanaryState:
    """A parent whose active version is live for a share of runs only (uplift.core.canary): the candidate is the
    active version, the control the version it replaced. `*_ref` are what runs record and agents pin (a graph
    revision's digest, a procedure version's content revision)."""

    parent_key: str
    candidate_id: str
    control_id: str
    candidate_ref: str
    control_ref: str
    share: float


@dataclass(frozen=True)
class ArmRun:
    """One production run made under a watched parent, attributed to an arm by the revision it recorded."""

    run_id: int
    arm: str  # "canary" or "control"
    success: float  # 1.0 or 0.0
    score: float  # the run's score in [0, 1], else its success
    model: str = ""


@dataclass(frozen=True)
class ActiveArtifact:
    """One parent's active version, as the model-coverage check (uplift) reads it: which runs came under it is the
    kind's to say (PromotableKind.recent_run_models)."""

    parent_key: str
    candidate_id: str
    parent_label: str
    label: str
    url: str
    since: Any  # when it became active (a datetime), None when unknown


def significant(value: Any, digits: int = 3) -> str:
    """A number rounded to `digits` significant digits for people (`0.667`, `12.3`, `1.2e+03`); text otherwise."""
    if isinstance(value, bool) or value is None:
        return "—" if value is None else str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def signed(value: Any, digits: int = 3) -> str:
    """A delta with its sign (`+0.167`, `−1`, `0`); "—" when there is none."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return "—"
    if value == 0:
        return "0"
    text = significant(abs(value), digits)
    return ("+" if value > 0 else "−") + text


@dataclass(frozen=True)
class DiffView:
    """What the item page shows under "what changes": a template included with this context (HTML-safe)."""

    template: str
    context: dict[str, Any] = field(default_factory=dict)


class PromotableKind(ABC):
    """One kind of activatable artifact. Subclass, set `key` and `label`, implement the methods, register."""

    key: str = ""
    label: str = ""
    approvals_required: int = DEFAULT_APPROVALS_REQUIRED
    watchable: bool = False  # its runs record the version they used (arm_runs): the watch after activation applies

    @abstractmethod
    def describe(self, candidate_id: str) -> Description:
        """Title, summary and link of a candidate and of its parent. UnknownCandidate when it does not exist."""

    @abstractmethod
    def current_active(self, parent_key: str) -> str | None:
        """The id of the parent's active version, or None."""

    @abstractmethod
    def gate_evidence(self, candidate_id: str) -> GateEvidence:
        """The measured gate of a candidate (replay report, evaluation), or passing=None when there is none."""

    @abstractmethod
    def diff(self, candidate_id: str, active_id: str | None) -> DiffView:
        """What changes when the candidate replaces `active_id`."""

    @abstractmethod
    def activate(self, *, actor: Any, candidate_id: str, expected_active_id: str | None) -> None:
        """Move the parent's active pointer to the candidate INSIDE the caller's transaction (never a durable block
        of its own): lock the parent row, raise StaleActivation when `expected_active_id` is no longer active, move
        the pointer, write the owning app's audit event (actor is an accounts.services.Actor)."""

    def labels(self, candidate_ids: Iterable[str]) -> dict[str, str]:
        """The label of each id that exists (`v3`, `#2 · 3fa9c1d`); kinds answer in one query. This fallback asks
        describe() per id."""
        found = {}
        for candidate_id in dict.fromkeys(i for i in candidate_ids if i):
            try:
                found[candidate_id] = self.describe(candidate_id).label or candidate_id
            except UnknownCandidate:
                continue
        return found

    def label_of(self, candidate_id: str | None, *, none: str = "no active version") -> str:
        """One id's label: `none` for no id, the id itself (as `id 42`) when the kind does not know it."""
        if not candidate_id:
            return none
        return self.labels([candidate_id]).get(candidate_id) or f"id {candidate_id}"

    def proposable(self, parent_key: str | None = None) -> list[Choice]:
        """The candidates that can be proposed now (not active), newest first, of one parent or of all: what the
        Propose form offers. A bounded number of queries whatever the number of candidates."""
        return []

    def history_url(self, parent_key: str) -> str:
        """Where the parent lives in its own app (optional)."""
        return ""

    def review_panel(self, viewer: Any, candidate_id: str, parent_key: str) -> DiffView | None:
        """What else the request's page shows its reviewers, as `viewer` may see it (optional): a template and its
        context, rendered before "what changes" (a rubric version's agreement between raters). None: nothing."""
        return None

    def demo_candidate(self, *, actor: Any) -> str | None:
        """seed_demo only (optional): a candidate worth proposing in the demo, created by the owning app if needed."""
        return None

    # --- certified uplift (uplift: certificates, the safety scan, model coverage) -------------------------------
    def learned_texts(self, candidate_id: str) -> list[Any]:
        """The candidate's text agents will read, as uplift.core.safety.LearnedText (where, text, sources: the runs
        and steps it was learnt from, with their observations, where they can be traced). Scanned before review."""
        return []

    def active_artifacts(self) -> list[ActiveArtifact]:
        """Every parent's active version (a bounded number of queries)."""
        return []

    def recent_run_models(self, artifact: ActiveArtifact, *, limit: int) -> dict[str, int]:
        """How many of the newest `limit` production runs made under `artifact` came from each agent model
        (runs naming no model left out)."""
        return {}

    def recertify(self, *, actor: Any, candidate_id: str, model: str | None) -> str:
        """Start the candidate's paired evaluation again on fresh runs (runs received after its last certificate's
        split was drawn; of `model` only when given). Returns a sentence saying what was started; raises
        NotImplementedError when the kind cannot, ValueError (with the reason) when it cannot now."""
        raise NotImplementedError(f"{self.label or self.key} candidates cannot be certified again")

    # --- the watch after activation (uplift: canary rollout and its sequential test) ----------------------------
    def start_canary(self, *, actor: Any, candidate_id: str, expected_active_id: str | None, share: float) -> None:
        """Activate the candidate for a share of runs INSIDE the caller's transaction: as `activate` (the candidate
        becomes the active version, StaleActivation when `expected_active_id` is no longer active), and the version
        it replaced stays live as the control for the other runs. NotImplementedError: the kind activates fully."""
        raise NotImplementedError(f"{self.label or self.key} candidates are activated for every run at once")

    def canary_state(self, parent_key: str) -> CanaryState | None:
        """The parent's canary, None when its active version is live for every run."""
        return None

    def set_canary_share(self, *, actor: Any, parent_key: str, share: float) -> None:
        """Change a running canary's share (0 < share < 1), in its own transaction, audited."""
        raise NotImplementedError

    def end_canary(self, *, actor: Any, parent_key: str) -> None:
        """The candidate is live for every run: the control is dropped (INSIDE the caller's transaction, audited).
        A rollback instead moves the active pointer back through reviews (a system rollback)."""
        raise NotImplementedError

    def arm_runs(self, parent_key: str, *, candidate_ref: str, control_ref: str, since: Any, after_id: int = 0,
                 limit: int = 5000) -> list[ArmRun]:  # fmt: skip
        """The production runs of the parent received since `since` with an id above `after_id` whose recorded
        revision is one of the two refs, oldest first, at most `limit` (one query)."""
        return []

    def ref_of(self, candidate_id: str) -> str:
        """What runs record and agents pin for this version (a digest, a content revision); "" when unknown."""
        return ""

    def certification_changed(self, parent_key: str) -> None:
        """Called inside the transaction that issued a certificate or changed a coverage flag of `parent_key`'s
        artifacts, so a kind whose agents' answers show them can refresh what it caches."""
        return None


_KINDS: dict[str, PromotableKind] = {}


class UnknownKind(LookupError):
    pass


def register_kind(kind: PromotableKind) -> PromotableKind:
    """Register (or re-register, as AppConfig.ready may run more than once) a kind under its key."""
    if not kind.key:
        raise ValueError("a promotable kind needs a key")
    if kind.approvals_required < 1:
        raise ValueError("a promotable kind needs at least one approval")
    _KINDS[kind.key] = kind
    return kind


def unregister_kind(key: str) -> None:
    _KINDS.pop(key, None)


def get_kind(key: str) -> PromotableKind:
    try:
        return _KINDS[key]
    except KeyError:
        raise UnknownKind(f"no promotable kind {key!r}; known: {', '.join(sorted(_KINDS)) or 'none'}") from None


def kinds() -> list[PromotableKind]:
    return [_KINDS[key] for key in sorted(_KINDS)]


# --- helpers for the kinds the owning apps register ------------------------------------------------------------------
def find_candidate[M: Model](queryset: QuerySet[M], candidate_id: str | None, what: str) -> M:
    """The row a candidate id names (an integer primary key as text), or UnknownCandidate."""
    pk = int_or_none(candidate_id)
    found = queryset.filter(pk=pk).first() if pk is not None else None
    if found is None:
        raise UnknownCandidate(f"no {what} {candidate_id}")
    return found


def move_active_version(
    *,
    actor: Any,
    parent_model: type[Model],
    parent_id: int,
    version: Model,
    expected_active_id: str | None,
    active_status: str,
    retired_status: str,
    verb: str,
) -> None:
    """The activation shared by kinds whose parent row holds `active_version` and `revision` and whose versions carry
    a status: lock the parent, check the expected active version (StaleActivation), retire the previous version,
    mark the new one active, move the pointer and bump the revision, and audit `verb` — inside the review's
    transaction."""
    from django.utils import timezone

    from accounts.services import audit_record

    parent = parent_model.objects.select_for_update().get(pk=parent_id)
    actual = str(parent.active_version_id) if parent.active_version_id else None
    if actual != expected_active_id:
        raise StaleActivation(parent_key=str(parent.pk), expected_active_id=expected_active_id, actual_active_id=actual)
    previous = parent.active_version_id
    versions = type(version).objects
    if previous is not None:
        versions.filter(pk=previous).update(status=retired_status)
    versions.filter(pk=version.pk).update(status=active_status)
    revision = parent.revision + 1
    parent_model.objects.filter(pk=parent.pk).update(
        active_version=version.pk, revision=revision, updated_at=timezone.now()
    )
    audit_record(
        actor=actor,
        verb=verb,
        target=parent,
        before={"active_version": previous, "revision": parent.revision},
        after={
            "active_version": version.pk,
            "number": version.number,
            "label": f"v{version.number}",
            "revision": revision,
        },
    )


def number_labels(queryset: QuerySet, candidate_ids: Iterable[str]) -> dict[str, str]:
    """`v<number>` of each version id found in `queryset` (rows with a `number`), in one query (none for no ids)."""
    pks = sorted({pk for pk in (int_or_none(i) for i in candidate_ids if i) if pk is not None})
    if not pks:
        return {}
    return {str(pk): f"v{number}" for pk, number in queryset.filter(pk__in=pks).values_list("pk", "number")}
