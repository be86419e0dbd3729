"""Workspace creation and seeding, accepted revisions, transfer and the active pointer (graphs.services)."""

import json

import pytest

from accounts.models import AuditEvent
from accounts.services import Actor
from graphs import revisions, services
from graphs.core import Edge, Graph, GraphError, skeleton
from graphs.demo import TWO_HOP_GRAPH, two_hop_graph
from graphs.models import Revision, Workspace
from graphs.revisions import HeadMoved
from tests.graphs.factories import SYSTEM, make_demo_workspace, make_empty_workspace, make_workspace

pytestmark = pytest.mark.django_db


def test_a_new_workspace_is_seeded_with_the_skeleton_and_it_is_active():
    seeded = services.workspace_create(actor=SYSTEM, slug="fresh", title="Fresh", task_description="do things")
    revision = seeded.revision
    assert (revision.seq, revision.meta) == (0, {"origin": "skeleton", "iteration": 0})
    assert revision.digest == skeleton().digest
    assert seeded.workspace.active_revision_id == revision.pk
    assert seeded.workspace.vocabulary["relations"] == ["LEADS_TO", "TRIGGERS", "PROVIDES_INPUT_FOR", "CONVERGES_TO"]
    verbs = list(AuditEvent.objects.order_by("id").values_list("verb", flat=True))
    assert verbs == ["workspace.create", "graph_revision.seed"]


def test_a_hand_written_graph_is_onboarded_with_its_warnings():
    partial = {"nodes": [{"id": "search", "type": "action", "description": "s"}], "edges": []}
    partial["edges"] = [{"source": "Start", "target": "search", "relation": "leads_to", "guidance": "go"}]
    partial["edges"].append({"source": "search", "target": "End", "relation": "LEADS_TO"})
    seeded = services.workspace_create(actor=SYSTEM, slug="onboard", graph=partial)
    assert seeded.origin == "onboarded"
    assert [w.code for w in seeded.warnings] == ["skeleton_completed", "skeleton_completed"]
    graph = Graph.from_document(seeded.revision.document)
    assert set(graph.nodes) == {"Start", "End", "search"}
    assert graph.edges[0].relation == "LEADS_TO"


def test_a_broken_hand_written_graph_is_refused_and_nothing_is_written():
    broken = {"nodes": [{"id": "a", "type": "ACTION"}], "edges": [{"source": "a", "target": "nowhere"}]}
    with pytest.raises(GraphError):
        services.workspace_create(actor=SYSTEM, slug="broken", graph=broken)
    assert not Workspace.objects.exists() and not AuditEvent.objects.exists()


@pytest.mark.parametrize("slug", ["", "has space", "a/b", "x" * 101])
def test_it_refuses_a_bad_slug(slug):
    with pytest.raises(ValueError):
        services.workspace_create(actor=SYSTEM, slug=slug)
    assert not Workspace.objects.exists()


def test_it_refuses_a_taken_slug():
    make_workspace("taken")
    with pytest.raises(ValueError, match="exists already"):
        services.workspace_create(actor=SYSTEM, slug="taken")
    assert Workspace.objects.count() == 1


def test_a_custom_vocabulary_is_normalized_and_used_by_the_seed():
    seeded = services.workspace_create(actor=SYSTEM, slug="vocab", vocabulary={"relations": ["next", "feeds"]})
    assert seeded.workspace.vocabulary["relations"] == ["NEXT", "FEEDS"]
    assert Graph.from_document(seeded.revision.document).edges[0].relation == "NEXT"
    with pytest.raises(ValueError):
        services.workspace_create(actor=SYSTEM, slug="bad-vocab", vocabulary={"colours": ["red"]})


def test_seeding_a_populated_workspace_raises_head_moved():
    workspace = make_workspace("full")
    with pytest.raises(HeadMoved):
        services.graph_seed(actor=SYSTEM, workspace=workspace)


def test_an_accepted_graph_is_appended_after_the_expected_head_and_the_pointer_stays():
    workspace = make_workspace("evolving")
    seed = revisions.head(workspace, "graph")
    accepted = services.graph_append_accepted(
        actor=SYSTEM, workspace=workspace, graph=two_hop_graph(), expected_head=seed.digest, meta={"iteration": 1}
    )
    assert (accepted.seq, accepted.parent_digest, accepted.meta) == (
        1,
        seed.digest,
        {"iteration": 1, "origin": "accepted"},
    )
    workspace.refresh_from_db()
    assert workspace.active_revision_id == seed.pk
    with pytest.raises(HeadMoved):
        services.graph_append_accepted(actor=SYSTEM, workspace=workspace, graph=skeleton(), expected_head=seed.digest)


