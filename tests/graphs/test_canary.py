"""A graph revision live as a canary (issue 27, item 1): the registry hooks of graphs.promotable, the arm each
per-step call is served (uplift.core.canary over the workspace card: no query), pins, garbage headers, audit, and the
runs of each arm."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import transaction
from django.test import TestCase
from django.utils import timezone

from accounts.models import AuditEvent
from graphs import services
from graphs.core import Graph
from graphs.models import Revision, Workspace
from reviews.registry import StaleActivation, get_kind
from tests.factories import user_with
from tests.graphs.factories import SYSTEM, make_demo_workspace, make_workspace
from tests.helpers.graphs import big_graph
from tests.promote import promote_graph_revision
from trajectories.choices import EVALUATION_SOURCE
from uplift.core.canary import arm_for, position

pytestmark = pytest.mark.django_db

BASE = "/api/v1/graphs"
SLUG = "two-hop-qa"
ACTIVE = f"{BASE}/{SLUG}/active"
GUIDANCE = f"{BASE}/{SLUG}/guidance"
ROOT = Path(__file__).resolve().parents[2]
KIND = get_kind("graph_revision")


@dataclass
class Canary:
    workspace: Workspace
    candidate: Revision
    control: Revision


def start(revision: Revision, *, expected: Revision | None, share: float) -> None:
    with TestCase.captureOnCommitCallbacks(execute=True), transaction.atomic():
        KIND.start_canary(
            actor=SYSTEM,
            candidate_id=str(revision.pk),
            expected_active_id=str(expected.pk) if expected else None,
            share=share,
        )


def end(slug: str = SLUG) -> None:
    with TestCase.captureOnCommitCallbacks(execute=True), transaction.atomic():
        KIND.end_canary(actor=SYSTEM, parent_key=slug)


def set_share(share: float, slug: str = SLUG) -> None:
    with TestCase.captureOnCommitCallbacks(execute=True):
        KIND.set_canary_share(actor=SYSTEM, parent_key=slug, share=share)


@pytest.fixture
def reader(operator, make_token):
    return make_token(operator, "graphs:read", "graphs:guide")


@pytest.fixture
def canary() -> Canary:
    """two-hop-qa: #1 (the five-node graph) active, then #2 (a three-tool chain) a canary on half the runs."""
    workspace = make_demo_workspace()
    control = workspace.active_revision
    candidate = services.graph_append_accepted(
        actor=SYSTEM, workspace=workspace, graph=big_graph(3), expected_head=control.digest, meta={"iteration": 2}
    )
    start(candidate, expected=control, share=0.5)
    workspace.refresh_from_db()
    return Canary(workspace, candidate, control)


def key_where(test, start_at: int = 0) -> str:
    """The first run key `run-N` whose place for two-hop-qa passes `test`."""
    for n in range(start_at, start_at + 10_000):
        if test(position(SLUG, f"run-{n}")):
            return f"run-{n}"
    raise AssertionError("no such key")


CANARY_KEY = key_where(lambda u: u < 0.5)
CONTROL_KEY = key_where(lambda u: u >= 0.5)


def get_active(api_client, token, **headers):
    return api_client.get(ACTIVE, token=token, **headers)


def guide(api_client, token, **headers):
    payload = {"query": "what next?", "steps": [{"action": "t1"}], "mode": "raw_subgraph"}
    return api_client.post(GUIDANCE, payload, token=token, **headers)


# -- the registry hooks ----------------------------------------------------------------------------------------------


def test_start_canary_moves_the_pointer_and_keeps_the_control(canary):
    workspace = canary.workspace
    assert workspace.active_revision_id == canary.candidate.pk
    assert workspace.canary_control_id == canary.control.pk and workspace.canary_share == 0.5
    state = KIND.canary_state(SLUG)
    assert (state.candidate_id, state.control_id, state.share) == (
        str(canary.candidate.pk),
        str(canary.control.pk),
        0.5,
    )
    assert (state.candidate_ref, state.control_ref) == (canary.candidate.digest, canary.control.digest)
    assert KIND.ref_of(str(canary.candidate.pk)) == canary.candidate.digest
    assert KIND.ref_of("999999") == "" and KIND.ref_of("nope") == ""
    assert KIND.current_active(SLUG) == str(canary.candidate.pk)
    verbs = list(AuditEvent.objects.filter(target_id=str(workspace.pk)).values_list("verb", flat=True).order_by("id"))
    assert verbs[-2:] == ["workspace.set_active_revision", "workspace.canary_start"]
    started = AuditEvent.objects.filter(verb="workspace.canary_start").get()
    assert started.after["control"] == canary.control.pk and started.after["share"] == 0.5


