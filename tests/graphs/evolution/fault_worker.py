"""A Celery app for the fault test's worker subprocess: the project's app on the test database and a Redis broker,
with two test-only patches: the pool process SIGKILLs itself once at each named point, and every evaluation the
two-hop environment completes is appended to a file (so the test can count them across processes)."""

import os
import signal
from pathlib import Path

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
django.setup()

from config.celery import app  # noqa: E402
from graphs.core.twohop import TwoHopEnvironment  # noqa: E402
from graphs.evolution import services, stores  # noqa: E402

app.conf.update(broker_url=os.environ["FAULT_BROKER_URL"], task_always_eager=False)

MARKERS = Path(os.environ["FAULT_DIR"])
POINTS = [point for point in os.environ.get("FAULT_KILL_POINTS", "").split(",") if point]


def die_once_at(point: str) -> None:
    if point not in POINTS:
        return
    marker = MARKERS / f"killed-{point.replace(':', '-')}"
    if marker.exists():
        return
    marker.write_text(str(os.getpid()))
    os.kill(os.getpid(), signal.SIGKILL)


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
    with open(MARKERS / "evaluations.log", "a") as log:
        log.write(f"{purpose}:{iteration}\n")
    return evaluation


TwoHopEnvironment.evaluate = evaluate
