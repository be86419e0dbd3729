"""The watch after activation: runs that followed a version (`runs`) and one look of the watch (`look`)."""

from tests.procedures.factories import REFUND
from tests.trajectories.factories import ingest, run_item
from uplift import watch_services


def runs(version, n, *, success_rate):
    """n runs that followed `version`, the first round(n * success_rate) successful."""
    good = round(n * success_rate)
    items = [
        run_item(
            intent=REFUND, procedure_revision=version.content_revision, outcome="success" if i < good else "failure"
        )
        for i in range(n)
    ]
    return ingest(*items).created_ids


def look(watch, worker="w1", now=None):
    return watch_services.watch_look(watch_id=watch.pk, worker=worker, now=now)
