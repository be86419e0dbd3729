"""The certificate over the API: the active graph carries its revision's certificate summary (body field and
X-Waymark-Certificate header) with no query on the cached and 304 paths; operators certify a revision on demand."""

import pytest

from accounts.services import Actor
from graphs import services
from graphs.certification_services import graph_certify
from graphs.core.twohop import ROUND_1_BUILD
from graphs.evolution.demo import run_inline
from graphs.evolution.services import evolution_start
from graphs.models import GraphCertification, Revision
from tests.graphs.skills import EVALUATORS, skills_graph
from tests.promote import promote_graph_revision

pytestmark = pytest.mark.django_db
BASE = "/api/v1/graphs"
TASK = "two-hop question answering over a small corpus"


@pytest.fixture(autouse=True)
def _skills(settings):
    settings.WAYMARK_GRAPH_EVALUATORS = EVALUATORS


@pytest.fixture
def reader(operator, make_token):
    return make_token(operator, "graphs:read")


@pytest.fixture
def certifier(operator, make_token):
    return make_token(operator, "graphs:read", "evolutions:run")


def certified_lab(operator) -> Revision:
    """Workspace lab: the skeleton active, round 1's graph accepted and certified against it, then promoted."""
    workspace = services.workspace_create(actor=Actor.system(), slug="lab", task_description=TASK).workspace
    run = evolution_start(
        actor=Actor(user=operator), workspace=workspace, rounds=1, evaluator="two-hop", script=[ROUND_1_BUILD]
    )
    revision = run_inline(run).rounds.get().graph_revision
    promote_graph_revision(revision)
    return revision


def test_the_active_graph_carries_its_certificate_and_costs_no_query_when_cached(
    api_client, reader, operator, django_assert_num_queries
):
    revision = certified_lab(operator)
    first = api_client.get(f"{BASE}/lab/active", token=reader)
    assert first.status_code == 200
    certificate = first.json()["certificate"]
    assert (certificate["passed"], certificate["n"], certificate["repairs"], certificate["breakages"]) == (
        True,
        4,
        2,
        0,
    )
    assert certificate["uplift"] == pytest.approx(0.5) and certificate["against"] == "the version it replaces"
    header = first["X-Waymark-Certificate"]
    assert header.startswith(f"id={certificate['id']}; passed=true; uplift=+0.500; lower=") and header.endswith("n=4")
    assert first["ETag"] == f'"{revision.digest}"'

    api_client.get(f"{BASE}/lab/active", token=reader)  # the token is cached now too
    with django_assert_num_queries(0):
        again = api_client.get(f"{BASE}/lab/active", token=reader, **{"If-None-Match": first["ETag"]})
        cached = api_client.get(f"{BASE}/lab/active", token=reader)
    assert again.status_code == 304 and again["X-Waymark-Certificate"] == header
    assert cached.content == first.content


def test_a_graph_never_certified_says_so(api_client, reader):
    services.workspace_create(actor=Actor.system(), slug="plain", graph=skills_graph(0))
    response = api_client.get(f"{BASE}/plain/active", token=reader)
    assert response.json()["certificate"] is None and response["X-Waymark-Certificate"] == "none"


def test_a_certificate_issued_for_the_active_revision_reaches_the_api(
    api_client, reader, operator, django_capture_on_commit_callbacks
):
    workspace = services.workspace_create(actor=Actor.system(), slug="ws", graph=skills_graph(0, 2)).workspace
    before = api_client.get(f"{BASE}/ws/active", token=reader)
    assert before["X-Waymark-Certificate"] == "none"
    active = Revision.objects.get(pk=workspace.active_revision_id)
    with django_capture_on_commit_callbacks(execute=True):  # the step runs (eager Celery), then the card is dropped
        graph_certify(actor=Actor(user=operator), revision=active, evaluator="skills")
    assert GraphCertification.objects.get().status == "done"
    after = api_client.get(f"{BASE}/ws/active", token=reader, **{"If-None-Match": before["ETag"]})
    assert after.status_code == 304 and after["X-Waymark-Certificate"].startswith("id=")
    body = api_client.get(f"{BASE}/ws/active", token=reader).json()
    assert body["certificate"]["against"] == "no artifact"  # nothing else to compare the active graph with
    assert (body["certificate"]["repairs"], body["certificate"]["breakages"]) == (1, 1)  # t2 gained, t1 lost


def test_operators_certify_a_revision_over_the_api(api_client, certifier, reader, operator):
    workspace = services.workspace_create(actor=Actor.system(), slug="ws", graph=skills_graph(0)).workspace
    from graphs import revisions
    from graphs.core import Graph

    graph, _ = Graph.from_human(skills_graph(0, 1))
    services.graph_append_accepted(
        actor=Actor.system(), workspace=workspace, graph=graph, expected_head=revisions.head(workspace, "graph").digest
    )

    refused = api_client.post(f"{BASE}/ws/revisions/1/certify", {}, token=certifier)
    assert refused.status_code == 422 and refused.json()["code"] == "cannot_certify"  # no run to take one from
    assert api_client.post(f"{BASE}/ws/revisions/1/certify", {}, token=reader).status_code == 403
    assert api_client.get(f"{BASE}/ws/revisions/1/certification", token=reader).status_code == 404

    started = api_client.post(f"{BASE}/ws/revisions/1/certify", {"evaluator": "skills"}, token=certifier)
    assert started.status_code == 202, started.content
    body = started.json()
    assert (body["status"], body["source"], body["candidate"]["seq"], body["control"]["seq"]) == (
        "queued",
        "evaluation",
        1,
        0,
    )
    read = api_client.get(f"{BASE}/ws/revisions/1/certification", token=reader).json()
    assert read["id"] == body["id"] and read["certificate"] is None
