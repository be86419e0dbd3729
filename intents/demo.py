"""Demo data of intents for `manage.py seed_demo`: proposals, a reviewed taxonomy, a novel intent and drift.

Everything goes through the real services, with the scripted stand-in model when no model key is set:

1. otto (operator) proposes intents for every run no proposal covered yet; the batches run in this process (no
   worker needed), as graphs.evolution.demo.run_inline does for evolution rounds.
2. rita and rob (reviewers) judge a few of those candidates valid; otto drafts taxonomy v1 and proposes it, rita
   and rob approve it, so it is active. Then both merge a hindsight candidate of a failed refund run into the
   refund intent and disagree on the abandoned order-status run (left undecided); v2 is drafted and approved the
   same way.
3. The demo agent (otto's token) posts its own labels for a few runs through the API's service, one of them a
   label the taxonomy does not know ("report a damaged item").
4. Two window analyses: the model's candidates, then the agent's labels (windows on the candidates' stored time,
   bounded around the seeded rows); the second raises the novelty alert. A drift report compares them.

Idempotent: each part looks at what is stored and does only what is missing, so a second run writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from accounts.services import Actor
from config.demo_seeding import SeedContext, demo_seeder
from reviews.selectors import has_judged, latest_request_for
from reviews.services import judgment_submit
from trajectories.demo import DEMO_SOURCE

from . import selectors, services, windows
from .core import normalize_intent
from .models import IntentCandidateRecord, IntentJudgment, IntentProposalRun, IntentTaxonomy, TaxonomyVersion
from .taxonomy import KIND, active_version, intent_judgment_submit, taxonomy_draft, taxonomy_preview, taxonomy_propose
from .window_models import DriftReport, NoveltyAlert, WindowAnalysis

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


def seed_proposals(*, actor: Actor) -> tuple[IntentProposalRun | None, bool]:
    """Finish any open proposal run nobody holds, then propose for the runs no proposal covered yet."""
    for run in IntentProposalRun.objects.filter(status__in=IntentProposalRun.OPEN, lease_owner=""):
        run_inline(run)
    created = False
    if selectors.runs_for_selection(only_new=True).exists():
        started = services.intent_proposal_start(actor=actor, only_new=True, batch_size=BATCH_SIZE, enqueue=False)
        run_inline(started)
        created = True
    latest = IntentProposalRun.objects.filter(status=IntentProposalRun.Status.SUCCEEDED).order_by("-id").first()
    return latest, created


# -- 2. the reviewed taxonomy -----------------------------------------------------------------------------------------
def _model_candidate(external_id: str, kind: str) -> IntentCandidateRecord | None:
    wanted = trajectory_id(external_id)
    for record in IntentCandidateRecord.objects.filter(source=IntentCandidateRecord.MODEL_SOURCE, kind=kind):
        if {row["trajectory_id"] for row in record.evidence} == {wanted}:
            return record
    return None


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


def seed_taxonomy(*, users: dict[str, User]) -> tuple[int, int]:
    """Judgments by rita and rob and the versions they approve; (judgments written, versions drafted)."""
    rita, rob, otto = users["rita"], users["rob"], users["otto"]
    judged = drafted = 0
    if not (rita.is_reviewer and rob.is_reviewer and (otto.is_operator or otto.is_reviewer)):
        return judged, drafted  # demo users whose roles were changed: no reviewed taxonomy
    for external_id in VALID_RUNS:
        record = _model_candidate(external_id, "declared")
        judged += _judge(rita, record, "valid") + _judge(rob, record, "valid")
    if active_version() is None:
        if not taxonomy_preview().changes:
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
        hindsight = _model_candidate(MERGE_RUN, "hindsight")
        comment = "The same request seen from its failure: one refund intent."
        judged += _judge(rita, hindsight, "merge", target, comment) + _judge(rob, hindsight, "merge", target, comment)
    split = _model_candidate(SPLIT_RUN, "declared")
    judged += _judge(rita, split, "invalid", comment="The customer left after one lookup: no intent is shown.")
    judged += _judge(rob, split, "valid", comment="Asking where an order is, as declared.")
    if active is not None and taxonomy_preview().changes:
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
def demo_windows(*, agent: Actor) -> tuple[tuple[datetime, datetime], tuple[datetime, datetime]] | None:
    """The two windows around the seeded candidates: from the first model candidate to the first of the agent's
    labels, then to a second after its last. None until both exist."""
    labels = IntentCandidateRecord.objects.filter(source=services.client_source(agent))
    first_label = labels.order_by("created_at").values_list("created_at", flat=True).first()
    last_label = labels.order_by("-created_at").values_list("created_at", flat=True).first()
    first_model = (
        IntentCandidateRecord.objects.filter(source=IntentCandidateRecord.MODEL_SOURCE, created_at__lt=first_label)
        .order_by("created_at")
        .values_list("created_at", flat=True)
        .first()
        if first_label
        else None
    )
    if first_model is None:
        return None
    start = first_model.replace(microsecond=0)
    end = last_label.replace(microsecond=0) + timedelta(seconds=1)
    return (start, first_label), (first_label, end)


def _analysis(*, actor: Actor, bounds: tuple[datetime, datetime]) -> tuple[WindowAnalysis, bool]:
    start, end = bounds
    existing = (
        WindowAnalysis.objects.filter(window_start=start, window_end=end, created_by=actor.user).order_by("id").first()
    )
    if existing is not None:
        return existing, False
    return windows.window_analyze(actor=actor, start=start, end=end), True


def seed_windows(*, operator: Actor, agent: Actor) -> tuple[tuple[WindowAnalysis, ...], int, DriftReport | None, bool]:
    bounds = demo_windows(agent=agent)
    if bounds is None:
        return (), 0, None, False
    made = 0
    analyses = []
    for window in bounds:
        analysis, created = _analysis(actor=operator, bounds=window)
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
    result.judgments_now, result.versions_now = seed_taxonomy(users=users)
    result.taxonomy = active_version()
    result.agent_candidates_now = seed_agent_labels(actor=agent)
    result.analyses, result.analyses_now, result.drift, result.drift_now = seed_windows(operator=operator, agent=agent)
    result.alerts = NoveltyAlert.objects.filter(analysis__in=result.analyses).count()
    return result


def _now_or_there(now: bool) -> str:
    return "created" if now else "already there"


@demo_seeder("intents", after=("runs", "reviews"))
def seed_demo_intents_step(ctx: SeedContext) -> str:
    """The seed_demo step (config.demo_seeding): one summary line."""
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
