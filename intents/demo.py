"""Demo data of intents for `manage.py seed_demo`: proposals, a reviewed taxonomy, a novel intent and drift.

Everything goes through the real services, with the scripted stand-in model when no model key is set:

1. otto (operator) proposes intents for every demo run no proposal covered yet; the batches run in this process
   (no worker needed), as graphs.evolution.demo.run_inline does for evolution rounds.
2. rita and rob (reviewers) judge a few of those candidates valid; otto drafts taxonomy v1 and proposes it, rita
   and rob approve it, so it is active. Then both merge a hindsight candidate of a failed refund run into the
   refund intent and disagree on the abandoned order-status run (left undecided); v2 is drafted and approved the
   same way.
3. The demo agent (otto's token) posts its own labels for a few runs through the API's service, one of them a
   label the taxonomy does not know ("report a damaged item").
4. Two window analyses: the model's candidates, then the agent's labels (windows on the candidates' stored time,
   bounded around the seeded rows); the second raises the novelty alert. A drift report compares them.

Idempotent: each part looks at what is stored and does only what is missing, so a second run writes nothing.
Bounded to the demo (issue 24): it proposes for the demo source's runs only, works only proposal runs over demo
runs, judges only candidates of demo runs, drafts a taxonomy version only when every change in it is one the demo
scripts (VALID_RUNS, MERGE_RUN), and analyses a window only when every candidate in it is the demo's; the user's
runs, proposals, candidates and judgments are never read into the demo, however many there are.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.db.models import Exists, OuterRef, QuerySet

from accounts.services import Actor
from common.demo_seeding import SeedContext, demo_seeder
from reviews.selectors import has_judged, latest_request_for
from reviews.services import judgment_submit
from trajectories.demo import DEMO_SOURCE

from . import selectors, services
from .core import normalize_intent
from .models import (
    IntentBatchRun,
    IntentCandidateRecord,
    IntentJudgment,
    IntentProposalRun,
    IntentTaxonomy,
    TaxonomyVersion,
)
from .taxonomy.services import (
    KIND,
    Plan,
    active_version,
    intent_judgment_submit,
    taxonomy_draft,
    taxonomy_preview,
    taxonomy_propose,
)
from .windows import services as windows
from .windows.models import DriftReport, NoveltyAlert, WindowAnalysis
from .windows.services import WindowRefused

if TYPE_CHECKING:  # annotations only: other apps read rows through selectors (issue 14)
    from accounts.models import User

WORKER = "seed_demo"
BATCH_SIZE = 6
MAX_STEPS = 500

# Declared candidates both reviewers judge valid: two runs of each demo intent (external ids of trajectories.demo).
VALID_RUNS = ("demo-001", "demo-002", "demo-019", "demo-020", "demo-026", "demo-027", "demo-033", "demo-034")
# The hindsight candidate of a refund denied after 41 days: merged into the refund intent by both reviewers.
MERGE_RUN = "demo-016"
MERGE_INTO = "refund_request"
# The abandoned order-status run (one lookup, outcome unknown): rita says invalid, rob valid, so it stays undecided.
SPLIT_RUN = "demo-036"

NOVEL_LABEL = "report a damaged item"
# What the demo agent's own labeler posts (run, label, first step, last step): familiar intents read from the
# deciding steps, and one new reading of a refund run.
AGENT_LABELS = (
    ("demo-003", NOVEL_LABEL, 0, 0),
    ("demo-004", "refund_request", 2, 2),
    ("demo-028", "cancel_order", 1, 2),
    ("demo-029", "cancel_order", 1, 2),
    ("demo-030", "cancel_order", 1, 2),
    ("demo-031", "cancel_order", 1, 2),
    ("demo-035", "order_status", 0, 1),
)


def trajectory_id(external_id: str) -> str:
    return f"{DEMO_SOURCE}:{external_id}"


# Every demo trajectory id starts so, quotes included, in a candidate's evidence stored as JSON text.
DEMO_EVIDENCE = f'"{DEMO_SOURCE}:'


@dataclass
class DemoIntents:
    proposal: IntentProposalRun | None = None
    proposed_now: bool = False
    judgments_now: int = 0
    taxonomy: TaxonomyVersion | None = None
    versions_now: int = 0
    agent_candidates_now: int = 0
    analyses: tuple[WindowAnalysis, ...] = ()
    analyses_now: int = 0
    drift: DriftReport | None = None
    drift_now: bool = False
    alerts: int = 0


# -- 1. proposals -----------------------------------------------------------------------------------------------------
def run_inline(run: IntentProposalRun, *, worker: str = WORKER, max_steps: int = MAX_STEPS) -> IntentProposalRun:
    """Work every batch of `run` in this process (seeding, tests). The steps also enqueue themselves on commit;
    a worker that picks one up later finds the run finished and does nothing."""
    for _ in range(max_steps):
        run.refresh_from_db()
        if run.is_finished:
            return run
        services.intent_proposal_step(run_id=run.pk, worker=worker)
    run.refresh_from_db()
    return run


def demo_proposals(runs: QuerySet[IntentProposalRun]) -> QuerySet[IntentProposalRun]:
    """The proposal runs of `runs` over demo runs only: one of their runs at least is a demo run, none is not."""
    members = IntentBatchRun.objects.filter(batch__run=OuterRef("pk"))
    return runs.filter(
        Exists(members.filter(trajectory_run__source=DEMO_SOURCE)),
        ~Exists(members.exclude(trajectory_run__source=DEMO_SOURCE)),
    )


def seed_proposals(*, actor: Actor) -> tuple[IntentProposalRun | None, bool]:
    """Finish an open demo proposal run nobody holds (an earlier seeding stopped in it), then propose for the demo
    runs no proposal covered yet."""
    for run in demo_proposals(IntentProposalRun.objects.filter(status__in=IntentProposalRun.OPEN, lease_owner="")):
        run_inline(run)
    created = False
    if selectors.runs_for_selection(only_new=True, source=DEMO_SOURCE).exists():
        started = services.intent_proposal_start(
            actor=actor, only_new=True, source=DEMO_SOURCE, batch_size=BATCH_SIZE, enqueue=False
        )
        run_inline(started)
        created = True
    succeeded = IntentProposalRun.objects.filter(status=IntentProposalRun.Status.SUCCEEDED)
    return demo_proposals(succeeded).order_by("-id").first(), created


# -- 2. the reviewed taxonomy -----------------------------------------------------------------------------------------
def demo_candidates() -> QuerySet[IntentCandidateRecord]:
    """Candidates whose evidence names a demo run (the model's, and the demo agent's labels)."""
    return IntentCandidateRecord.objects.filter(evidence__icontains=DEMO_EVIDENCE)


class ModelCandidates:
    """The model's candidates of the demo runs, read once (one query): by kind and run, the newest whose evidence
    is that one run."""

    def __init__(self) -> None:
        self.by_run: dict[tuple[str, str], IntentCandidateRecord] = {}
        self.rows = list(demo_candidates().filter(source=IntentCandidateRecord.MODEL_SOURCE).order_by("-id"))
        for record in self.rows:
            ids = {row.get("trajectory_id") for row in record.evidence}
            if len(ids) == 1:
                self.by_run.setdefault((record.kind, ids.pop()), record)

    def get(self, external_id: str, kind: str) -> IntentCandidateRecord | None:
        return self.by_run.get((kind, trajectory_id(external_id)))

    def planned(self) -> set[str]:
        """The candidate ids the demo's own taxonomy is drafted from: the declared candidates of VALID_RUNS and the
        hindsight candidate of MERGE_RUN."""
        records = [self.get(run, "declared") for run in VALID_RUNS] + [self.get(MERGE_RUN, "hindsight")]
        return {record.candidate_id for record in records if record is not None}


def changes_only(plan: Plan, planned: set[str]) -> bool:
    """True when the draft `plan` changes something and every change places one of the `planned` candidates: the
    demo never drafts (nor has rita and rob approve) a version holding a candidate someone judged themselves, the
    user's own or one of the demo's that the tour invites them to judge."""
    ids = set()
    for change in plan.changes:
        if change["change"] not in ("added", "merged"):
            return False
        ids.update(change.get("candidate_ids") or [change.get("candidate_id")])
    return bool(ids) and ids <= planned


def _judge(reviewer: User, record: IntentCandidateRecord | None, verdict: str, target: str = "", comment: str = ""):
    if record is None:
        return 0
    if IntentJudgment.objects.filter(candidate__candidate_id=record.candidate_id, reviewer=reviewer).exists():
        return 0
    intent_judgment_submit(
        actor=Actor(user=reviewer), candidate=record, verdict=verdict, merge_target=target, comment=comment
    )
    return 1


def _activate(version: TaxonomyVersion, *, proposer: User, approvers: tuple[User, ...], rationale: str) -> None:
    """Propose `version` (unless a request exists) and approve it with each approver who has not judged it."""
    if IntentTaxonomy.objects.filter(pk=version.taxonomy_id, active_version_id=version.pk).exists():
        return
    request = latest_request_for(kind=KIND, candidate_id=str(version.pk))
    if request is None:
        request = taxonomy_propose(actor=Actor(user=proposer), version=version, rationale=rationale)
    for approver in approvers:
        request.refresh_from_db()
        if not request.is_pending or has_judged(request, approver):
            continue
        judgment_submit(actor=Actor(user=approver), request=request, verdict="approve")


def _intent_named(version: TaxonomyVersion, label: str) -> str:
    key = normalize_intent(label)
    return next((row["intent_id"] for row in version.intents if row["normalized"] == key), "")


def seed_taxonomy(*, users: dict[str, User], candidates: ModelCandidates | None = None) -> tuple[int, int]:
    """Judgments by rita and rob and the versions they approve; (judgments written, versions drafted)."""
    rita, rob, otto = users["rita"], users["rob"], users["otto"]
    judged = drafted = 0
    if not (rita.is_reviewer and rob.is_reviewer and (otto.is_operator or otto.is_reviewer)):
        return judged, drafted  # demo users whose roles were changed: no reviewed taxonomy
    candidates = candidates or ModelCandidates()
    for external_id in VALID_RUNS:
        record = candidates.get(external_id, "declared")
        judged += _judge(rita, record, "valid") + _judge(rob, record, "valid")
    if active_version() is None:
        if not changes_only(taxonomy_preview(), candidates.planned()):
            return judged, drafted
        result = taxonomy_draft(actor=Actor(user=otto))
        drafted += result.created
        _activate(
            result.version,
            proposer=otto,
            approvers=(rita, rob),
            rationale="The four support intents, each judged valid by two reviewers on two runs.",
        )
    active = active_version()
    target = _intent_named(active, MERGE_INTO) if active else ""
    if target:
        hindsight = candidates.get(MERGE_RUN, "hindsight")
        comment = "The same request seen from its failure: one refund intent."
        judged += _judge(rita, hindsight, "merge", target, comment) + _judge(rob, hindsight, "merge", target, comment)
    split = candidates.get(SPLIT_RUN, "declared")
    judged += _judge(rita, split, "invalid", comment="The customer left after one lookup: no intent is shown.")
    judged += _judge(rob, split, "valid", comment="Asking where an order is, as declared.")
    if active is not None and changes_only(taxonomy_preview(), candidates.planned()):
        result = taxonomy_draft(actor=Actor(user=otto))
        drafted += result.created
        _activate(
            result.version,
            proposer=otto,
            approvers=(rita, rob),
            rationale="Reviewers merged a hindsight reading of a failed refund into the refund intent.",
        )
    return judged, drafted


# -- 3. the agent's own labels ----------------------------------------------------------------------------------------
def agent_label_rows() -> list[dict]:
    return [
        {
            "intent": label,
            "kind": "inferred",
            "evidence": [{"trajectory_id": trajectory_id(external_id), "start": start, "end": end}],
            "limitations": ["posted by the demo agent's own labeler"],
        }
        for external_id, label, start, end in AGENT_LABELS
    ]


def seed_agent_labels(*, actor: Actor) -> int:
    source = services.client_source(actor)
    if IntentCandidateRecord.objects.filter(source=source, normalized=normalize_intent(NOVEL_LABEL)).exists():
        return 0
    return len(services.intent_candidates_submit(actor=actor, rows=agent_label_rows()).created)


# -- 4. windows, novelty and drift ------------------------------------------------------------------------------------
def demo_windows(
    *, agent: Actor, candidates: ModelCandidates | None = None
) -> tuple[tuple[datetime, datetime], tuple[datetime, datetime]] | None:
    """The two windows around the seeded candidates: from the first model candidate of the demo runs to the first
    of the agent's labels, then to a second after its last. None until both exist."""
    labels = demo_candidates().filter(source=services.client_source(agent))
    first_label = labels.order_by("created_at").values_list("created_at", flat=True).first()
    last_label = labels.order_by("-created_at").values_list("created_at", flat=True).first()
    if first_label is None:
        return None
    rows = (candidates or ModelCandidates()).rows
    first_model = min((row.created_at for row in rows if row.created_at < first_label), default=None)
    if first_model is None:
        return None
    start = first_model.replace(microsecond=0)
    end = last_label.replace(microsecond=0) + timedelta(seconds=1)
    return (start, first_label), (first_label, end)


