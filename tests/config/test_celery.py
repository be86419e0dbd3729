"""Celery is configured for reliability: a task is acknowledged only once done, and lost with no worker never."""

import pytest

from common.retry import TRANSIENT_ERRORS
from config.celery import app as celery_app


def test_tasks_are_acknowledged_late_and_requeued_when_the_worker_dies():
    conf = celery_app.conf
    assert conf.task_acks_late is True
    assert conf.task_reject_on_worker_lost is True
    assert conf.worker_prefetch_multiplier == 1


def test_only_json_crosses_the_broker():
    conf = celery_app.conf
    assert conf.task_serializer == "json"
    assert list(conf.accept_content) == ["json"]


def test_every_task_has_a_time_limit():
    conf = celery_app.conf
    assert 0 < conf.task_soft_time_limit < conf.task_time_limit


def test_retrying_tasks_back_off_on_transient_errors_only():
    from django.db.utils import OperationalError

    task = celery_app.tasks["procedures.replay_offline"]
    assert task.autoretry_for == TRANSIENT_ERRORS
    assert task.retry_backoff
    assert issubclass(OperationalError, TRANSIENT_ERRORS) and issubclass(ConnectionError, TRANSIENT_ERRORS)
    assert not issubclass(ValueError, TRANSIENT_ERRORS)


def test_beat_runs_the_reapers():
    tasks = {entry["task"] for entry in celery_app.conf.beat_schedule.values()}
    assert {"common.reaper.reap_stuck_work", "trajectories.jobs.reap_job_leases"} <= tasks


def test_evolution_steps_retry_on_transient_errors_and_beat_resumes_lost_runs():
    import graphs.tasks  # noqa: F401 (workers find it by autodiscovery)

    task = celery_app.tasks["graphs.evolution_step"]
    assert task.autoretry_for == TRANSIENT_ERRORS and task.retry_backoff
    tasks = {entry["task"] for entry in celery_app.conf.beat_schedule.values()}
    assert "graphs.evolution_reap" in tasks


def test_a_periodic_message_older_than_its_period_is_dropped_not_run():
    """A backlog of beat's messages (a worker that was down) never queues no-op reapers ahead of real work."""
    for name, entry in celery_app.conf.beat_schedule.items():
        expires = entry.get("options", {}).get("expires")
        assert expires is not None and 0 < expires <= entry["schedule"].total_seconds(), name


def test_the_embedded_broker_is_polled_often_enough_to_move_many_tasks_a_second():
    """kombu's filesystem transport sleeps its polling interval whenever it finds no message it may take: with one
    task in flight at a time, the interval bounds the tasks moved per second (1 s: one task a second)."""
    from config.settings import base

    if base.REDIS_URL:
        pytest.skip("REDIS_URL is set: the embedded filesystem broker is not configured")
    assert base.CELERY_BROKER_URL == "filesystem://"
    assert base.CELERY_BROKER_TRANSPORT_OPTIONS["polling_interval"] <= 0.1


def test_every_retrying_task_retries_as_common_retry_says():
    """One copy of the retry settings (common.retry.RETRY): no task retries on other errors or another count."""
    from common.retry import RETRY

    celery_app.loader.import_default_modules()  # every app's tasks module, as a worker imports them
    retrying = {name: task for name, task in celery_app.tasks.items() if getattr(task, "autoretry_for", ())}
    assert "otlp.sweep_quiet_traces" in retrying and "graphs.evolution_step" in retrying
    for name, task in retrying.items():
        assert (task.autoretry_for, task.retry_backoff, task.max_retries) == (
            RETRY["autoretry_for"],
            RETRY["retry_backoff"],
            RETRY["max_retries"],
        ), name
