from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from accounts.models import AuditEvent
from common.reaper import reap_stuck_work, register_stuck_work, registered_stuck_work, stuck_work_reap
from config.celery import app
from llm.models import ModelCall
from llm.services import model_calls_abandon_stuck
from tests.llm.factories import recorded_call

pytestmark = pytest.mark.django_db

STUCK_AFTER = timedelta(seconds=settings.WAYMARK_STUCK_AFTER_SECONDS)


def running_since(age: timedelta) -> ModelCall:
    return recorded_call(outcome="running", started_at=timezone.now() - age)


def test_the_task_abandons_only_calls_running_longer_than_the_limit():
    stuck = running_since(STUCK_AFTER + timedelta(minutes=5))
    young = running_since(STUCK_AFTER - timedelta(minutes=5))
    old_but_done = recorded_call(outcome="succeeded", started_at=timezone.now() - STUCK_AFTER * 3)
    old_failed = recorded_call(outcome="failed", started_at=timezone.now() - STUCK_AFTER * 3)

    reap_stuck_work.delay()

    statuses = dict(ModelCall.objects.values_list("pk", "status"))
    assert statuses == {
        stuck.pk: "abandoned",
        young.pk: "running",
        old_but_done.pk: "succeeded",
        old_failed.pk: "failed",
    }


def test_each_reaped_row_gets_a_system_audit_event():
    stuck = running_since(STUCK_AFTER * 2)
    assert stuck_work_reap()["llm.modelcall"] == 1
    event = AuditEvent.objects.get()
    assert (event.verb, event.actor_label) == ("modelcall.reaped", "system")
    assert (event.target_type, event.target_id) == ("llm.modelcall", str(stuck.pk))
    assert event.before == {"status": "running"}
    assert event.after["status"] == "abandoned"


def test_reaping_again_changes_nothing_and_audits_nothing():
    running_since(STUCK_AFTER * 2)
    running_since(STUCK_AFTER * 4)
    assert stuck_work_reap()["llm.modelcall"] == 2
    assert stuck_work_reap()["llm.modelcall"] == 0
    reap_stuck_work.delay()
    assert ModelCall.objects.filter(status="abandoned").count() == 2
    assert AuditEvent.objects.filter(verb="modelcall.reaped").count() == 2


def test_the_limit_comes_from_settings(settings):
    settings.WAYMARK_STUCK_AFTER_SECONDS = 60
    call = running_since(timedelta(minutes=2))
    stuck_work_reap()
    call.refresh_from_db()
    assert call.status == "abandoned"


def test_modelcall_is_registered_by_its_app_with_its_own_service():
    assert registered_stuck_work()["llm.modelcall"] is model_calls_abandon_stuck


def test_every_registered_reaper_gets_the_cutoff_and_reports_its_count(monkeypatch):
    seen = []

    def reap(*, cutoff):
        seen.append(cutoff)
        return 7

    monkeypatch.setattr("common.reaper._registry", {})
    register_stuck_work("tests.thing", reap)
    now = timezone.now()
    assert stuck_work_reap(now=now, stuck_after=timedelta(minutes=3)) == {"tests.thing": 7}
    assert seen == [now - timedelta(minutes=3)]


def test_registering_something_not_callable_fails_at_start_up():
    with pytest.raises(TypeError, match="must be callable"):
        register_stuck_work("tests.thing", "llm.services.model_calls_abandon_stuck")


def test_beat_runs_the_registered_task_every_minute():
    entry = settings.CELERY_BEAT_SCHEDULE["reap-stuck-work"]
    app.loader.import_default_modules()
    assert entry["task"] in app.tasks
    assert entry["schedule"] == timedelta(minutes=1)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_row_locked_by_its_finishing_worker_is_left_for_the_next_run():
    import threading

    from django.db import connections, transaction

    stuck = running_since(STUCK_AFTER * 2)
    locked, release = threading.Event(), threading.Event()

    def finishing_worker():
        try:
            with transaction.atomic():
                ModelCall.objects.select_for_update().get(pk=stuck.pk)
                locked.set()
                release.wait(timeout=10)
        finally:
            connections.close_all()

    worker = threading.Thread(target=finishing_worker)
    worker.start()
    try:
        assert locked.wait(timeout=10)
        assert stuck_work_reap()["llm.modelcall"] == 0
    finally:
        release.set()
        worker.join(timeout=10)
    assert stuck_work_reap()["llm.modelcall"] == 1
