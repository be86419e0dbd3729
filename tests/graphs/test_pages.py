"""Graph pages: list, workspace (drawings, tables, history), diff, try guidance (htmx and plain), make active."""

import pytest
from django.urls import reverse

from accounts.models import AuditEvent
from graphs.models import Revision
from llm.models import ModelCall
from reviews.models import PromotionRequest
from tests.conftest import logged_in
from tests.graphs.factories import make_demo_workspace, make_empty_workspace, make_workspace
from tests.helpers.graphs import csrf
from tests.promote import promote_graph_revision

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo():
    return make_demo_workspace()


def page(user, name, *args, **query):
    return logged_in(user).get(reverse(f"graphs:{name}", args=args), query)


def test_the_list_shows_workspaces_with_active_revision_and_head(viewer, demo):
    make_empty_workspace("bare")
    response = page(viewer, "list")
    assert response.status_code == 200
    html = response.content.decode()
    assert "two-hop-qa" in html and "bare" in html and "no graph" in html
    assert f"#1 <code>{demo.active_revision.short_digest}</code>" in html


def test_anonymous_visitors_are_sent_to_log_in(client, demo):
    for name, args in [("list", ()), ("workspace", ("two-hop-qa",)), ("diff", ("two-hop-qa",))]:
        response = client.get(reverse(f"graphs:{name}", args=args))
        assert response.status_code == 302 and "login" in response["Location"]
    response = client.post(reverse("graphs:guidance", args=["two-hop-qa"]), {})
    assert response.status_code == 302


def test_an_inactive_user_cannot_see_the_pages(outsider, demo):
    response = logged_in(outsider).get(reverse("graphs:workspace", args=["two-hop-qa"]))
    assert response.status_code == 302


def test_the_workspace_page_draws_active_and_head_and_lists_nodes_transitions_history(viewer, demo, admin_user):
    first = Revision.objects.get(workspace=demo, seq=0)
    promote_graph_revision(first)
    html = page(viewer, "workspace", "two-hop-qa").content.decode()
    assert html.count('<pre class="mermaid"') == 2
    assert "flowchart LR" in html and "n4[&quot;search&quot;]" in html
    assert "vendor/mermaid/mermaid.min.js" in html
    html = page(viewer, "workspace", "two-hop-qa", rev="1").content.decode()
    assert "search returned at least one document" in html
    assert "Answering from the search titles alone misses two-hop questions." in html
    assert "PROVIDES_INPUT_FOR" in html and "accepted" in html and "1.0" in html
    assert "Make active" not in html


def test_a_bad_revision_choice_is_reported_not_crashed(viewer, demo):
    response = page(viewer, "workspace", "two-hop-qa", rev="zz!")
    assert response.status_code == 200 and "neither a revision number" in response.content.decode()


def test_an_unknown_workspace_is_404(viewer):
    assert page(viewer, "workspace", "nope").status_code == 404


def test_the_diff_page_shows_a_coloured_unified_diff(viewer, demo):
    response = page(viewer, "diff", "two-hop-qa")
    html = response.content.decode()
    assert response.status_code == 200
    assert '<span class="diff-add">+- `search` (ACTION)' in html
    assert '<span class="diff-file">--- #0' in html
    same = page(viewer, "diff", "two-hop-qa", from_ref="1", to_ref="1").content.decode()
    assert "(no change)" in same
    bad = page(viewer, "diff", "two-hop-qa", from_ref="42")
    assert bad.status_code == 404


def test_the_diff_of_a_single_revision_starts_from_the_skeleton(viewer):
    make_workspace("single")
    html = page(viewer, "diff", "single").content.decode()
    assert "the skeleton" in html and "(no change)" in html