def test_a_stale_expected_revision_refuses_the_canary_and_changes_nothing(canary):
    other = services.graph_append_accepted(
        actor=SYSTEM, workspace=canary.workspace, graph=big_graph(4), expected_head=canary.candidate.digest
    )
    with pytest.raises(StaleActivation):
        start(other, expected=canary.control, share=0.2)  # the control is no longer the active revision
    workspace = Workspace.objects.get(pk=canary.workspace.pk)
    assert (workspace.active_revision_id, workspace.canary_control_id, workspace.canary_share) == (
        canary.candidate.pk,
        canary.control.pk,
        0.5,
    )


@pytest.mark.parametrize("share", [0, 1, -0.1, 1.5, math.nan, math.inf, True, "0.5", None])
def test_a_share_outside_zero_one_is_refused_with_a_reason(share):
    workspace = make_demo_workspace()
    skeleton = Revision.objects.get(workspace=workspace, kind=Revision.Kind.GRAPH, seq=0)
    with pytest.raises(ValueError, match="share"):
        start(skeleton, expected=workspace.active_revision, share=share)
    workspace.refresh_from_db()
    assert workspace.active_revision.seq == 1 and workspace.canary_control_id is None


def test_a_workspace_with_no_active_revision_cannot_start_a_canary():
    seeded = services.workspace_create(actor=SYSTEM, slug="bare", activate=False)
    with pytest.raises(ValueError, match="no active revision"):
        start(seeded.revision, expected=None, share=0.1)
    assert Workspace.objects.get(slug="bare").active_revision_id is None


def test_a_canary_of_the_same_graph_is_refused():
    workspace = make_workspace("same")
    active = workspace.active_revision
    twin = services.graph_append_accepted(
        actor=SYSTEM, workspace=workspace, graph=Graph.from_document(active.document),
        expected_head=active.digest,
    )  # fmt: skip
    with pytest.raises(ValueError, match="same graph"):
        start(twin, expected=active, share=0.1)


def test_set_canary_share_is_audited_and_refused_without_a_canary_or_outside_zero_one(canary):
    set_share(0.2)
    event = AuditEvent.objects.get(verb="workspace.canary_share")
    assert (event.before, event.after) == ({"share": 0.5}, {"share": 0.2})
    assert KIND.canary_state(SLUG).share == 0.2
    for share in (0, 1, 2, math.nan):
        with pytest.raises(ValueError, match="share"):
            set_share(share)
    end()
    with pytest.raises(ValueError, match="no canary"):
        set_share(0.3)
    with pytest.raises(ValueError, match="no workspace"):
        set_share(0.3, slug="nowhere")
    assert AuditEvent.objects.filter(verb="workspace.canary_share").count() == 1


def test_end_canary_is_audited_and_a_second_end_writes_nothing(canary):
    end()
    workspace = Workspace.objects.get(pk=canary.workspace.pk)
    assert workspace.canary_control_id is None and workspace.canary_share == 0
    assert workspace.active_revision_id == canary.candidate.pk
    assert KIND.canary_state(SLUG) is None
    event = AuditEvent.objects.get(verb="workspace.canary_end")
    assert event.before == {"control": canary.control.pk, "share": 0.5}
    end()
    assert AuditEvent.objects.filter(verb="workspace.canary_end").count() == 1


def test_a_full_activation_ends_the_canary(canary):
    promote_graph_revision(canary.control)  # a rollback through reviews
    workspace = Workspace.objects.get(pk=canary.workspace.pk)
    assert workspace.active_revision_id == canary.control.pk and workspace.canary_control_id is None
    moved = AuditEvent.objects.filter(verb="workspace.set_active_revision").order_by("-id").first()
    assert moved.before["canary"] == {"control": canary.control.pk, "share": 0.5}


# -- per-step serving ------------------------------------------------------------------------------------------------


