"""A round's checkpoint is one statement that commits by itself (issue 29): the checkpoint, what is pending with it
and the writes sent along (the run's meter, the ledger's reply) are all written, or, when another writer's append took
a row's place on its chain, none of them (HeadMoved)."""

import pytest

from accounts.services import Actor
from common.statements import update_statement
from graphs.core.stores import HeadMoved
from graphs.evolution.services import evolution_start
from graphs.evolution.stores import CHECKPOINTS, TRACES, DbRevisionStore
from graphs.models import EvolutionRun, Revision
from graphs.services import workspace_create

pytestmark = pytest.mark.postgres


@pytest.fixture
def run(transactional_db):
    workspace = workspace_create(actor=Actor.system(), slug="lab").workspace
    return evolution_start(actor=Actor.system(), workspace=workspace, rounds=1, evaluator="two-hop", enqueue=False)


def checkpoint(run, store: DbRevisionStore):
    """A round's traces and checkpoint pending in `store` (on the heads it read), then written with the run's meter."""
    store.deferring = True
    store.append("lab", TRACES, {"traces": []}, expected_head=store.head_digest("lab", TRACES))
    store.append("lab", CHECKPOINTS, {"iteration": 1}, expected_head=store.head_digest("lab", CHECKPOINTS))
    return store.write_pending(
        also=[update_statement(EvolutionRun.objects.filter(pk=run.pk), meter={"evaluations": 9})]
    )


def test_a_checkpoint_and_what_goes_with_it_are_written_at_once(run):
    store = DbRevisionStore(run.workspace)
    store.read_heads("lab")
    rows = checkpoint(run, store)
    assert [row.kind for row in rows] == [TRACES, CHECKPOINTS] and all(row.pk for row in rows)
    assert EvolutionRun.objects.get(pk=run.pk).meter == {"evaluations": 9}


def test_a_checkpoint_another_writer_got_ahead_of_writes_nothing(run):
    ahead = DbRevisionStore(run.workspace)
    ahead.read_heads("lab")
    store = DbRevisionStore(run.workspace)
    store.read_heads("lab")  # before the other writer's append: its checkpoint takes the same place
    ahead.append("lab", CHECKPOINTS, {"iteration": 0}, expected_head=ahead.head_digest("lab", CHECKPOINTS))
    with pytest.raises(HeadMoved) as moved:
        checkpoint(run, store)
    assert moved.value.kind == CHECKPOINTS
    assert not Revision.objects.filter(workspace=run.workspace, kind=TRACES).exists()
    assert Revision.objects.filter(workspace=run.workspace, kind=CHECKPOINTS).count() == 1
    assert EvolutionRun.objects.get(pk=run.pk).meter != {"evaluations": 9}