def test_try_guidance_returns_the_localized_context_as_an_htmx_fragment(viewer, demo):
    client = logged_in(viewer)
    client.get(reverse("graphs:workspace", args=["two-hop-qa"]))
    data = {"query": "Which country?", "steps": "search\nread\n", "hops": 2, "mode": "raw_subgraph"}
    response = client.post(
        reverse("graphs:guidance", args=["two-hop-qa"]), data, headers={"HX-Request": "true", **csrf(client)}
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html and 'id="guidance"' in html
    assert "localized at: <code>read</code>" in html
    assert "Active Cognitive Node: [read] (Type: ACTION)" in html
    assert "[read] → [search] (PROVIDES_INPUT_FOR;" in html
    assert not ModelCall.objects.exists()


def test_try_guidance_works_without_javascript_and_in_the_paper_layout(viewer, demo):
    client = logged_in(viewer)
    client.get(reverse("graphs:workspace", args=["two-hop-qa"]))
    data = {"query": "", "steps": "search", "hops": 1, "mode": "raw_subgraph", "paper_layout": "on", "revision": ""}
    response = client.post(reverse("graphs:guidance", args=["two-hop-qa"]), data, headers=csrf(client))
    html = response.content.decode()
    assert response.status_code == 200 and "<html" in html
    assert "[search] → [read] (Condition: search returned at least one document)" in html


def test_try_guidance_reports_bad_input(viewer, demo):
    client = logged_in(viewer)
    client.get(reverse("graphs:workspace", args=["two-hop-qa"]))
    url = reverse("graphs:guidance", args=["two-hop-qa"])
    bad_hops = client.post(url, {"steps": "", "hops": 9, "mode": "raw_subgraph"}, headers=csrf(client))
    assert bad_hops.status_code == 400
    missing = client.post(url, {"steps": "", "hops": 2, "mode": "raw_subgraph", "revision": "77"}, headers=csrf(client))
    assert missing.status_code == 400 and "no graph revision" in missing.content.decode()


def _propose(user, candidate, rationale="evolved and evaluated"):
    client = logged_in(user)
    client.get(reverse("graphs:workspace", args=["two-hop-qa"]))
    data = {"kind": "graph_revision", "candidate_id": str(candidate.pk), "rationale": rationale}
    return client.post(reverse("reviews:propose"), data, headers=csrf(client))


def test_a_reviewer_proposes_a_revision_for_activation_from_the_workspace_page(reviewer, demo):
    seed = Revision.objects.get(workspace=demo, seq=0)
    html = page(reviewer, "workspace", "two-hop-qa").content.decode()
    assert html.count("Propose for activation") == 1  # the active revision is not offered
    assert f'name="candidate_id" value="{seed.pk}"' in html and reverse("reviews:propose") in html
    assert "an admin override will be needed" in html  # a seeded graph has no evaluation

    response = _propose(reviewer, seed)

    request = PromotionRequest.objects.get(kind="graph_revision", candidate_id=str(seed.pk))
    assert response.status_code == 302 and response["Location"] == reverse("reviews:item", args=[request.pk])
    assert request.replaces_id == str(demo.active_revision_id) and request.proposer == reviewer
    demo.refresh_from_db()
    assert demo.active_revision.seq == 1  # proposing moves nothing
    html = page(reviewer, "workspace", "two-hop-qa").content.decode()
    assert reverse("reviews:item", args=[request.pk]) in html and "Propose for activation" not in html
    assert reverse("reviews:history", args=["graph_revision", "two-hop-qa"]) in html


def test_an_operator_may_propose_and_a_viewer_only_sees_the_history_link(operator, viewer, demo):
    assert "Propose for activation" in page(operator, "workspace", "two-hop-qa").content.decode()
    html = page(viewer, "workspace", "two-hop-qa").content.decode()
    assert "Propose for activation" not in html
    assert reverse("reviews:history", args=["graph_revision", "two-hop-qa"]) in html
    seed = Revision.objects.get(workspace=demo, seq=0)
    assert _propose(viewer, seed).status_code == 403
    assert not PromotionRequest.objects.exists()


def test_a_proposal_without_a_rationale_is_refused_and_writes_nothing(reviewer, demo):
    seed = Revision.objects.get(workspace=demo, seq=0)
    response = _propose(reviewer, seed, rationale="  ")
    assert 400 <= response.status_code < 500 and "rationale" in response.content.decode()
    assert not PromotionRequest.objects.exists()


def test_no_graph_page_moves_the_pointer(admin_user, demo):
    client = logged_in(admin_user)
    client.get(reverse("graphs:workspace", args=["two-hop-qa"]))
    response = client.post("/graphs/two-hop-qa/activate/", {"revision": 0}, headers=csrf(client))
    assert response.status_code in (404, 405)
    demo.refresh_from_db()
    assert demo.active_revision.seq == 1
    assert not AuditEvent.objects.filter(verb="workspace.set_active_revision", actor_user=admin_user).exists()


@pytest.mark.parametrize("extra", [0, 8])
def test_pages_cost_a_fixed_number_of_queries(viewer, django_assert_max_num_queries, extra):
    from accounts.services import Actor
    from graphs import revisions, services
    from graphs.demo import two_hop_graph

    workspace = make_demo_workspace()
    graph = two_hop_graph()
    for n in range(extra):
        head = revisions.head(workspace, "graph")
        services.graph_append_accepted(
            actor=Actor.system(), workspace=workspace, graph=graph.with_meta(n=n), expected_head=head.digest
        )
        make_workspace(f"more{n}")
    client = logged_in(viewer)
    with django_assert_max_num_queries(4):
        assert client.get(reverse("graphs:list")).status_code == 200
    with django_assert_max_num_queries(9):
        assert client.get(reverse("graphs:workspace", args=["two-hop-qa"])).status_code == 200
    with django_assert_max_num_queries(8):
        assert client.get(reverse("graphs:diff", args=["two-hop-qa"])).status_code == 200


def test_an_empty_workspace_and_an_empty_list_render(viewer):
    assert "No workspaces yet" in page(viewer, "list").content.decode()
    make_empty_workspace("bare")
    html = page(viewer, "workspace", "bare").content.decode()
    assert "No active graph." in html and "No revisions yet." in html
    assert page(viewer, "diff", "bare").status_code == 404
