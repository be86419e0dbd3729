"""The one Celery app. Settings come from Django settings under the CELERY_ prefix (config/settings/base.py)."""

import logging.config
import os

from celery import Celery
from celery.signals import setup_logging, task_postrun, task_prerun, worker_process_init, worker_ready

from config.heap import freeze_startup_objects

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = Celery("waymark")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@setup_logging.connect
def _configure_logging_from_django(**kwargs) -> None:
    """Workers and beat log through settings.LOGGING (plain or JSON, with task ids) instead of Celery's own format."""
    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)


@worker_process_init.connect
@worker_ready.connect
def _freeze_what_startup_made(**kwargs) -> None:
    """Once a process that runs tasks is set up (a pool process, or the worker itself): config.heap."""
    freeze_startup_objects()


def _eager(task) -> bool:
    """A task run in its caller (tests, WAYMARK_TASKS_EAGER): the caller's connections, maybe in a transaction."""
    return bool(getattr(getattr(task, "request", None), "is_eager", False))


@task_prerun.connect
def _usable_connections(sender=None, **kwargs) -> None:
    """Before a task: Django's rules for a connection kept from the task before (CONN_MAX_AGE, a transaction left
    open, errors), then one round trip to make sure the server still holds it (CONN_HEALTH_CHECKS' check), so a
    connection the server dropped meanwhile costs a reconnect, not a failed task."""
    if _eager(sender):
        return
    from django.db import close_old_connections, connections

    close_old_connections()
    for conn in connections.all(initialized_only=True):
        if conn.connection is not None and not conn.is_usable():
            conn.close()


@task_postrun.connect
def _close_old_connections(sender=None, **kwargs) -> None:
    """After a task: what Django closes after a request (CELERY_DB_REUSE_MAX in config/settings/base.py)."""
    if _eager(sender):
        return
    from django.db import close_old_connections

    close_old_connections()


# Every process that runs tasks stamps its liveness, and beat frees the leases of dead ones (common/liveness.py): the
# module connects the worker signals, so it is imported wherever the app is.
import common.liveness  # noqa: E402, F401
