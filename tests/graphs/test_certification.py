"""Certified uplift for graph revisions (issue 26): the candidate and what it replaces (the active revision, or no
graph) on the same validation tasks, paired; the round's own evaluations reused when the retained graph is the
active one, a certification evaluation otherwise; each round counted once on the split's ledger; the gate folds the
certificate in; the active graph's API carries its summary without a query on the cached path."""

from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from accounts.services import Actor
from graphs import services
from graphs.certification_services import CertificationRefused, certification_step, graph_certify
from graphs.core.twohop import ROUND_1_BUILD, TwoHopEnvironment
from graphs.evolution.demo import DEMO_REFINEMENT, run_inline
from graphs.evolution.services import evolution_start
from graphs.models import EvolutionRun, GraphCertification, Revision, Workspace
from graphs.promotable import GraphRevisionKind
from tests.graphs.evolution.records import run_record, uplift_record
from tests.graphs.skills import EVALUATORS, Skills, skills_graph
from tests.helpers.evolution_crashes import die_once, recording, run_through_one_crash
from uplift.models import Certificate, SplitDecision
from uplift.selectors import latest_certificate

pytestmark = pytest.mark.django_db
SYSTEM = Actor.system()
TASK = "two-hop question answering over a small corpus"


@pytest.fixture(autouse=True)
def _skills(settings):
    settings.WAYMARK_GRAPH_EVALUATORS = EVALUATORS
    Skills.calls.clear()


@pytest.fixture
def evaluations(monkeypatch):
    """purpose:iteration of every evaluation the two-hop environment makes (None for the unguided arm's graph)."""
    done: list[str] = []
    original = TwoHopEnvironment.evaluate

    def counted(self, ref, graph, *, iteration, purpose):
        done.append(f"{purpose}:{iteration}:{'graph' if graph is not None else 'none'}")
        return original(self, ref, graph, iteration=iteration, purpose=purpose)

    monkeypatch.setattr(TwoHopEnvironment, "evaluate", counted)
    return done


def workspace_with(slug: str, *skills: int, activate: bool = True) -> Workspace:
    return services.workspace_create(actor=SYSTEM, slug=slug, graph=skills_graph(*skills), activate=activate).workspace


def append(workspace: Workspace, *skills: int) -> Revision:
    from graphs import revisions
    from graphs.core import Graph

    graph, _ = Graph.from_human(skills_graph(*skills))
    head = revisions.head(workspace, "graph")
    return services.graph_append_accepted(actor=SYSTEM, workspace=workspace, graph=graph, expected_head=head.digest)


def finish(certification: GraphCertification) -> GraphCertification:
    """Run the certification's steps in process until it has ended."""
    for _ in range(10):
        certification.refresh_from_db()
        if not certification.is_open:
            return certification
        certification_step(certification_id=certification.pk, worker="t")
    raise AssertionError(f"certification {certification.pk} did not end: {certification.status}")


def outcomes(certificate: Certificate) -> dict[str, str]:
    return {row["task_id"]: row["outcome"] for row in certificate.rows}


def two_hop_lab(slug: str, *, activate: bool = True) -> Workspace:
    return services.workspace_create(actor=SYSTEM, slug=slug, task_description=TASK, activate=activate).workspace


def evolve(workspace: Workspace, operator, *, script: list[str], rounds: int = 1) -> EvolutionRun:
    run = evolution_start(
        actor=Actor(user=operator),
        workspace=workspace,
        rounds=rounds,
        evaluator="two-hop",
        script=script,
        enqueue=False,
    )
    return run_inline(run)


# -- the pairs ---------------------------------------------------------------------------------------------------------


def test_the_pairs_count_repairs_and_breakages_against_the_active_revision(operator):
    workspace = workspace_with("ws", 0, 1, 2)  # active #0 passes t0, t1, t2
    candidate = append(workspace, 1, 2, 3, 4)  # passes t1 .. t4

    certification, created = graph_certify(actor=Actor(user=operator), revision=candidate, evaluator="skills")
    assert created and certification.status == "queued" and certification.control_id == workspace.active_revision_id
    certification = finish(certification)

    assert (certification.status, certification.source, certification.passed) == ("done", "evaluation", True)
    certificate = latest_certificate("graph_revision", str(candidate.pk))
    assert certificate.pk == certification.certificate_id
    assert certificate.replaces_id == str(workspace.active_revision_id)
    assert outcomes(certificate) == {
        "t0": "breakage",
        "t1": "both_passed",
        "t2": "both_passed",
        "t3": "repair",
        "t4": "repair",
        "t5": "both_failed",
        "t6": "both_failed",
        "t7": "both_failed",
    }
    totals = certificate.totals
    assert (totals["n"], totals["repairs"], totals["breakages"], totals["both_passed"], totals["both_failed"]) == (
        8,
        2,
        1,
        2,
        3,
    )
    assert totals["success"]["mean"] == pytest.approx((2 - 1) / 8)
    assert totals["score"]["mean"] == pytest.approx((0.7 + 0.7 - 0.7) / 8)  # a pass scores 0.9, a failure 0.2
    t0 = next(row for row in certificate.rows if row["task_id"] == "t0")
    assert (t0["control"]["passed"], t0["control"]["score"], t0["candidate"]["passed"]) == (True, 0.9, False)
    assert sorted(Skills.calls) == sorted(
        [("candidate", candidate.digest), ("control", workspace.active_revision.digest)]
    )
    assert "the active revision #0" in certificate.sentence


