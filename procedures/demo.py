"""Demo procedures for `manage.py seed_demo`: the demo support runs mined into real candidates, replayed offline; the
review candidate (refund) also replayed live — the demo agent answers each held-out task with and without it, in
process — so it is certified with its repairs and breakages; and (a later step, once reviews are seeded) the
change-address procedure certified twice on one split with a policy of two decisions a split (so its split is
exhausted), activated through a review by rita and rob, then run by the agent under another model, so it is flagged
"not certified for claude-haiku-4-5".

The demo's held-out sets are a handful of runs: no interval says much on six pairs, so the demo procedures' policy
is non-inferiority with the bound off (margin 1), n ≥ 3, no net regression, no critical breakage (set once, audited,
like an operator would; the page shows it beside the certificate).

Only the demo's own runs (trajectories.demo's source) are mined and replayed on, whatever else is stored: a user's
runs of the same intents are theirs to mine (issue 24). Idempotent: mining the same runs again finds the identical
version (and leaves the procedure's mined-through mark alone), and a replay that already ran is left alone.
"""

from __future__ import annotations

from django.db import transaction

from accounts.services import Actor
from common.demo_seeding import SeedContext, demo_seeder
from trajectories.demo import DEMO_SOURCE

from . import errors
from .demo_agent import simulate_job
from .mining import services as mining_services
from .models import Procedure, ProcedureVersion, ReplayMode, ReplayRun, ReplayStatus, VersionStatus
from .promotable import KIND
from .replay.services import live as live_replay_services
from .replay.services import offline as offline_replay_services

DEMO_INTENTS = ("refund_request", "cancel_order", "change_address", "order_status")
REVIEW_INTENT = "refund_request"  # the version reviews' demo proposes (procedures.promotable.demo_candidate)
ACTIVE_INTENT = "change_address"  # certified twice on one split (exhausted), activated, then run under a new model
NEW_MODEL = "claude-haiku-4-5"  # the model the demo agent moves to after the activation
NEW_MODEL_RUNS = 8
DEMO_POLICY = {"mode": "non_inferiority", "margin": 1.0, "min_n": 3, "max_decisions": 20}


def _demo_policy(actor: Actor, procedure: Procedure, **fields) -> None:
    from uplift.selectors import policies
    from uplift.services import policy_set

    if not any(row.kind == KIND and row.parent_key == str(procedure.pk) for row in policies()):
        policy_set(actor=actor, kind=KIND, parent_key=str(procedure.pk), **{**DEMO_POLICY, **fields})


def answer_live_replay(replay: ReplayRun, *, actor: Actor, agent: Actor) -> ReplayRun:
    """Start a queued live replay, answer each of its jobs as the demo agent would (as `agent`: the claimant's
    token answers) and settle it — in process, so seeding needs no worker."""
    from trajectories import job_services

    replay = live_replay_services.replay_live_start(replay=replay, actor=actor)
    match = {"replay": [replay.pk]}
    while job := job_services.job_claim(
        actor=agent, kind=live_replay_services.REPLAY_JOB_KIND, worker="seed-demo", lease_seconds=300, match=match
    ):
        job_services.job_complete(actor=agent, job=job, run_items=[simulate_job(job.kind, job.payload)])
    return live_replay_services.replay_live_settle(replay=replay, actor=actor)


def _certify_live(version: ProcedureVersion, *, actor: Actor, agent: Actor | None, again: bool = False) -> str:
    """The version's live replay (one more on the same held-out runs when `again`), answered now."""
    if agent is None:
        return "not certified (no demo agent token)"
    wanted = 2 if again else 1
    procedure = Procedure.objects.get(pk=version.procedure_id)
    while ReplayRun.objects.filter(version=version, mode=ReplayMode.LIVE, status=ReplayStatus.DONE).count() < wanted:
        if procedure.active_version_id is not None:
            break  # measured against the active version (itself, once activated): the demo certifies before
        with transaction.atomic(durable=True):
            queued = ReplayRun.objects.filter(version=version, mode=ReplayMode.LIVE, status=ReplayStatus.QUEUED).first()
            if queued is None:
                from .replay.services.lifecycle import requeue_replays

                (queued,) = requeue_replays(
                    version, procedure, actor=actor, modes=[ReplayMode.LIVE], verb="replay.demo_live"
                )
        answer_live_replay(queued, actor=actor, agent=agent)
    from uplift.selectors import certificate_summary, latest_certificate

    summary = certificate_summary(latest_certificate(KIND, str(version.pk)))
    return summary["headline"] if summary else "not certified"


