"""Optional error reporting: Sentry's SDK, initialised only when SENTRY_DSN is set (imported only then)."""

from __future__ import annotations

import os
from collections.abc import Mapping


def init_sentry(environ: Mapping[str, str] | None = None) -> bool:
    """Initialise sentry_sdk with the Django and Celery integrations when SENTRY_DSN is set; True when it did."""
    environ = os.environ if environ is None else environ
    dsn = environ.get("SENTRY_DSN", "").strip()
    if not dsn:
        return False
    import sentry_sdk
    from sentry_sdk.integrations.celery import CeleryIntegration
    from sentry_sdk.integrations.django import DjangoIntegration

    sentry_sdk.init(
        dsn=dsn,
        integrations=[DjangoIntegration(), CeleryIntegration()],
        environment=environ.get("SENTRY_ENVIRONMENT", "").strip() or "production",
        release=environ.get("SENTRY_RELEASE", "").strip() or None,
        traces_sample_rate=float(environ.get("SENTRY_TRACES_SAMPLE_RATE", "0") or 0),
        send_default_pii=False,
    )
    return True
