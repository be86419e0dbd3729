"""A Celery app for the certification fault test's worker subprocess (tests/faults.py), with test-only patches: the
pool process SIGKILLs itself once at each named point of a certification step, and every arm it measures is appended
to a file (so the test can count the evaluations across processes).

The points: `measuring:<arm>` as an arm's evaluation starts; `stored:<arm>` just after its evaluation was kept on the
row; `finishing` as the step is about to issue the certificate; `finished` just after that transaction committed.
"""

from tests.faults import die_once_at, note, worker_app

app = worker_app()

from graphs import certification_services  # noqa: E402

_measure_arm = certification_services.measure_arm


def measure_arm(certification, evaluator, arm):
    die_once_at(f"measuring:{arm}")
    evaluation = _measure_arm(certification, evaluator, arm)
    note("evaluations.log", arm)
    return evaluation


certification_services.measure_arm = measure_arm

_update_owned = certification_services._update_owned


def update_owned(certification, worker, **fields):
    _update_owned(certification, worker, **fields)
    for arm in ("candidate", "control"):
        if f"{arm}_evaluation" in fields:
            die_once_at(f"stored:{arm}")


certification_services._update_owned = update_owned

_finish = certification_services._finish


def finish(certification, worker):
    die_once_at("finishing")
    result = _finish(certification, worker)
    die_once_at("finished")
    return result


certification_services._finish = finish
