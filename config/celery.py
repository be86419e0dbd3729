"""The one Celery app. Settings come from Django settings under the CELERY_ prefix (config/settings/base.py)."""

import os

from celery import Celery
from django.db.utils import InterfaceError as DatabaseInterfaceError
from django.db.utils import OperationalError as DatabaseOperationalError

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = Celery("waymark")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Errors worth a retry with backoff: the network and the broker (OSError covers ConnectionError and TimeoutError)
# and a dropped or busy database connection. Tasks opt in: @shared_task(autoretry_for=TRANSIENT_ERRORS, ...).
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (OSError, DatabaseOperationalError, DatabaseInterfaceError)