def only_demo_candidates_in(start: datetime, end: datetime, *, agent: Actor) -> bool:
    """True when every candidate stored in [start, end) is the model's or the demo agent's, of demo runs."""
    stored = IntentCandidateRecord.objects.filter(created_at__gte=start, created_at__lt=end)
    ours = demo_candidates().filter(
        source__in=(IntentCandidateRecord.MODEL_SOURCE, services.client_source(agent)),
        created_at__gte=start,
        created_at__lt=end,
    )
    return not stored.exclude(pk__in=ours.values("pk")).exists()


def _analysis(*, actor: Actor, agent: Actor, bounds: tuple[datetime, datetime]) -> tuple[WindowAnalysis | None, bool]:
    """The demo's analysis of one window, made now when missing; None when the window holds others' candidates
    too (the demo analyses only its own) or the service refuses it."""
    start, end = bounds
    existing = (
        WindowAnalysis.objects.filter(window_start=start, window_end=end, created_by=actor.user).order_by("id").first()
    )
    if existing is not None:
        windows.novelty_alerts_restore(actor=actor, analysis=existing)  # an alert of it someone deleted
        return existing, False
    if not only_demo_candidates_in(start, end, agent=agent):
        return None, False
    try:
        return windows.window_analyze(actor=actor, start=start, end=end), True
    except WindowRefused:
        return None, False


