"""The one Celery app. Settings come from Django settings under the CELERY_ prefix (config/settings/base.py)."""

import logging.config
import os

from celery import Celery
from celery.signals import setup_logging

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = Celery("waymark")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@setup_logging.connect
def _configure_logging_from_django(**kwargs) -> None:
    """Workers and beat log through settings.LOGGING (plain or JSON, with task ids) instead of Celery's own format."""
    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)


# Every process that runs tasks stamps its liveness, and beat frees the leases of dead ones (common/liveness.py): the
# module connects the worker signals, so it is imported wherever the app is.
import common.liveness  # noqa: E402, F401
