"""GET /api/v1/procedures from prepared bytes (procedures/active_body.py): rendered as django-ninja renders the list,
no query once warm (the stamps reused for at most a second), rebuilt when anything it shows changes — at once for
this process's own writes, within a second for anyone's — and never filed under stamps it was not read with."""

import pytest
from django.db import connection
from django.test import Client, RequestFactory
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from ninja import NinjaAPI

from accounts.services import Actor
from procedures import active_body, selectors
from procedures.mining import services as mining_services
from procedures.models import Procedure, ProcedureVersion
from procedures.schemas import ProcedureListOut
from tests.promote import promote_procedure_version

from .factories import REFUND, refund_runs

pytestmark = pytest.mark.django_db
LIST = "/api/v1/procedures"


@pytest.fixture(autouse=True)
def no_kept_bodies():
    active_body.bodies.clear()
    yield
    active_body.bodies.clear()


@pytest.fixture
def clock(monkeypatch):
    """active_body's monotonic clock, moved by hand: `clock.now += seconds`."""

    class Clock:
        now = 1_000.0

    monkeypatch.setattr(active_body.time, "monotonic", lambda: Clock.now)
    return Clock


@pytest.fixture
def active(operator, django_capture_on_commit_callbacks):
    refund_runs()
    with django_capture_on_commit_callbacks(execute=True):
        version = mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND).version
    promote_procedure_version(version)
    return ProcedureVersion.objects.get(pk=version.pk)


@pytest.fixture
def auth(make_token, viewer):
    return {"Authorization": f"Bearer {make_token(viewer, 'procedures:read')}"}


def newer_version(active: ProcedureVersion) -> ProcedureVersion:
    """A ready version after the active one, with other steps (set-up only)."""
    return ProcedureVersion.objects.create(
        procedure=active.procedure,
        number=active.number + 1,
        steps=[{"tool": "lookup_policy", "arguments": {}}],
        candidate_revision="sha256:" + "1" * 64,
        content_revision="sha256:" + "2" * 64,
        status="ready",
    )


def ninja_rendering() -> bytes:
    """The list as a ninja operation declaring ProcedureListOut renders it (the reference for the prepared bytes)."""
    api = NinjaAPI(urls_namespace="reference-list")

    @api.get("/list", response=ProcedureListOut)
    def reference(request):
        return {"items": selectors.active_procedures()}

    view = next(p.callback for p in api.urls[0] if str(p.pattern) == "list")
    return view(RequestFactory().get("/list")).content


def test_the_prepared_list_is_what_ninja_renders(active, auth):
    response = Client().get(LIST, headers=auth)
    assert response.status_code == 200 and response["Content-Type"] == "application/json; charset=utf-8"
    assert response.content == ninja_rendering()
    assert response.json()["items"][0]["active_version"]["id"] == active.pk


def test_a_warm_list_costs_no_query_for_a_second_then_one_light_query(active, auth, clock):
    assert Client().get(LIST, headers=auth).status_code == 200
    with CaptureQueriesContext(connection) as queries:
        again = Client().get(LIST, headers=auth)
    assert again.status_code == 200 and again.json()["items"] and len(queries) == 0
    clock.now += active_body.STAMPS_LOCAL_SECONDS + 0.01
    with CaptureQueriesContext(connection) as queries:
        later = Client().get(LIST, headers=auth)
    assert later.content == again.content
    assert len(queries) == 1, [q["sql"] for q in queries]
    assert '"steps"' not in queries[0]["sql"]  # the stamps, not the versions' bodies


def test_another_process_s_change_shows_within_a_second_under_the_same_etag(active, auth, clock):
    first = Client().get(LIST, headers=auth)
    # a queryset update sends no signal: to this process it looks like a write made by another one
    Procedure.objects.filter(pk=active.procedure_id).update(title="Refunds, renamed", updated_at=timezone.now())
    clock.now += active_body.STAMPS_LOCAL_SECONDS / 2
    assert Client().get(LIST, headers=auth).content == first.content  # this process's stamps, still current
    clock.now += active_body.STAMPS_LOCAL_SECONDS / 2 + 0.01
    second = Client().get(LIST, headers=auth)
    assert second.json()["items"][0]["title"] == "Refunds, renamed"
    assert second["ETag"] == first["ETag"]  # the ETag follows the active versions only, as before


def test_this_process_s_own_writes_show_at_once(active, auth, clock, operator, django_capture_on_commit_callbacks):
    from procedures.versions import services as version_services

    first = Client().get(LIST, headers=auth)
    with django_capture_on_commit_callbacks(execute=True):
        version_services.rubric_floor_set(actor=Actor(user=operator), procedure=active.procedure, floor=0.7)
    after = Client().get(LIST, headers=auth)  # no time passed
    assert after.json()["items"][0]["updated_at"] != first.json()["items"][0]["updated_at"]
    newer = newer_version(active)
    promote_procedure_version(newer)  # the activation moves the pointer by queryset update, inside a review
    promoted = Client().get(LIST, headers=auth)
    assert promoted["ETag"] != first["ETag"]
    assert promoted.json()["items"][0]["active_version"]["id"] == newer.pk


def test_a_body_read_after_a_promotion_is_not_filed_under_the_stamps_before_it(active):
    before = active_body.read_stamps(None)
    newer = newer_version(active)
    promote_procedure_version(newer)
    listing = active_body.active_list(None, before)  # the promotion landed between the stamps and the body
    assert listing.etag == active_body.etag_of(active_body.read_stamps(None)) != active_body.etag_of(before)
    assert listing.revision == newer.content_revision
    assert active_body.bodies.get(before) is None
