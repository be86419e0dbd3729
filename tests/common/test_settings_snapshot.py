"""common.settings_snapshot: settings read once, then served from memory, and read again after a change."""

import pytest
from django.test import override_settings

from common.settings_snapshot import SettingsSnapshot


def test_a_snapshot_serves_its_settings_and_follows_a_change(settings):
    settings.WAYMARK_API_RATE_BATCH = 7
    snapshot = SettingsSnapshot("WAYMARK_API_RATE_BATCH")
    assert snapshot.WAYMARK_API_RATE_BATCH == 7
    settings.WAYMARK_API_RATE_BATCH = 9  # the fixture sends setting_changed
    assert snapshot.WAYMARK_API_RATE_BATCH == 9
    with override_settings(WAYMARK_API_RATE_BATCH=3):
        assert snapshot.WAYMARK_API_RATE_BATCH == 3
    assert snapshot.WAYMARK_API_RATE_BATCH == 9


def test_a_snapshot_answers_only_the_names_it_was_given():
    snapshot = SettingsSnapshot("WAYMARK_API_RATE_BATCH")
    with pytest.raises(AttributeError):
        snapshot.DEBUG  # noqa: B018
    with pytest.raises(AttributeError):
        snapshot._private  # noqa: B018


def test_the_rate_limit_follows_a_changed_setting(settings):
    from common import ratelimit

    settings.WAYMARK_API_RATE_PER_TOKEN = 1000
    settings.WAYMARK_API_RATE_BATCH = 20
    assert ratelimit.token_batch(1000) == 20
    settings.WAYMARK_API_RATE_BATCH = 50
    assert ratelimit.token_batch(1000) == 50
