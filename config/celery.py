"""The one Celery app. Settings come from Django settings under the CELERY_ prefix (config/settings/base.py)."""

import logging.config
import os

from celery import Celery
from celery.signals import setup_logging
from django.db.utils import InterfaceError as DatabaseInterfaceError
from django.db.utils import OperationalError as DatabaseOperationalError

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = Celery("waymark")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@setup_logging.connect
def _configure_logging_from_django(**kwargs) -> None:
    """Workers and beat log through settings.LOGGING (plain or JSON, with task ids) instead of Celery's own format."""
    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)


# Errors worth a retry with backoff: the network and the broker (OSError covers ConnectionError and TimeoutError)
# and a dropped or busy database connection. Tasks opt in: @shared_task(autoretry_for=TRANSIENT_ERRORS, ...).
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (OSError, DatabaseOperationalError, DatabaseInterfaceError)

# Every process that runs tasks stamps its liveness, and beat frees the leases of dead ones (config/liveness.py): the
# module connects the worker signals, so it is imported wherever the app is.
from config import liveness  # noqa: E402, F401
