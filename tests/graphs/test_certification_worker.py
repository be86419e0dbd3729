"""A certification evaluation on a real Celery worker (Redis broker, PostgreSQL) whose worker process is SIGKILLed
once at every stage of its step: it finishes once, with one certificate, one decision on its split, and each arm
measured once after its evaluation was kept."""

import pytest

from accounts.models import AuditEvent
from accounts.services import Actor
from graphs import revisions, services
from graphs.certification_services import graph_certify
from graphs.demo import two_hop_graph
from graphs.models import GraphCertification
from graphs.tasks import evolution_reap
from tests.faults import fault_worker, wait_for
from uplift.models import Certificate, SplitDecision

pytestmark = [pytest.mark.redis, pytest.mark.postgres]
TASK = "two-hop question answering over a small corpus"
KILL_POINTS = [
    "measuring:candidate",
    "stored:candidate",
    "measuring:control",
    "stored:control",
    "finishing",
    "finished",
]


def test_a_certification_whose_worker_is_killed_at_every_stage_finishes_once(transactional_db, operator, tmp_path):
    workspace = services.workspace_create(actor=Actor.system(), slug="lab", task_description=TASK).workspace
    candidate = services.graph_append_accepted(
        actor=Actor.system(),
        workspace=workspace,
        graph=two_hop_graph(),
        expected_head=revisions.head(workspace, "graph").digest,
    )
    with fault_worker(
        "tests.graphs.certification_fault_worker",
        tmp_path,
        redis_db=11,
        points=KILL_POINTS,
        env={"WAYMARK_EVOLUTION_LEASE_SECONDS": "2"},
    ) as worker:
        certification, _ = graph_certify(actor=Actor(user=operator), revision=candidate, evaluator="two-hop")

        def finished() -> bool:
            return not GraphCertification.objects.get(pk=certification.pk).is_open

        done = wait_for(finished, 180, tick=evolution_reap.delay)  # the test plays beat: the reaper every 1.5 s
    assert done, "the certification did not finish:\n" + worker.log_tail()
    certification.refresh_from_db()
    assert certification.status == "done", certification.error
    assert worker.killed() == sorted(KILL_POINTS), worker.log_tail()
    assert sorted(worker.lines("evaluations.log")) == ["candidate", "control"], "an arm was measured again"
    (certificate,) = Certificate.objects.filter(kind="graph_revision", candidate_id=str(candidate.pk))
    assert certificate.pk == certification.certificate_id
    assert certificate.totals["repairs"] == 2 and certificate.totals["breakages"] == 0  # the skeleton fails val1, val3
    assert SplitDecision.objects.filter(split=certificate.split).count() == 1
    assert AuditEvent.objects.filter(verb="graph_certification.finish").count() == 1