def seed_windows(
    *, operator: Actor, agent: Actor, candidates: ModelCandidates | None = None
) -> tuple[tuple[WindowAnalysis, ...], int, DriftReport | None, bool]:
    bounds = demo_windows(agent=agent, candidates=candidates)
    if bounds is None:
        return (), 0, None, False
    made = 0
    analyses = []
    for window in bounds:
        analysis, created = _analysis(actor=operator, agent=agent, bounds=window)
        if analysis is None:
            return tuple(analyses), made, None, False
        analyses.append(analysis)
        made += created
    before, after = analyses
    drift = windows.drift_compare(actor=operator, before=before, after=after, matching=DriftReport.Matching.MEDOID)
    return tuple(analyses), made, drift, bool(drift.created_now)


def seed_demo_intents(*, users: dict[str, User], agent: Actor | None = None) -> DemoIntents:
    operator = Actor(user=users["otto"])
    agent = agent or operator
    result = DemoIntents()
    result.proposal, result.proposed_now = seed_proposals(actor=operator)
    candidates = ModelCandidates()  # the one read of the model's candidates of demo runs
    result.judgments_now, result.versions_now = seed_taxonomy(users=users, candidates=candidates)
    result.taxonomy = active_version()
    result.agent_candidates_now = seed_agent_labels(actor=agent)
    result.analyses, result.analyses_now, result.drift, result.drift_now = seed_windows(
        operator=operator, agent=agent, candidates=candidates
    )
    result.alerts = NoveltyAlert.objects.filter(analysis__in=result.analyses).count()
    return result