def test_a_first_activation_is_certified_against_no_graph_at_all(operator):
    workspace = workspace_with("first", 5, activate=False)  # nothing active
    candidate = append(workspace, 0, 2)

    certification = finish(graph_certify(actor=Actor(user=operator), revision=candidate, evaluator="skills")[0])

    assert certification.control_id is None and certification.status == "done"
    certificate = latest_certificate("graph_revision", str(candidate.pk))
    assert certificate.replaces_id == ""
    # No graph: t0 and t1 by itself; the candidate: t0 and t2.
    assert {k: v for k, v in outcomes(certificate).items() if v != "both_failed"} == {
        "t0": "both_passed",
        "t1": "breakage",
        "t2": "repair",
    }
    assert ("control", None) in Skills.calls
    assert "no graph at all" in certificate.sentence


def test_an_evaluator_that_cannot_run_without_a_graph_refuses_a_first_certification(settings, operator):
    settings.WAYMARK_GRAPH_EVALUATORS = {**EVALUATORS, "blind": "tests.graphs.skills.Blind"}
    workspace = workspace_with("blind", 5, activate=False)
    candidate = append(workspace, 0)
    with pytest.raises(CertificationRefused, match="without a graph"):
        graph_certify(actor=Actor(user=operator), revision=candidate, evaluator="blind")
    assert not GraphCertification.objects.exists()


def test_asking_again_while_one_is_under_way_returns_that_one(operator):
    workspace = workspace_with("again", 0)
    candidate = append(workspace, 0, 1)
    first, created = graph_certify(actor=Actor(user=operator), revision=candidate, evaluator="skills")
    second, again = graph_certify(actor=Actor(user=operator), revision=candidate, evaluator="skills")
    assert created and not again and first.pk == second.pk


def test_the_active_revision_cannot_be_certified_against_itself(operator):
    workspace = workspace_with("self", 0)
    active = Revision.objects.get(pk=workspace.active_revision_id)
    certification = finish(graph_certify(actor=Actor(user=operator), revision=active, evaluator="skills")[0])
    assert certification.control_id is None  # never certified: against no graph
    with pytest.raises(CertificationRefused, match="no evolution run"):
        graph_certify(actor=Actor(user=operator), revision=append(workspace, 3))


# -- the evolution round ---------------------------------------------------------------------------------------------


def test_a_round_whose_retained_graph_is_the_active_one_is_certified_from_its_own_evaluations(operator, evaluations):
    workspace = two_hop_lab("lab")  # the skeleton is active
    run = evolve(workspace, operator, script=[ROUND_1_BUILD])

    assert evaluations == ["baseline:0:graph", "candidate:1:graph"]  # nothing measured again
    (certification,) = GraphCertification.objects.filter(workspace=workspace)
    assert (certification.source, certification.status, certification.evolution_run_id) == ("round", "done", run.pk)
    certificate = latest_certificate("graph_revision", str(certification.candidate_id))
    # The skeleton answers the one-hop questions (val0, val2); round 1's graph all four.
    assert outcomes(certificate) == {"val0": "both_passed", "val1": "repair", "val2": "both_passed", "val3": "repair"}
    assert certificate.replaces_id == str(workspace.active_revision_id)
    assert certificate.provenance["source"] == "round" and certificate.provenance["round"] == 1


