"""A Celery app for the evolution fault test's worker subprocess (tests/faults.py), with two test-only patches: the
pool process SIGKILLs itself once at each named point, and every evaluation the two-hop environment completes is
appended to a file (so the test can count them across processes).

The points: a stage's start (`baseline`, `rollout:k`, `refiner:k`, `validation:k`); `accepted:k` just after round k's
graph was appended; `recorded:k` just after round k was recorded (its rejection-memory revision and round row
committed); `settle:baseline` / `settle:k` when the step is about to record on the run what it did; `enqueue:n` after
that record committed (n rounds done) and before the next step is sent; `end:<reason>` as the run is being ended.
"""

from django.db import transaction

from tests.faults import die_once_at, note, worker_app

app = worker_app()

from graphs.core.twohop import TwoHopEnvironment  # noqa: E402
from graphs.evolution import services, stores  # noqa: E402
from graphs.models import EvolutionRun  # noqa: E402

_stage = services.RunHooks.stage


def stage(self, name):
    die_once_at(name)
    return _stage(self, name)


services.RunHooks.stage = stage

_accept = stores.RunGraphStore.accept


def accept(self, candidate, *, expected_ref):
    ref = _accept(self, candidate, expected_ref=expected_ref)
    die_once_at(f"accepted:{candidate.meta.get('iteration')}")
    return ref


stores.RunGraphStore.accept = accept

_save = stores.RunRejectionStore.save


def save(self, memory, *, expected_ref, iteration):
    ref = _save(self, memory, expected_ref=expected_ref, iteration=iteration)
    die_once_at(f"recorded:{iteration}")
    return ref


stores.RunRejectionStore.save = save

_settle = services._settle


def settle(run, worker, report, *args, **kwargs):
    die_once_at(f"settle:{report.iterations[-1].iteration}" if report.iterations else "settle:baseline")
    return _settle(run, worker, report, *args, **kwargs)


services._settle = settle

_enqueue_on_commit = services._enqueue_on_commit


def enqueue_on_commit(run_id, countdown=None):
    def die() -> None:
        rounds_done = EvolutionRun.objects.values_list("rounds_done", flat=True).get(pk=run_id)
        die_once_at(f"enqueue:{rounds_done}")

    transaction.on_commit(die)  # runs first: after the commit, before the next step is sent
    _enqueue_on_commit(run_id, countdown)


services._enqueue_on_commit = enqueue_on_commit

_end = services._end


def end(run, worker, status, reason, error=""):
    die_once_at(f"end:{reason}")
    return _end(run, worker, status, reason, error)


services._end = end

_evaluate = TwoHopEnvironment.evaluate


def evaluate(self, ref, graph, *, iteration, purpose):
    evaluation = _evaluate(self, ref, graph, iteration=iteration, purpose=purpose)
    note("evaluations.log", f"{purpose}:{iteration}")
    return evaluation


TwoHopEnvironment.evaluate = evaluate