def test_an_invalid_graph_is_never_accepted():
    workspace = make_workspace("strict")
    seed = revisions.head(workspace, "graph")
    dangling = skeleton().with_edges([*skeleton().edges, Edge("Start", "LEADS_TO", "nowhere")])
    with pytest.raises(GraphError):
        services.graph_append_accepted(actor=SYSTEM, workspace=workspace, graph=dangling, expected_head=seed.digest)
    assert Revision.objects.filter(workspace=workspace).count() == 1


def test_transfer_copies_the_head_graph_and_never_the_rejection_memory():
    source = make_demo_workspace()
    head = revisions.head(source, "graph")
    revisions.append(source, "rejections", {"schema": 1, "entries": ["r1"]}, expected_head=None)
    revision = services.graph_transfer(actor=SYSTEM, source=source, target_slug="copy")
    assert revision.document == head.document and revision.seq == 0
    assert revision.meta == {"origin": "transfer:two-hop-qa", "source_ref": head.digest, "iteration": 0}
    target = Workspace.objects.get(slug="copy")
    assert target.active_revision_id == revision.pk
    assert revisions.head(target, "rejections") is None
    assert services.graph_transfer(actor=SYSTEM, source=source, target_slug="copy") is None


def test_transfer_returns_none_from_an_empty_source_and_refuses_itself():
    empty = make_empty_workspace("nothing")
    assert services.graph_transfer(actor=SYSTEM, source=empty, target_slug="elsewhere") is None
    assert not Workspace.objects.filter(slug="elsewhere").exists()
    with pytest.raises(ValueError):
        services.graph_transfer(actor=SYSTEM, source=empty, target_slug="nothing")


def test_seeding_sets_a_first_active_revision_only_for_the_system_actor(admin_user):
    workspace = services.workspace_create(actor=SYSTEM, slug="later", activate=False).workspace
    seed = Revision.objects.get(workspace=workspace, seq=0)
    assert workspace.active_revision_id is None
    with pytest.raises(services.PermissionDenied):
        services.workspace_seed_active_revision(actor=Actor(user=admin_user), workspace=workspace, revision=seed)
    services.workspace_seed_active_revision(actor=SYSTEM, workspace=workspace, revision=seed)
    workspace.refresh_from_db()
    assert workspace.active_revision_id == seed.pk
    event = AuditEvent.objects.filter(verb="workspace.set_active_revision", target_id=str(workspace.pk)).get()
    assert (event.actor_user, event.before, event.after["seeded"]) == (
        None,
        {"active_revision": None},
        True,
    )


def test_seeding_never_moves_a_pointer_that_is_set_already():
    workspace = make_demo_workspace()
    first, second = Revision.objects.filter(workspace=workspace).order_by("seq")
    with pytest.raises(ValueError, match="propose a promotion"):
        services.workspace_seed_active_revision(actor=SYSTEM, workspace=workspace, revision=first)
    workspace.refresh_from_db()
    assert workspace.active_revision_id == second.pk


def test_the_demo_is_idempotent_and_matches_the_spec():
    first = make_demo_workspace()
    again = make_demo_workspace()
    assert first.pk == again.pk
    chain = list(Revision.objects.filter(workspace=first).order_by("seq"))
    assert [r.meta["origin"] for r in chain] == ["skeleton", "accepted"]
    assert first.active_revision_id == chain[1].pk
    graph = Graph.from_document(chain[1].document)
    assert sorted(graph.nodes) == ["End", "Start", "answer", "read", "search"]
    assert len(graph.edges) == 5
    assert graph.edges_between("read", "search")[0].relation == "PROVIDES_INPUT_FOR"
    assert json.loads(json.dumps(TWO_HOP_GRAPH)) == TWO_HOP_GRAPH


def test_a_workspace_can_be_created_from_another_workspaces_head_graph():
    source = make_demo_workspace()
    revisions.append(source, "rejections", {"schema": 1, "entries": ["r1"]}, expected_head=None)
    seeded = services.workspace_create(actor=SYSTEM, slug="copied", transfer_from=source)
    head = revisions.head(source, "graph")
    assert seeded.revision.digest == head.digest
    assert seeded.revision.meta == {"origin": "transfer:two-hop-qa", "source_ref": head.digest, "iteration": 0}
    assert seeded.workspace.vocabulary == source.vocabulary
    assert revisions.head(seeded.workspace, "rejections") is None
    empty = make_empty_workspace("hollow")
    with pytest.raises(ValueError, match="no graph to transfer"):
        services.workspace_create(actor=SYSTEM, slug="from-hollow", transfer_from=empty)
    assert not Workspace.objects.filter(slug="from-hollow").exists()
