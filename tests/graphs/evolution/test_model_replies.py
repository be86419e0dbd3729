"""An evolution round whose refiner reply is not an answer (issue 25, item 4), with the real Anthropic adapter behind
a stand-in provider (HTTP mocked): a reply cut at max_tokens or empty is the round's structural failure with its
diagnostics (spec §6: a reply that does not parse, even after the retry), never a candidate; a body that is no reply
at all (an HTML page) is transient, so the step is retried and, past its attempts, the run fails with the reason.
Nothing is accepted either way, and every call is in the ledger with its diagnostics."""

import pytest

from accounts.services import Actor
from graphs.evolution.demo import run_inline
from graphs.evolution.services import MAX_CRASHES, evolution_start, evolution_step
from graphs.models import EvolutionRun, Revision
from graphs.services import workspace_create
from llm.core import ModelReplyInvalid
from llm.models import ModelCall
from tests.llm.stand_in import StandIn, cut_at_max_tokens, empty_content, html_page

pytestmark = pytest.mark.django_db
TASK = "two-hop question answering over a small corpus"


@pytest.fixture
def lab():
    return workspace_create(actor=Actor.system(), slug="lab", task_description=TASK).workspace


@pytest.fixture
def provider(settings, monkeypatch):
    """The configured model is Anthropic (a key is set), answering from `answer` through the real SDK."""
    settings.ANTHROPIC_API_KEY = "sk-test"

    def use(answer) -> StandIn:
        stand_in = StandIn(answer)
        monkeypatch.setattr("graphs.evolution.services.get_chat_model", lambda: stand_in.model(max_retries=0))
        return stand_in

    return use


def start(workspace, operator, **config):
    return evolution_start(
        actor=Actor(user=operator), workspace=workspace, rounds=1, evaluator="two-hop", enqueue=False, config=config
    )


def graph_revisions(workspace):
    return Revision.objects.filter(workspace=workspace, kind="graph").count()


@pytest.mark.parametrize(
    ("answer", "kind", "said"),
    [
        (lambda: cut_at_max_tokens('{"add_nodes": [{"id": "search", "type": "ACTION", "descr'), "max_tokens", "cut at"),
        (empty_content, "empty", "no text"),
    ],
)
def test_a_reply_short_of_an_answer_is_a_structural_failure_with_its_diagnostics(
    lab, operator, provider, answer, kind, said
):
    stand_in = provider(answer)
    run = run_inline(start(lab, operator, role_retries=1))
    assert run.status == "succeeded", run.error
    (round_,) = run.rounds.all()
    assert round_.outcome == "structural_failure"
    assert round_.candidate_digest == ""
    assert [d["code"] for d in round_.diagnostics] == ["malformed_edit"]
    assert said in round_.diagnostics[0]["message"]
    assert graph_revisions(lab) == 1  # nothing accepted: the skeleton is still the head
    calls = list(ModelCall.objects.filter(role="refiner").order_by("id"))
    assert len(calls) == len(stand_in.requests) == 2  # the reply and the one retry the refiner allows
    assert {call.status for call in calls} == {"failed"}
    assert {call.diagnostics["kind"] for call in calls} == {kind}
    assert round_.model_calls == 2


def test_an_html_page_is_retried_and_past_its_attempts_fails_the_run_with_the_reason(lab, operator, provider):
    stand_in = provider(html_page)
    run = start(lab, operator)
    evolution_step(run_id=run.pk, worker="w")  # the baseline needs no model
    with pytest.raises(ModelReplyInvalid):  # transient: Celery retries the step with backoff
        evolution_step(run_id=run.pk, worker="w")
    run.refresh_from_db()
    assert run.status == "running" and run.lease_owner == ""
    assert "not a Messages reply" in run.error
    for _ in range(MAX_CRASHES + 2):
        try:
            evolution_step(run_id=run.pk, worker="w")
        except ModelReplyInvalid:
            continue
    run.refresh_from_db()
    assert run.status == EvolutionRun.Status.FAILED
    assert "not a Messages reply" in run.error
    assert run.rounds.count() == 0 and graph_revisions(lab) == 1
    calls = ModelCall.objects.filter(role="refiner")
    assert calls.count() == len(stand_in.requests) >= 2
    assert set(calls.values_list("diagnostics__kind", flat=True)) == {"html"}