def test_a_run_key_gets_the_same_arm_on_every_call_with_its_own_etag_and_304(api_client, reader, canary):
    from graphs import cache

    arms = {CANARY_KEY: canary.candidate, CONTROL_KEY: canary.control}
    for key, revision in arms.items():
        for _ in range(3):
            cache.clear_local()  # as a fresh process would read it: the card from the shared cache
            response = get_active(api_client, reader, **{"X-Waymark-Run": key})
            assert response.status_code == 200
            assert response["ETag"] == f'"{revision.digest}"'
            assert response["X-Waymark-Revision"] == str(revision.seq)
            assert response["Vary"] == "X-Waymark-Run, X-Waymark-Revision"
            body = response.json()
            assert (body["seq"], body["digest"]) == (revision.seq, revision.digest)
        same = get_active(api_client, reader, **{"X-Waymark-Run": key, "If-None-Match": f'"{revision.digest}"'})
        assert same.status_code == 304 and same["ETag"] == f'"{revision.digest}"'
        other = next(r for r in arms.values() if r.pk != revision.pk)
        changed = get_active(api_client, reader, **{"X-Waymark-Run": key, "If-None-Match": f'"{other.digest}"'})
        assert changed.status_code == 200 and changed["ETag"] == f'"{revision.digest}"'


