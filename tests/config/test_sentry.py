"""Optional error reporting: Sentry's SDK only when SENTRY_DSN is set; never any network here."""

import sys
from unittest import mock

from config.sentry import init_sentry


def test_without_a_dsn_sentry_is_neither_imported_nor_initialised(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentry_sdk", None)  # any import of sentry_sdk would now raise ImportError
    assert init_sentry({}) is False
    assert init_sentry({"SENTRY_DSN": "  "}) is False


def test_with_a_dsn_sentry_is_initialised_with_the_django_and_celery_integrations():
    from sentry_sdk.integrations.celery import CeleryIntegration
    from sentry_sdk.integrations.django import DjangoIntegration

    dsn = "https://public@o0.ingest.example.invalid/1"
    with mock.patch("sentry_sdk.init") as init:
        assert init_sentry({"SENTRY_DSN": dsn, "SENTRY_ENVIRONMENT": "staging"}) is True

    init.assert_called_once()
    kwargs = init.call_args.kwargs
    assert kwargs["dsn"] == dsn
    assert kwargs["send_default_pii"] is False
    assert kwargs["environment"] == "staging"
    assert kwargs["traces_sample_rate"] == 0
    kinds = {type(integration) for integration in kwargs["integrations"]}
    assert kinds == {DjangoIntegration, CeleryIntegration}