def seed_demo_procedures(*, actor: Actor, agent: Actor | None = None) -> list[str]:
    """Mine each demo intent from the demo runs and finish its offline replay now (the worker may not run yet); the
    review candidate also replayed live with and without it (certified). One line per intent."""
    lines = []
    for intent in DEMO_INTENTS:
        try:
            result = mining_services.procedure_mine(actor=actor, intent=intent, live=False, source=DEMO_SOURCE)
        except errors.MiningError as exc:
            lines.append(f"{intent}: not mined ({exc})")
            continue
        version = result.version
        for replay in version.replays.filter(mode=ReplayMode.OFFLINE, status=ReplayStatus.QUEUED):
            offline_replay_services.replay_offline_run(replay=replay, actor=actor)
        version.refresh_from_db()
        verb = "mined" if result.created else "already there"
        line = f"{intent}: v{version.number} {' → '.join(version.tools)} ({version.status}, {verb})"
        if intent == REVIEW_INTENT:
            _demo_policy(actor, version.procedure)
            line += "; " + _certify_live(version, actor=actor, agent=agent)
            version.refresh_from_db()
        lines.append(line)
    return lines


def demo_review_version(*, actor: Actor) -> ProcedureVersion | None:
    """The refund procedure's version learnt from the demo runs (mining them again finds it and writes nothing),
    when it is replayed and not active yet; None otherwise."""
    try:
        mined = mining_services.procedure_mine(actor=actor, intent=REVIEW_INTENT, live=False, source=DEMO_SOURCE)
    except errors.MiningError:
        return None
    version = mined.version
    return version if version.status in (VersionStatus.READY, VersionStatus.FAILED) else None


@demo_seeder("procedures", after=("runs", "agent-token"), needs=("runs",))
def seed_demo_procedures_step(ctx: SeedContext) -> str:
    """The seed_demo step (common.demo_seeding)."""
    return "procedures: " + "; ".join(seed_demo_procedures(actor=ctx.actor, agent=ctx.agent_actor))


def review_and_apply(users: dict, candidate: ProcedureVersion, rationale: str, **rollout) -> None:
    """otto proposes, rita and rob approve. The demo's held-out sets are a handful of runs, so a gate can fail on
    one outage: then the admin overrides it, with that reason, as an admin would (the review page shows both)."""
    from reviews import services as review_services

    request = review_services.promotion_propose(
        actor=Actor(user=users["otto"]), kind=KIND, candidate_id=str(candidate.pk), rationale=rationale, **rollout
    )
    if request.gate_passing is not True and "admin" in users:
        request = review_services.promotion_override(
            actor=Actor(user=users["admin"]),
            request=request,
            reason="The demo measures on a handful of held-out runs; one simulated outage fails its gate.",
        )
    for reviewer in ("rita", "rob"):
        request = review_services.judgment_submit(actor=Actor(user=users[reviewer]), request=request, verdict="approve")


def seed_demo_certification(*, actor: Actor, agent: Actor | None, users: dict) -> str:
    """change_address: two live certificates on one split whose policy allows two (exhausted), activated through a
    review (otto proposes, rita and rob approve), then runs under NEW_MODEL, and the coverage check (flagged)."""
    from reviews.errors import ReviewError
    from trajectories.demo import seed_runs_of_model
    from uplift.services import coverage_check

    try:
        version = mining_services.procedure_mine(
            actor=actor, intent=ACTIVE_INTENT, live=False, source=DEMO_SOURCE
        ).version
    except errors.MiningError as exc:
        return f"{ACTIVE_INTENT}: not mined ({exc})"
    procedure = version.procedure
    _demo_policy(actor, procedure, max_decisions=2)
    headline = _certify_live(version, actor=actor, agent=agent, again=True)
    procedure.refresh_from_db()
    if procedure.active_version_id is None and {"otto", "rita", "rob"} <= set(users):
        try:
            review_and_apply(users, version, "Certified twice on its held-out runs; the demo activates it.")
        except ReviewError as exc:
            return f"{ACTIVE_INTENT}: {headline}; not activated ({exc.message})"
        procedure.refresh_from_db()
    state = "active" if procedure.active_version_id == version.pk else "not activated (its gate fails)"
    added = seed_runs_of_model(ACTIVE_INTENT, model=NEW_MODEL, count=NEW_MODEL_RUNS, actor=actor)
    counts = coverage_check(actor=actor, kind=KIND)
    return (
        f"{ACTIVE_INTENT}: {headline}, its split exhausted after two decisions, {state}; {added} new runs under"
        f" {NEW_MODEL}; coverage: {counts['flagged']} flagged"
    )


