"""The one Celery app. Settings come from Django settings under the CELERY_ prefix (config/settings/base.py)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = Celery("waymark")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Errors worth a retry with backoff: the network, the broker, the database connection.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError, OSError)
