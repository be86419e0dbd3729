"""GET /api/v1/procedures from prepared bytes (procedures/active_body.py): rendered as django-ninja renders the list,
one light query once warm, rebuilt when anything it shows changes, never filed under stamps it was not read with."""

import pytest
from django.db import connection
from django.test import Client, RequestFactory
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from ninja import NinjaAPI

from accounts.services import Actor
from procedures import active_body, mining_services, selectors
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
def active(operator, django_capture_on_commit_callbacks):
    refund_runs()
    with django_capture_on_commit_callbacks(execute=True):
        version = mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND).version
    promote_procedure_version(version)
    return ProcedureVersion.objects.get(pk=version.pk)


@pytest.fixture
def auth(make_token, viewer):
    return {"Authorization": f"Bearer {make_token(viewer, 'procedures:read')}"}


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


def test_a_warm_list_costs_one_light_query(active, auth):
    assert Client().get(LIST, headers=auth).status_code == 200
    with CaptureQueriesContext(connection) as queries:
        again = Client().get(LIST, headers=auth)
    assert again.status_code == 200 and again.json()["items"]
    assert len(queries) == 1, [q["sql"] for q in queries]
    assert '"steps"' not in queries[0]["sql"]  # the stamps, not the versions' bodies


def test_a_change_to_what_the_list_shows_rebuilds_it_under_the_same_etag(active, auth):
    first = Client().get(LIST, headers=auth)
    Procedure.objects.filter(pk=active.procedure_id).update(title="Refunds, renamed", updated_at=timezone.now())
    second = Client().get(LIST, headers=auth)
    assert second.json()["items"][0]["title"] == "Refunds, renamed"
    assert second["ETag"] == first["ETag"]  # the ETag follows the active versions only, as before


def test_a_body_read_after_a_promotion_is_not_filed_under_the_stamps_before_it(active):
    before = active_body.read_stamps(None)
    newer = ProcedureVersion.objects.create(
        procedure=active.procedure,
        number=active.number + 1,
        steps=[{"tool": "lookup_policy", "arguments": {}}],
        candidate_revision="sha256:" + "1" * 64,
        content_revision="sha256:" + "2" * 64,
        status="ready",
    )
    promote_procedure_version(newer)
    listing = active_body.active_list(None, before)  # the promotion landed between the stamps and the body
    assert listing.etag == active_body.etag_of(active_body.read_stamps(None)) != active_body.etag_of(before)
    assert listing.revision == newer.content_revision
    assert active_body.bodies.get(before) is None