def test_a_round_whose_retained_graph_is_not_the_active_one_gets_a_certification_evaluation(operator, evaluations):
    workspace = two_hop_lab("lab")
    evolve(workspace, operator, script=[ROUND_1_BUILD])  # #1 accepted; the skeleton #0 stays active
    evaluations.clear()

    run = evolve(workspace, operator, script=[DEMO_REFINEMENT])  # #2 accepted against the retained #1

    assert list(run.rounds.values_list("outcome", flat=True)) == ["accepted"]
    certification = GraphCertification.objects.get(evolution_run=run)
    assert (certification.source, certification.status) == ("evaluation", "queued")  # sent on commit
    assert certification.control_id == workspace.active_revision_id
    finish(certification)
    assert evaluations[-2:] == ["candidate:0:graph", "control:0:graph"]
    certificate = latest_certificate("graph_revision", str(certification.candidate_id))
    assert certificate.totals["repairs"] == 2 and certificate.totals["breakages"] == 0
    assert certificate.replaces_id == str(workspace.active_revision_id)


def test_a_run_that_accepts_several_candidates_certifies_its_last_one_when_it_ends(operator, evaluations):
    workspace = two_hop_lab("lab")
    evolve(workspace, operator, script=[ROUND_1_BUILD])  # #1 accepted and certified by its round; #0 stays active
    evaluations.clear()
    again = DEMO_REFINEMENT.replace("check the bridge was followed", "check that the bridge was followed")
    ledger_before = SplitDecision.objects.count()

    run = evolve(workspace, operator, script=[DEMO_REFINEMENT, again], rounds=2)

    assert list(run.rounds.values_list("outcome", flat=True)) == ["accepted", "accepted"]
    superseded, last = (row.graph_revision for row in run.rounds.order_by("iteration"))
    assert not GraphCertification.objects.filter(candidate=superseded).exists()  # no evaluation, no decision spent
    certification = GraphCertification.objects.get(evolution_run=run)
    assert (certification.candidate, certification.iteration) == (last, 3)  # rounds count on across runs
    assert (certification.source, certification.status) == ("evaluation", "queued")
    assert certification.control_id == workspace.active_revision_id
    assert SplitDecision.objects.count() == ledger_before + 2  # the two scored rounds only
    assert evaluations == ["baseline:0:graph", "candidate:2:graph", "candidate:3:graph"]  # the run's own only
    finish(certification)
    assert latest_certificate("graph_revision", str(last.pk)) is not None


def test_a_run_that_ends_early_still_certifies_its_last_accepted_candidate(operator):
    workspace = two_hop_lab("lab")
    evolve(workspace, operator, script=[ROUND_1_BUILD])
    run = evolution_start(
        actor=Actor(user=operator),
        workspace=workspace,
        rounds=3,
        evaluator="two-hop",
        script=[DEMO_REFINEMENT],
        enqueue=False,
    )
    from graphs.evolution.services import evolution_cancel, evolution_step

    evolution_step(run_id=run.pk, worker="w")  # the baseline
    evolution_step(run_id=run.pk, worker="w")  # round 2, accepted
    evolution_cancel(actor=Actor(user=operator), run=run)

    run.refresh_from_db()
    assert run.status == "cancelled"
    certification = GraphCertification.objects.get(evolution_run=run)
    assert certification.candidate == run.rounds.get().graph_revision and certification.status == "queued"


def test_a_round_in_a_workspace_with_nothing_active_is_certified_against_no_graph(operator, evaluations):
    workspace = two_hop_lab("bare", activate=False)
    run = evolve(workspace, operator, script=[ROUND_1_BUILD])
    certification = finish(GraphCertification.objects.get(evolution_run=run))

    assert evaluations[-2:] == ["candidate:0:graph", "control:0:none"]
    certificate = latest_certificate("graph_revision", str(certification.candidate_id))
    # Unguided, the solver answers with the top hit's fact: the one-hop questions pass, as under the skeleton.
    assert outcomes(certificate) == {"val0": "both_passed", "val1": "repair", "val2": "both_passed", "val3": "repair"}
    assert certificate.replaces_id == ""


def test_each_scored_round_is_one_decision_on_the_validation_split(operator):
    workspace = two_hop_lab("lab")
    from graphs.core.twohop import SCRIPTED_REPLIES

    evolve(workspace, operator, script=list(SCRIPTED_REPLIES), rounds=4)
    ledger = list(SplitDecision.objects.order_by("number").values_list("number", "what", "subject", "passed"))
    run = EvolutionRun.objects.get()
    assert ledger == [
        (1, "evolution_round", f"evolution_run:{run.pk}:round:1", True),
        (2, "certificate", f"graph_revision:{run.rounds.get(iteration=1).graph_revision_id}", True),
        (3, "evolution_round", f"evolution_run:{run.pk}:round:3", False),  # 2 failed structurally, 4 a duplicate
    ]


