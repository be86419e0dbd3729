"""A Celery app for the evolution fault test's worker subprocess (tests/faults.py), with two test-only patches: the
pool process SIGKILLs itself once at each named point, and every evaluation the two-hop environment completes is
appended to a file (so the test can count them across processes)."""

from tests.faults import die_once_at, note, worker_app

app = worker_app()

from graphs.core.twohop import TwoHopEnvironment  # noqa: E402
from graphs.evolution import services, stores  # noqa: E402

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

_evaluate = TwoHopEnvironment.evaluate


def evaluate(self, ref, graph, *, iteration, purpose):
    evaluation = _evaluate(self, ref, graph, iteration=iteration, purpose=purpose)
    note("evaluations.log", f"{purpose}:{iteration}")
    return evaluation


TwoHopEnvironment.evaluate = evaluate
