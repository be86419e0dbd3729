import time
from unittest import mock

import pytest
from django.core.cache import cache
from django.db.utils import OperationalError

from config import health_start
from config.celery import app as celery_app
from config.heartbeat import HEARTBEAT_KEY, heartbeat


def test_healthz_reports_database_and_broker(client, db):
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["broker"]["ok"] is True


def test_dashboard_needs_login(client, db):
    response = client.get("/")
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]


# --- what /healthz reports when something is down -------------------------------------------------------------------


@pytest.fixture
def no_heartbeat(monkeypatch):
    # Another test may have built the WSGI application (which notes a start): these checks are past any grace.
    monkeypatch.setattr(health_start, "_started_at", None)
    cache.delete(HEARTBEAT_KEY)
    yield
    cache.delete(HEARTBEAT_KEY)


def test_a_fresh_heartbeat_makes_the_worker_ok(client, db, no_heartbeat):
    heartbeat.delay()  # eager: what a worker does when beat enqueues it
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 200
    assert body["status"] == "ok"
    assert body["checks"]["worker"]["state"] == "ok" and body["checks"]["worker"]["age_seconds"] <= 1
    assert body["checks"]["database"]["state"] == "ok" and body["checks"]["broker"]["state"] == "ok"


def test_no_heartbeat_yet_is_unknown_and_still_200(client, db, no_heartbeat):
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 200
    assert body["status"] == "degraded"
    assert body["checks"]["worker"] == {"ok": False, "state": "unknown", "age_seconds": None}


def test_a_stale_heartbeat_is_reported_with_its_age_and_still_200(client, db, no_heartbeat, settings):
    settings.WAYMARK_HEARTBEAT_STALE_SECONDS = 180
    cache.set(HEARTBEAT_KEY, time.time() - 600, timeout=None)
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 200
    assert body["status"] == "degraded"
    assert body["checks"]["worker"]["state"] == "stale"
    assert 600 <= body["checks"]["worker"]["age_seconds"] < 700


def test_database_down_answers_503(client, db, no_heartbeat):
    broken = mock.Mock(vendor="postgresql")
    broken.cursor.side_effect = OperationalError("could not connect to server: secret-host")
    with mock.patch("config.views.connection", broken):
        response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 503
    assert body["status"] == "down"
    assert body["checks"]["database"] == {"ok": False, "state": "error", "error": "OperationalError"}
    assert body["checks"]["broker"]["ok"] is True
    assert "secret-host" not in response.content.decode()  # error class names only, never messages


def test_broker_unreachable_answers_503(client, db, no_heartbeat):
    with mock.patch.object(celery_app, "connection_for_write", side_effect=ConnectionRefusedError("redis://:pw@h")):
        response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 503
    assert body["status"] == "down"
    assert body["checks"]["broker"] == {"ok": False, "state": "error", "error": "ConnectionRefusedError"}
    assert body["checks"]["database"]["ok"] is True
    assert "pw@h" not in response.content.decode()


def test_beat_sends_the_heartbeat_every_minute():
    entry = celery_app.conf.beat_schedule["worker-heartbeat"]
    assert entry["task"] == "config.heartbeat.heartbeat"
    assert entry["schedule"].total_seconds() == 60
    assert entry["options"]["expires"] == 60