@demo_seeder("certification", after=("reviews",), needs=("procedures", "users"))
def seed_demo_certification_step(ctx: SeedContext) -> str:
    """The seed_demo step (common.demo_seeding)."""
    return "certification: " + seed_demo_certification(actor=ctx.actor, agent=ctx.agent_actor, users=ctx.users)


WATCH_INTENTS = {"order_status": 0.5, "cancel_order": 0.5}  # intent → the canary's share in the demo
# Runs each arm makes under its version before the one look seeding takes: under the watch's minimum for the
# running canary (it goes on watching), over it for the one rolled back.
CANARY_RUNS = {"order_status": 20, "cancel_order": 40}


def _canary_version(actor: Actor, users: dict, intent: str, share: float) -> tuple[ProcedureVersion, str]:
    """The intent's v1 active (a review), then an amended v2 (a precondition added) replayed and live as a canary
    for `share` of runs (a review by otto, rita and rob with rollout canary)."""

    from .versions.services import procedure_version_amend

    v1 = mining_services.procedure_mine(actor=actor, intent=intent, live=False, source=DEMO_SOURCE).version
    procedure = v1.procedure

    def review(candidate: ProcedureVersion, **rollout) -> None:
        review_and_apply(users, candidate, "The demo's watch after activation.", **rollout)

    _demo_policy(actor, procedure, min_n=1)  # one or two held-out runs in the demo
    if procedure.active_version_id is None:
        review(v1)
    amended = procedure_version_amend(
        actor=Actor(user=users["otto"]), version=v1, preconditions=["The customer is signed in."], failure_exits=[]
    ).version
    for replay in amended.replays.filter(mode=ReplayMode.OFFLINE, status=ReplayStatus.QUEUED):
        offline_replay_services.replay_offline_run(replay=replay, actor=actor)
    procedure.refresh_from_db()
    if procedure.active_version_id == v1.pk:
        review(amended, rollout="canary", canary_share=share)
    return amended, procedure.active_version.content_revision if procedure.active_version else ""


def seed_demo_watches(*, actor: Actor, users: dict) -> str:
    """order_status: a running canary (v2 as good as v1); cancel_order: a canary the watch rolled back (v2 worse).
    The agent's runs under each arm are demo runs naming the revision they followed (stored again if deleted);
    one look each, in process, when the watch is new."""
    from trajectories.demo import seed_runs_of_revision
    from uplift import watch_services
    from uplift.selectors import first_watch_of

    if not {"otto", "rita", "rob"} <= set(users):
        return "no demo users"
    lines = []
    for intent, share in WATCH_INTENTS.items():
        watch = first_watch_of(KIND, _procedure_keys(intent))
        new = watch is None
        if new:
            try:
                _canary_version(actor, users, intent, share)
            except Exception as exc:  # the demo goes on without this watch
                lines.append(f"{intent}: no canary ({exc})")
                continue
            watch = first_watch_of(KIND, _procedure_keys(intent))
        if watch is None:
            lines.append(f"{intent}: no watch")
            continue
        count, worse = CANARY_RUNS[intent], intent == "cancel_order"
        arms = ((watch.control_id, count // 10), (watch.candidate_id, count * 3 // 4 if worse else count // 10))
        for version_id, failing in arms:
            revision = ProcedureVersion.objects.get(pk=int(version_id)).content_revision
            seed_runs_of_revision(intent, revision, count=count, failing=failing, actor=actor)
        if new and watch.status == "running":
            watch = watch_services.watch_look(watch_id=watch.pk, worker="seed-demo") or watch
        lines.append(f"{intent}: watch #{watch.pk} {watch.get_status_display()}{'' if new else ' (already there)'}")
    return "; ".join(lines)


def _procedure_keys(intent: str) -> list[str]:
    from .mining import intent_key

    return [str(pk) for pk in Procedure.objects.filter(intent=intent_key(intent)).values_list("pk", flat=True)]


@demo_seeder("watches", after=("certification",), needs=("procedures", "users"))
def seed_demo_watches_step(ctx: SeedContext) -> str:
    """The seed_demo step (common.demo_seeding)."""
    return "watches: " + seed_demo_watches(actor=ctx.actor, users=ctx.users)