def test_the_assignment_is_the_same_in_another_process(api_client, reader, canary):
    """Another interpreter (another hash seed) computes the same arms from the core alone: no state is shared."""
    keys = [f"agent-run-{n}" for n in range(40)]
    code = (
        "import json, sys; from uplift.core.canary import arm_for; "
        f"print(json.dumps([arm_for({SLUG!r}, key, 0.5) for key in {keys!r}]))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    elsewhere = json.loads(result.stdout)
    served = []
    for key in keys:
        digest = get_active(api_client, reader, **{"X-Waymark-Run": key})["ETag"].strip('"')
        served.append("canary" if digest == canary.candidate.digest else "control")
    assert served == elsewhere and {"canary", "control"} == set(served)


def test_guidance_uses_the_graph_of_the_runs_arm(api_client, reader, canary):
    to_canary = guide(api_client, reader, **{"X-Waymark-Run": CANARY_KEY})
    assert to_canary.status_code == 200
    assert to_canary.json()["revision"] == canary.candidate.digest
    assert to_canary.json()["node_id"] == "t1"  # the chain of tools: t1 is a node
    assert to_canary["X-Waymark-Revision"] == str(canary.candidate.seq)
    to_control = guide(api_client, reader, **{"X-Waymark-Run": CONTROL_KEY})
    assert to_control.json()["revision"] == canary.control.digest
    assert to_control.json()["node_id"] is None  # the two-hop graph has no t1: the whole graph
    assert to_control["X-Waymark-Revision"] == str(canary.control.seq)
    # a revision named in the body is served as it is, whatever the headers say
    pinned = api_client.post(
        GUIDANCE, {"mode": "raw_subgraph", "revision": "0"}, token=reader, **{"X-Waymark-Run": CANARY_KEY}
    )
    assert pinned.status_code == 200 and pinned["X-Waymark-Revision"] == "0"


def test_a_pinned_run_stays_in_its_arm_when_the_share_changes(api_client, reader, canary):
    # placed between 0.05 and 0.5: the canary at 0.5, the control at 0.05, unless pinned
    mid = key_where(lambda u: 0.05 <= u < 0.5)
    high = key_where(lambda u: u >= 0.5)  # the control at 0.5, the canary at 0.95, unless pinned
    first = get_active(api_client, reader, **{"X-Waymark-Run": mid})
    assert first["ETag"] == f'"{canary.candidate.digest}"'
    pin = first["X-Waymark-Revision"]
    high_pin = get_active(api_client, reader, **{"X-Waymark-Run": high})["X-Waymark-Revision"]
    assert high_pin == str(canary.control.seq)

    set_share(0.05)
    assert arm_for(SLUG, mid, 0.05) == "control"
    for header_pin in (pin, canary.candidate.digest, f'"{canary.candidate.digest}"'):
        again = get_active(api_client, reader, **{"X-Waymark-Run": mid, "X-Waymark-Revision": header_pin})
        assert again["ETag"] == f'"{canary.candidate.digest}"', header_pin
    unpinned = get_active(api_client, reader, **{"X-Waymark-Run": mid})
    assert unpinned["ETag"] == f'"{canary.control.digest}"'
    guided = guide(api_client, reader, **{"X-Waymark-Run": mid, "X-Waymark-Revision": pin})
    assert guided.json()["revision"] == canary.candidate.digest

    set_share(0.95)
    kept = get_active(api_client, reader, **{"X-Waymark-Run": high, "X-Waymark-Revision": high_pin})
    assert kept["ETag"] == f'"{canary.control.digest}"'
    assert get_active(api_client, reader, **{"X-Waymark-Run": high})["ETag"] == f'"{canary.candidate.digest}"'


def test_without_a_run_key_a_call_gets_the_control(api_client, reader, canary):
    response = get_active(api_client, reader)
    assert response.status_code == 200 and response["ETag"] == f'"{canary.control.digest}"'
    assert guide(api_client, reader).json()["revision"] == canary.control.digest
    # a pin naming the canary is honoured without a key (the run was served the canary before)
    pinned = get_active(api_client, reader, **{"X-Waymark-Revision": str(canary.candidate.seq)})
    assert pinned["ETag"] == f'"{canary.candidate.digest}"'


GARBAGE = [
    "x" * 201,  # too long
    "",
    "   ",
    "é-run",  # not ASCII
    "\u202erun-1",  # right-to-left override
    "run\u200f-1",  # right-to-left mark
    "run\x07-1",  # a control character
    "\u0663",  # an Arabic-Indic digit
]


@pytest.mark.parametrize("value", GARBAGE)
def test_garbage_run_keys_get_the_control_never_a_500(api_client, reader, canary, value):
    response = get_active(api_client, reader, **{"X-Waymark-Run": value})
    assert response.status_code == 200 and response["ETag"] == f'"{canary.control.digest}"'
    guided = guide(api_client, reader, **{"X-Waymark-Run": value})
    assert guided.status_code == 200 and guided.json()["revision"] == canary.control.digest


@pytest.mark.parametrize("value", [*GARBAGE, "0", "*", '"', "W/x", f"{'f' * 64}", "-1", "99"])
def test_garbage_or_unknown_pins_are_ignored(api_client, reader, canary, value):
    response = get_active(api_client, reader, **{"X-Waymark-Run": CANARY_KEY, "X-Waymark-Revision": value})
    assert response.status_code == 200 and response["ETag"] == f'"{canary.candidate.digest}"'
    guided = guide(api_client, reader, **{"X-Waymark-Run": CANARY_KEY, "X-Waymark-Revision": value})
    assert guided.status_code == 200 and guided.json()["revision"] == canary.candidate.digest


def test_the_cached_per_step_calls_make_no_query_for_either_arm(api_client, reader, canary, django_assert_num_queries):
    calls = []
    for key, revision in ((CANARY_KEY, canary.candidate), (CONTROL_KEY, canary.control)):
        pin = str(revision.seq)
        calls += [
            lambda key=key: get_active(api_client, reader, **{"X-Waymark-Run": key}),
            lambda key=key, pin=pin: get_active(
                api_client, reader, **{"X-Waymark-Run": key, "X-Waymark-Revision": pin}
            ),
            lambda key=key, revision=revision: get_active(
                api_client, reader, **{"X-Waymark-Run": key, "If-None-Match": f'"{revision.digest}"'}
            ),
            lambda key=key: guide(api_client, reader, **{"X-Waymark-Run": key}),
        ]
    warm = [call().status_code for call in calls]  # the card, both documents, the token: read once
    assert warm == [200, 200, 304, 200] * 2
    with django_assert_num_queries(0):
        assert [call().status_code for call in calls] == warm


def test_the_card_is_dropped_when_the_canary_starts_changes_and_ends(api_client, reader):
    workspace = make_demo_workspace()
    control = workspace.active_revision
    assert get_active(api_client, reader, **{"X-Waymark-Run": CANARY_KEY})["X-Waymark-Revision"] == "1"
    candidate = services.graph_append_accepted(
        actor=SYSTEM, workspace=workspace, graph=big_graph(3), expected_head=control.digest
    )
    start(candidate, expected=control, share=0.5)
    assert get_active(api_client, reader, **{"X-Waymark-Run": CANARY_KEY})["X-Waymark-Revision"] == "2"
    mid = key_where(lambda u: 0.05 <= u < 0.5)
    assert get_active(api_client, reader, **{"X-Waymark-Run": mid})["X-Waymark-Revision"] == "2"
    set_share(0.05)
    assert get_active(api_client, reader, **{"X-Waymark-Run": mid})["X-Waymark-Revision"] == "1"
    end()
    for key in (mid, CONTROL_KEY, None):
        headers = {"X-Waymark-Run": key} if key else {}
        response = get_active(api_client, reader, **headers)
        assert response["X-Waymark-Revision"] == "2" and "Vary" not in response


def test_the_workspace_page_shows_the_canary(client, canary):
    client.force_login(user_with())
    page = client.get(f"/graphs/{SLUG}/").content.decode()
    assert "serves 50% of runs" in page and "canary control" in page
    assert f"the control #{canary.control.seq}" in page


# -- the runs of each arm --------------------------------------------------------------------------------------------


def test_arm_runs_attributes_production_runs_and_leaves_evaluation_runs_out(canary, django_assert_num_queries):
    from tests.trajectories.factories import ingest, run_item

    candidate, control = canary.candidate.digest, canary.control.digest
    ours = {"graph_workspace": SLUG}
    ingest(
        run_item(**ours, graph_revision=candidate, outcome="success", score=0.7, metadata={"model": "m-1"}),
        run_item(**ours, graph_revision=control, outcome="failure", score=None, metadata={}),
        run_item(**ours, graph_revision=candidate, outcome="success", score=None, metadata={"model": "m-2"}),
        run_item(**ours, graph_revision="1", outcome="success"),  # neither ref
        run_item(graph_workspace="elsewhere", graph_revision=candidate, outcome="success"),
        run_item(**ours, graph_revision=control, outcome="failure", score=7.5),  # a score outside [0, 1]
    )
    ingest(run_item(**ours, source=EVALUATION_SOURCE, graph_revision=candidate, outcome="success"))
    since = timezone.now() - timedelta(hours=1)
    with django_assert_num_queries(1):
        runs = KIND.arm_runs(SLUG, candidate_ref=candidate, control_ref=control, since=since)
    assert [(r.arm, r.success, r.score, r.model) for r in runs] == [
        ("canary", 1.0, 0.7, "m-1"),
        ("control", 0.0, 0.0, ""),
        ("canary", 1.0, 1.0, "m-2"),
        ("control", 0.0, 0.0, "demo"),
    ]
    ids = [r.run_id for r in runs]
    assert ids == sorted(ids)
    later = KIND.arm_runs(SLUG, candidate_ref=candidate, control_ref=control, since=since, after_id=ids[1], limit=1)
    assert [r.run_id for r in later] == [ids[2]]
    future = timezone.now() + timedelta(hours=1)
    assert KIND.arm_runs(SLUG, candidate_ref=candidate, control_ref=control, since=future) == []
    assert len(KIND.arm_runs(SLUG, candidate_ref=candidate, control_ref=control, since=None)) == 4


def test_a_promotion_with_a_canary_rollout_goes_live_for_its_share_and_is_watched(api_client, reader):
    from accounts.roles import Role
    from accounts.services import Actor
    from reviews import services as reviews
    from reviews.models import PromotionStatus
    from uplift.models import Watch

    workspace = make_demo_workspace()
    control = workspace.active_revision
    candidate = services.graph_append_accepted(
        actor=SYSTEM, workspace=workspace, graph=big_graph(3), expected_head=control.digest
    )
    with TestCase.captureOnCommitCallbacks(execute=False):  # (the watch's first look is not run here)
        request = reviews.promotion_propose(
            actor=Actor(user=user_with(Role.OPERATOR)), kind="graph_revision", candidate_id=str(candidate.pk),
            rationale="a canary first", rollout="canary", canary_share=0.25,
        )  # fmt: skip
        for _ in range(request.required_approvals):
            request = reviews.judgment_submit(
                actor=Actor(user=user_with(Role.REVIEWER)), request=request, verdict="approve"
            )
        if request.status == PromotionStatus.APPROVED:
            request = reviews.promotion_override(
                actor=Actor(user=user_with(Role.ADMIN)), request=request, reason="no passing gate in this test"
            )
    assert request.status == PromotionStatus.APPLIED
    workspace.refresh_from_db()
    assert (workspace.active_revision_id, workspace.canary_control_id, workspace.canary_share) == (
        candidate.pk,
        control.pk,
        0.25,
    )
    watch = Watch.objects.get(kind="graph_revision", parent_key=SLUG)
    assert (watch.mode, watch.candidate_ref, watch.control_ref) == ("canary", candidate.digest, control.digest)
