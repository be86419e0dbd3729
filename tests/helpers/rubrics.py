"""Shared helpers of the rubric tests (and of the other apps' tests that need a rubric): a refund run, a candidate
version proposed through the real service, a form post with its CSRF token, and `committed`, the fixture that runs
what a service enqueued on commit (Celery runs eagerly)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from accounts.services import Actor
from llm.core import ScriptedChatModel
from rubrics import services
from rubrics.models import RubricJobStatus, RubricVersion
from tests.trajectories.factories import ingest, run_item, step_item


def act(user) -> Actor:
    return Actor(user=user)


def make_run(**overrides) -> int:
    items = run_item(
        steps=[step_item("lookup_policy"), step_item("check_order", ok=False), step_item("issue_refund")], **overrides
    )
    return ingest(items).created_ids[0]


def use_model(monkeypatch, replies):
    model = ScriptedChatModel({"rubric": replies})
    monkeypatch.setattr(services, "get_chat_model", lambda: model)
    return model


@pytest.fixture
def committed(django_capture_on_commit_callbacks):
    """committed(service, **kwargs): call a service and run what it enqueued on commit (Celery runs eagerly)."""

    def call(service, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return service(**kwargs)

    return call


def make_version(actor_user, committed, *, run_id=None) -> RubricVersion:
    """A candidate version of the refund rubric, proposed through the real service with the demo model."""
    run_id = run_id or make_run()
    job = committed(services.rubric_propose_start, actor=act(actor_user), key="refund_request", run_ids=[run_id])
    job.refresh_from_db()
    assert job.status == RubricJobStatus.SUCCEEDED, job.error
    return job.result_version


def post(client, url, data, **kwargs):
    """A form post as a browser sends it: the CSRF cookie from a page first, then the token in the form."""
    client.get(reverse("rubrics:list"))
    cookie = client.cookies.get("csrftoken")
    return client.post(url, {**data, "csrfmiddlewaretoken": cookie.value if cookie else ""}, **kwargs)