def _now_or_there(now: bool) -> str:
    return "created" if now else "already there"


@demo_seeder("intents", after=("reviews",), needs=("users", "runs"))
def seed_demo_intents_step(ctx: SeedContext) -> str:
    """The seed_demo step (common.demo_seeding): one summary line."""
    result = seed_demo_intents(users=ctx.users, agent=ctx.agent_actor)
    parts = []
    if result.proposal is not None:
        run = result.proposal
        parts.append(
            f"proposal run {run.pk} {_now_or_there(result.proposed_now)} "
            f"({run.runs_total} runs, {run.candidates_count} candidates)"
        )
    else:
        parts.append("no proposal run")
    if result.taxonomy is not None:
        version = result.taxonomy
        parts.append(
            f"taxonomy v{version.number} active ({len(version.intents)} intents; "
            f"{result.judgments_now} judgments and {result.versions_now} versions written now)"
        )
    else:
        parts.append("no active taxonomy")
    parts.append(
        f"{result.agent_candidates_now} agent labels posted"
        if result.agent_candidates_now
        else "agent labels already there"
    )
    if result.analyses:
        parts.append(
            f"{len(result.analyses)} window analyses ({result.analyses_now} new), {result.alerts} novelty alert(s)"
        )
    if result.drift is not None:
        parts.append(f"drift report {result.drift.pk} {_now_or_there(result.drift_now)} (JSD {result.drift.jsd:.2f})")
    return "intents: " + "; ".join(parts)