def test_a_round_recorded_before_a_crash_queues_its_certification_once(operator, monkeypatch):
    control = run_inline(start_bare("control", operator))
    die_once(
        monkeypatch, __import__("graphs.evolution.stores").evolution.stores.RunRejectionStore, "save", when=recording(1)
    )

    run = run_through_one_crash(start_bare("lab", operator))

    assert run_record(run) == run_record(control)
    assert uplift_record(run.workspace)["certifications"] == [("evaluation", "queued", 1, None, True)]


def start_bare(slug: str, operator) -> EvolutionRun:
    workspace = two_hop_lab(slug, activate=False)
    return evolution_start(
        actor=Actor(user=operator), workspace=workspace, rounds=4, evaluator="two-hop", enqueue=False
    )


# -- the gate ----------------------------------------------------------------------------------------------------------


def measured_and_worse(operator) -> Revision:
    """A revision an evolution round accepted (it beats the retained head) that breaks what the active revision
    does: active #0 passes t0..t5, the head #1 only t0, the candidate t0 and t1."""
    workspace = workspace_with("gate", 0, 1, 2, 3, 4, 5)
    append(workspace, 0)
    reply = (
        '{"add_nodes": [{"id": "skill1", "type": "ACTION", "description": "use skill1"}], "delete_nodes": [], '
        '"add_edges": [{"source": "skill0", "target": "skill1", "relation": "LEADS_TO", "guidance": "then skill1"},'
        ' {"source": "skill1", "target": "End", "relation": "LEADS_TO", "guidance": "done"}], '
        '"delete_edges": [{"source": "skill0", "target": "End"}]}'
    )
    run = evolution_start(
        actor=Actor(user=operator), workspace=workspace, rounds=1, evaluator="skills", script=[reply], enqueue=False
    )
    run = run_inline(run)
    assert list(run.rounds.values_list("outcome", flat=True)) == ["accepted"], run.error
    return run.rounds.get().graph_revision


def test_the_gate_waits_for_a_certificate_and_blocks_a_failing_one(operator):
    candidate = measured_and_worse(operator)
    kind = GraphRevisionKind()

    pending = kind.gate_evidence(str(candidate.pk))
    assert pending.passing is None
    assert "not certified yet" in pending.summary and "queued" in pending.summary
    assert pending.details["certificate"] is None

    finish(GraphCertification.objects.get(candidate=candidate))
    evidence = kind.gate_evidence(str(candidate.pk))
    assert evidence.passing is False  # the evolution gate passed; the certificate did not
    certificate = evidence.details["certificate"]
    # The candidate keeps t0 and t1 and breaks t2..t5, which the active revision passes.
    assert (certificate["passed"], certificate["repairs"], certificate["breakages"]) == (False, 0, 4)
    assert evidence.details["certificate_tasks"] == 8
    assert "worse on average" in " ".join(latest_certificate("graph_revision", str(candidate.pk)).reasons)
    (choice,) = [c for c in kind.proposable("gate") if c.id == str(candidate.pk)]
    assert choice.gate_passing is False and "certificate failing" in choice.gate_note


def test_a_passing_certificate_passes_the_gate(operator):
    workspace = two_hop_lab("lab")
    run = evolve(workspace, operator, script=[ROUND_1_BUILD])
    revision = run.rounds.get().graph_revision
    evidence = GraphRevisionKind().gate_evidence(str(revision.pk))
    assert evidence.passing is True and "certified" in evidence.summary
    assert evidence.details["certificate"]["repairs"] == 2
    assert evidence.metrics[-1]["passed"] is True


def test_the_gate_costs_a_fixed_number_of_queries(operator, django_assert_max_num_queries):
    workspace = two_hop_lab("lab")
    revision = evolve(workspace, operator, script=[ROUND_1_BUILD]).rounds.get().graph_revision
    with django_assert_max_num_queries(3):  # the revision, its round, its certificate
        GraphRevisionKind().gate_evidence(str(revision.pk))


# -- the command -----------------------------------------------------------------------------------------------------


def test_the_certify_command_measures_and_says_the_verdict(operator, capsys):
    workspace = workspace_with("cmd", 0)
    append(workspace, 0, 1)
    call_command("certify", "--workspace", "cmd", "--revision", "1", "--evaluator", "skills", "--wait")
    out = capsys.readouterr().out
    assert "against #0" in out and "certified: With" in out
    with pytest.raises(CommandError, match="no graph revision 9"):
        call_command("certify", "--workspace", "cmd", "--revision", "9")


