"""Mining never trains on evaluation runs (issue 25, item 3): the runs answering evaluation jobs are evidence of
their own jobs; a live-replay answer with the intent and steps of a training run must stay out of every list of a
mined version, and out of the count that decides when an intent is mined again."""

import pytest

from accounts.services import Actor
from procedures.mining import intent_key
from procedures.mining import services as mining_services
from tests.trajectories.factories import answered_run
from trajectories.models import Run

from .factories import REFUND, refund_run, refund_runs

pytestmark = pytest.mark.django_db


def test_a_mined_version_never_lists_an_evaluation_run(operator):
    refund_runs(successes=8, failures=2)
    answers = [answered_run(refund_run("lookup_policy", "issue_refund", "notify"))[0] for _ in range(6)]
    assert set(Run.objects.filter(pk__in=answers).values_list("source", flat=True)) == {"waymark-evaluation"}

    version = mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND, live=False).version

    listed = {*version.training_run_ids, *version.held_out_run_ids, *version.source_run_ids}
    assert listed and not listed & set(answers)
    assert [step["tool"] for step in version.steps] == ["lookup_policy", "issue_refund"]  # no "notify" from answers


def test_evaluation_runs_do_not_make_an_intent_due_for_mining():
    for _ in range(12):
        answered_run(refund_run())
    assert mining_services.intents_due_for_mining(min_new_runs=10) == []
    refund_runs(successes=10, failures=0)
    assert mining_services.intents_due_for_mining(min_new_runs=10) == [intent_key(REFUND)]
