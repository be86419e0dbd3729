"""One home for who may act (issue 28, item 5): the views that call a service check no role of their own, and
accounts.roles.refusal_shown turns the service's RoleRequired into the page's 403 with its reason (the pages' own
answers are in tests/accounts/test_read_only_role.py and each app's page tests)."""

import inspect

import pytest
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.test import RequestFactory

from accounts.roles import Role, RoleRequired, refusal_shown, require_role
from accounts.services import Actor
from graphs import views as graph_views
from graphs.evolution import views as evolution_views
from intents import views as intent_views
from intents.windows import views as window_views
from procedures import views as procedure_views
from reviews import views as review_views
from uplift import views as uplift_views

VIEWS_THAT_CALL_A_SERVICE = [
    graph_views.certify_view,
    evolution_views.list_view,
    evolution_views.cancel_view,
    intent_views.list_view,
    intent_views.cancel_view,
    window_views.windows_view,
    window_views.compare_view,
    window_views.alert_decide_view,
    uplift_views.watch_set_view,
    uplift_views.watch_stop_view,
    review_views.webhook_toggle_view,
    procedure_views.mine_view,
    procedure_views.amend_view,
    procedure_views.rubric_floor_view,
    procedure_views.rerun_view,
]


def page(request, reason, slug):
    return HttpResponse(f"the {slug} page: {reason}")


@pytest.mark.django_db
def test_a_services_refusal_is_the_pages_403_with_its_reason_as_a_sentence(django_user_model):
    reader = django_user_model.objects.create_user("reader")

    @refusal_shown(page)
    def view(request, slug):
        require_role(Actor(user=reader), Role.OPERATOR, doing="starting an evolution run")
        return HttpResponse("started")

    response = view(RequestFactory().post("/"), slug="lab")
    assert response.status_code == 403
    assert response.content == b"the lab page: Starting an evolution run needs the operator role."


def test_what_is_not_a_role_refusal_passes_through_unchanged():
    @refusal_shown(page)
    def answered(request, slug):
        return HttpResponse("started", status=201)

    @refusal_shown(page)
    def denied(request, slug):
        raise PermissionDenied("not a role refusal")

    assert answered(RequestFactory().post("/"), slug="lab").status_code == 201
    with pytest.raises(PermissionDenied) as raised:
        denied(RequestFactory().post("/"), slug="lab")
    assert not isinstance(raised.value, RoleRequired)


@pytest.mark.parametrize("view", VIEWS_THAT_CALL_A_SERVICE, ids=lambda view: f"{view.__module__}.{view.__name__}")
def test_a_view_that_calls_a_service_checks_no_role_itself(view):
    source = inspect.getsource(inspect.unwrap(view))
    assert "request.user.may_" not in source and "require_role" not in source
