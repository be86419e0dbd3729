"""The small things of issue 11: the admin's users with roles (admins only, linked from the navigation), the
favicon, forms that keep what was typed after an error, arguments shown as JSON."""

import pytest
from django.urls import reverse

from accounts.roles import Role
from accounts.services import Actor
from tests.conftest import logged_in
from tests.factories import user_with
from tests.helpers.rubrics import committed, make_run, make_version  # noqa: F401 (committed: a fixture)

pytestmark = pytest.mark.django_db
USERS = reverse("admin:accounts_user_changelist")


def post(client, page, url, data, **kwargs):
    client.get(page)
    return client.post(url, {**data, "csrfmiddlewaretoken": client.cookies["csrftoken"].value}, **kwargs)


# --- the admin --------------------------------------------------------------------------------------------------------
def test_admins_see_users_with_their_roles(admin_user, reviewer, operator, viewer):
    response = logged_in(admin_user).get(USERS)
    page = response.content.decode()
    assert response.status_code == 200
    assert "rita" in page and "otto" in page and "vera" in page
    assert "operator, reviewer" in page  # otto's roles
    assert ">reviewer<" in page  # rita's
    assert "By group" in page or "groups" in page  # the roles filter
    detail = logged_in(admin_user).get(reverse("admin:accounts_user_change", args=[reviewer.pk])).content.decode()
    assert "reviewer" in detail and 'name="username"' not in detail  # read-only: roles change through the services


def test_the_users_list_reads_a_fixed_number_of_queries(admin_user, django_assert_max_num_queries):
    client = logged_in(admin_user)
    client.get(USERS)
    for n in range(10):
        user_with(Role.REVIEWER, Role.OPERATOR, username=f"person{n}")
    with django_assert_max_num_queries(12):
        assert client.get(USERS).status_code == 200


@pytest.mark.parametrize("who", ["reviewer", "operator", "viewer"])
def test_everyone_else_is_sent_to_the_admin_login(request, who):
    user = request.getfixturevalue(who)
    user.is_staff = True  # even a staff flag does not open the admin: the admin role does
    user.save(update_fields=["is_staff"])
    response = logged_in(user).get(USERS)
    assert response.status_code == 302 and reverse("admin:login") in response["Location"]


def test_anonymous_visitors_are_sent_to_log_in(client):
    response = client.get(USERS)
    assert response.status_code == 302


def test_the_navigation_links_the_admin_for_admins_only(admin_user, operator):
    assert f'href="{USERS}"' in logged_in(admin_user).get("/").content.decode()
    assert f'href="{USERS}"' not in logged_in(operator).get("/").content.decode()


def test_a_superuser_without_groups_is_an_admin_there_too(db):
    boss = user_with(username="boss", is_superuser=True)
    page = logged_in(boss).get(USERS).content.decode()
    assert "admin (superuser)" in page


# --- the favicon ------------------------------------------------------------------------------------------------------
def test_the_favicon_is_linked_and_served(viewer):
    from django.test import Client, override_settings

    page = logged_in(viewer).get("/").content.decode()
    assert 'rel="icon" href="/static/favicon.svg"' in page
    with override_settings(WHITENOISE_USE_FINDERS=True, WHITENOISE_AUTOREFRESH=True):  # as under `make run`
        response = Client().get("/static/favicon.svg")
    assert response.status_code == 200
    body = b"".join(response.streaming_content) if response.streaming else response.content
    assert body.lstrip().startswith(b"<svg")


# --- forms keep what was typed --------------------------------------------------------------------------------------
def test_the_mine_form_keeps_its_input_after_a_refusal(operator):
    client = logged_in(operator)
    data = {"intent": "no_such_intent", "held_out_share": "0.4", "seed": "123", "live": "on"}
    response = post(client, reverse("procedures:list"), reverse("procedures:mine"), data)
    page = response.content.decode()
    assert response.status_code == 422
    assert 'value="no_such_intent"' in page and 'value="0.4"' in page and 'value="123"' in page
    assert 'name="live" id="id_live" checked' in page or ('name="live"' in page and "checked" in page)


def test_the_agent_token_form_keeps_the_agent_the_name_and_the_scopes(operator):
    from accounts import services

    actor = Actor(user=operator)
    services.agent_create(actor=actor, name="alpha")
    beta = services.agent_create(actor=actor, name="beta")
    client = logged_in(operator)
    url = reverse("accounts:agents")
    data = {"action": "token", "agent": str(beta.pk), "name": "", "scopes": ["evaluations:run"]}
    response = post(client, url, url, data)
    page = response.content.decode()
    assert response.status_code == 400
    assert f'<option value="{beta.pk}" selected>' in page
    assert 'value="evaluations:run" checked' in page
    assert 'value="trajectories:write" checked' not in page


def test_the_webhook_form_keeps_the_url_and_events(admin_user):
    client = logged_in(admin_user)
    url = reverse("reviews:webhooks")
    response = post(client, url, url, {"url": "ftp://example.com/hook", "events": ["promotion.activated"]})
    page = response.content.decode()
    assert response.status_code >= 400
    assert 'value="ftp://example.com/hook"' in page
    assert 'value="promotion.activated" checked' in page


def test_the_evolution_start_form_keeps_its_input(operator):
    from graphs import services as graph_services

    graph_services.workspace_create(actor=Actor.system(), slug="lab", title="Lab")
    client = logged_in(operator)
    url = reverse("graphs:evolutions", args=["lab"])
    response = post(client, url, url, {"rounds": "999", "evaluator": "two-hop"})
    page = response.content.decode()
    assert response.status_code == 422 and 'value="999"' in page


# --- arguments as JSON ------------------------------------------------------------------------------------------------
def test_a_versions_structured_arguments_show_as_formatted_json(viewer):
    from procedures.mining import content_revision
    from procedures.models import Procedure, ProcedureVersion

    procedure = Procedure.objects.create(intent="refund_request", title="Refund")
    steps = [{"tool": "lookup_policy", "arguments": {"order": {"id": 42, "lines": [1, 2]}}}]
    version = ProcedureVersion.objects.create(
        procedure=procedure,
        number=1,
        steps=steps,
        candidate_revision="sha256:" + "0" * 64,
        content_revision=content_revision(intent=procedure.intent, steps=steps),
    )
    page = logged_in(viewer).get(reverse("procedures:version", args=[version.pk])).content.decode()
    assert "{&#x27;id&#x27;" not in page  # not a Python repr
    assert "&quot;id&quot;: 42" in page and "&quot;lines&quot;: [" in page


def test_a_refused_rubric_assessment_keeps_what_was_typed(operator, reviewer, committed):  # noqa: F811
    from rubrics.models import RubricAssessmentRow

    version = make_version(operator, committed)
    run_id = make_run()
    client = logged_in(reviewer)
    url = reverse("rubrics:assess", args=[run_id])
    data = {
        "version": version.pk,
        "dimension": ["task_completed"],
        "score:task_completed": "0.85",
        "confidence:task_completed": "0.6",
        "evidence:task_completed": "9",
        "explanation:task_completed": "typed & kept",
    }
    response = post(client, reverse("rubrics:list"), url, data, headers={"HX-Request": "true"})
    page = response.content.decode()
    assert response.status_code == 422 and "outside the trajectory" in page
    assert 'value="0.85"' in page and 'value="0.6"' in page and 'value="9"' in page
    assert 'value="typed &amp; kept"' in page
    assert "data-swap-errors" in page  # the page's htmx form swaps this 422 answer in
    assert not RubricAssessmentRow.objects.exists()