def test_an_expired_lease_is_taken_over(operator):
    from graphs.certification_services import certifications_to_resume

    workspace = workspace_with("lease", 0)
    certification, _ = graph_certify(actor=Actor(user=operator), revision=append(workspace, 1), evaluator="skills")
    GraphCertification.objects.filter(pk=certification.pk).update(
        status="running", lease_owner="dead", lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert certifications_to_resume() == [certification.pk]
    assert finish(certification).status == "done"
    assert Certificate.objects.count() == 1


# -- the kind's certified-uplift hooks ---------------------------------------------------------------------------------


def test_every_text_an_agent_reads_is_offered_to_the_safety_scan(operator):
    workspace = two_hop_lab("lab")
    revision = evolve(workspace, operator, script=[ROUND_1_BUILD]).rounds.get().graph_revision
    texts = {text.where: text.text for text in GraphRevisionKind().learned_texts(str(revision.pk))}
    assert texts["node read description"] == "Read a document's text"
    assert texts["edge read → search pitfalls"].startswith("Do not answer with the first document's fact")
    assert texts["edge search → read condition"] == "search returned at least one document"


def test_active_workspaces_and_the_models_of_the_runs_they_guided(operator):
    from tests.trajectories.factories import ingest, run_item

    workspace_with("ws", 0)
    ingest(*[run_item(graph_workspace="ws", metadata={"model": model}) for model in ("m1", "m1", "m2")])
    (artifact,) = [a for a in GraphRevisionKind().active_artifacts() if a.parent_key == "ws"]
    assert artifact.label.startswith("#0 · ")
    assert GraphRevisionKind().recent_run_models(artifact, limit=10) == {"m1": 2, "m2": 1}


def test_recertification_queues_a_new_certification_and_says_so(operator):
    workspace = two_hop_lab("lab")
    revision = evolve(workspace, operator, script=[ROUND_1_BUILD]).rounds.get().graph_revision
    kind = GraphRevisionKind()
    with pytest.raises(ValueError, match="cannot measure runs of m1"):
        kind.recertify(actor=Actor(user=operator), candidate_id=str(revision.pk), model="m1")
    sentence = kind.recertify(actor=Actor(user=operator), candidate_id=str(revision.pk), model=None)
    assert sentence.startswith("certification ") and "against #0" in sentence and sentence.endswith("queued")
    certification = finish(GraphCertification.objects.filter(candidate=revision).latest("id"))
    assert certification.status == "done" and Certificate.objects.filter(candidate_id=str(revision.pk)).count() == 2


# -- the workspace page --------------------------------------------------------------------------------------------


def test_the_workspace_page_shows_certificates_and_operators_certify_from_it(operator, viewer):
    from django.urls import reverse

    from tests.conftest import logged_in
    from tests.helpers.graphs import csrf

    workspace = two_hop_lab("lab")
    evolve(workspace, operator, script=[ROUND_1_BUILD])
    client = logged_in(operator)
    html = client.get(reverse("graphs:workspace", args=["lab"])).content.decode()
    assert "certified: 2 repaired, 0 broken, n = 4" in html and "Certify revision #1" in html
    assert "not certified yet" in html  # the active skeleton never was

    response = client.post(reverse("graphs:certify", args=["lab"]), {"revision": "0"}, headers=csrf(client))
    assert response.status_code == 302
    assert GraphCertification.objects.filter(candidate__seq=0, workspace=workspace).count() == 1
    reader = logged_in(viewer)
    reader.get(reverse("graphs:workspace", args=["lab"]))
    refused = reader.post(reverse("graphs:certify", args=["lab"]), {"revision": "1"}, headers=csrf(reader))
    assert refused.status_code == 403 and "needs the operator role" in refused.content.decode()
    assert "Certify revision" not in logged_in(viewer).get(reverse("graphs:workspace", args=["lab"])).content.decode()


def test_the_demo_candidate_is_certified_against_the_active_graph_at_seeding():
    from graphs.demo import DEMO_POLICY, seed_demo_graphs
    from uplift.selectors import policy_for

    workspace = seed_demo_graphs(actor=SYSTEM).workspace
    candidate_id = GraphRevisionKind().demo_candidate(actor=SYSTEM)
    certificate = latest_certificate("graph_revision", candidate_id)
    assert certificate.passed and certificate.replaces_id == str(workspace.active_revision_id)
    assert (certificate.totals["n"], certificate.totals["both_passed"]) == (4, 4)  # both graphs answer all four
    assert certificate.policy["min_n"] == DEMO_POLICY["min_n"] == policy_for("graph_revision", "two-hop-qa").min_n
    assert GraphRevisionKind().gate_evidence(candidate_id).passing is True
