"""A write that cannot get the database lock in time answers 503 with Retry-After (Error body on the API, a short
page elsewhere), never 500; other database errors stay 500."""

from unittest import mock

import pytest
from django.db import OperationalError

from config.busy import is_database_busy

LOCKED = OperationalError("database is locked")
BATCH = {"runs": [{"source": "t", "external_id": "1", "task": "x", "steps": []}]}


@pytest.fixture
def writer_token(db, make_token):
    """A token that may write runs (an agent identity where the model has one)."""
    from accounts.models import User

    agent = {"is_agent": True} if any(f.name == "is_agent" for f in User._meta.fields) else {}
    return make_token(User.objects.create(username="loader-bot", **agent), "trajectories:write")


def test_the_api_answers_503_with_retry_after_and_the_error_body(api_client, writer_token):
    token = writer_token
    with mock.patch("trajectories.services.run_ingest_batch", side_effect=LOCKED):
        response = api_client.post("/api/v1/trajectories", BATCH, token=token)
    assert response.status_code == 503
    assert response["Retry-After"].isdigit()
    body = response.json()
    assert body["code"] == "busy"
    assert set(body) == {"code", "message", "details"}


def test_a_page_answers_a_short_503_page_with_retry_after(client, admin_user):
    client.force_login(admin_user)
    with mock.patch("trajectories.selectors.run_page", side_effect=LOCKED):
        response = client.get("/trajectories/")
    assert response.status_code == 503
    assert response["Retry-After"].isdigit()
    assert b"busy" in response.content


def test_other_database_errors_stay_500_on_the_api(api_client, writer_token):
    token = writer_token
    with mock.patch("trajectories.services.run_ingest_batch", side_effect=OperationalError("no such table: x")):
        response = api_client.post("/api/v1/trajectories", BATCH, token=token)
    assert response.status_code == 500
    assert "Retry-After" not in response


@pytest.mark.parametrize(
    ("exc", "busy"),
    [
        (OperationalError("database is locked"), True),
        (OperationalError("database table is locked: trajectories_run"), True),
        (OperationalError("no such column: lease_owner"), False),
        (RuntimeError("database is locked"), False),
    ],
)
def test_only_lock_timeouts_count_as_busy(exc, busy):
    assert is_database_busy(exc) is busy
