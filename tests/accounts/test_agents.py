"""Agent identities: created by operators (service, page, command), no password and no roles; only their tokens may
hold the agent-only scopes (trajectories:write, evaluations:run), enforced at creation and at every call."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.models import ApiToken, AuditEvent, User
from accounts.roles import AGENT_SCOPES, Role, RoleRequired, scopes_allowed_for
from accounts.services import Actor, AgentRefused, agent_create, api_token_create, user_roles_set
from accounts.tokens import new_token
from tests.conftest import logged_in

pytestmark = pytest.mark.django_db
AGENTS = "/accounts/settings/agents/"


def _csrf_client(user):
    """A logged-in client whose post() adds the CSRF token."""
    client = logged_in(user)
    client.get("/accounts/settings/")
    secret = client.cookies["csrftoken"].value
    post = client.post
    client.post = lambda path, data=None, **kw: post(path, {**(data or {}), "csrfmiddlewaretoken": secret}, **kw)
    return client


def test_only_agent_identities_may_hold_the_agent_scopes(viewer, operator, admin_user, agent):
    for person in (viewer, operator, admin_user):
        assert not AGENT_SCOPES & set(scopes_allowed_for(person))
    allowed = set(scopes_allowed_for(agent))
    assert allowed >= AGENT_SCOPES
    assert not {"reviews:judge", "procedures:mine", "evolutions:run"} & allowed  # agents hold no role


@pytest.mark.parametrize("scope", sorted(AGENT_SCOPES))
def test_a_read_only_user_cannot_create_an_agent_scope_token(viewer, admin_user, scope):
    for person in (viewer, admin_user):
        with pytest.raises(ValueError, match="needs an agent identity"):
            api_token_create(actor=Actor(user=person), user=person, name="x", scopes=[scope])
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize("scope", sorted(AGENT_SCOPES))
def test_the_settings_page_refuses_agent_scopes_to_a_person(viewer, scope):
    response = _csrf_client(viewer).post("/accounts/settings/", {"name": "laptop", "scopes": [scope]})
    assert response.status_code == 400
    assert not ApiToken.objects.exists()


def _stored_token(user, scopes):
    """A token row written past api_token_create (as an older release did): only the per-call check stands."""
    plaintext, prefix, digest = new_token()
    ApiToken.objects.create(user=user, name="old", prefix=prefix, digest=digest, scopes=scopes)
    return plaintext


def test_agent_scopes_of_a_persons_token_are_refused_at_every_call(api_client, viewer):
    token = _stored_token(viewer, ["evaluations:run", "trajectories:write", "trajectories:read"])
    response = api_client.post("/api/v1/jobs/claim", {}, token=token)
    assert response.status_code == 403 and response.json()["code"] == "missing_scope"
    response = api_client.post("/api/v1/replays/claim", {}, token=token)
    assert response.status_code == 403 and response.json()["code"] == "missing_scope"
    response = api_client.post("/api/v1/trajectories", {"runs": []}, token=token)
    assert response.status_code == 403 and response.json()["code"] == "missing_scope"
    assert api_client.get("/api/v1/trajectories", token=token).status_code == 200  # the open scope still works


def test_an_agent_token_works(api_client, make_agent_token):
    assert api_client.post("/api/v1/jobs/claim", {}, token=make_agent_token("evaluations:run")).status_code == 204


def test_operators_create_agents_audited_without_password_or_roles(operator, viewer):
    agent = agent_create(actor=Actor(user=operator), name="ci-bot")
    assert agent.is_agent and not agent.has_usable_password() and not agent.has_role(Role.REVIEWER)
    event = AuditEvent.objects.get(verb="agent.create")
    assert (event.actor_user, event.target_id) == (operator, str(agent.pk))
    with pytest.raises(RoleRequired, match="operator role"):
        agent_create(actor=Actor(user=viewer), name="mine")
    with pytest.raises(AgentRefused, match="taken"):
        agent_create(actor=Actor(user=operator), name="CI-bot")
    with pytest.raises(AgentRefused):
        agent_create(actor=Actor(user=operator), name="no spaces allowed")
    with pytest.raises(ValueError, match="agents hold no roles"):
        user_roles_set(actor=Actor.system(), user=agent, roles=[Role.OPERATOR])
    assert not User.objects.filter(username="mine").exists()


def test_an_agent_cannot_log_in(agent, client):
    response = client.post("/accounts/login/", {"username": agent.username, "password": ""})
    assert response.status_code == 200 and "_auth_user_id" not in client.session


def test_the_agents_page_is_for_operators(viewer, operator):
    assert logged_in(viewer).get(AGENTS).status_code == 403
    client = _csrf_client(operator)
    assert client.get(AGENTS).status_code == 200
    response = client.post(AGENTS, {"action": "agent", "name": "nightly"})
    assert response.status_code == 302
    agent = User.objects.get(username="nightly", is_agent=True)
    response = client.post(
        AGENTS,
        {"action": "token", "agent": agent.pk, "name": "ci", "scopes": ["evaluations:run", "trajectories:write"]},
    )
    assert response.status_code == 200 and b"data-plaintext" in response.content
    token = ApiToken.objects.get(user=agent)
    assert token.scopes == ["evaluations:run", "trajectories:write"]
    assert AuditEvent.objects.get(verb="api_token.create").actor_user == operator
    response = client.post(AGENTS, {"action": "token", "agent": agent.pk, "name": "x", "scopes": ["reviews:judge"]})
    assert response.status_code == 400
    response = client.post(AGENTS, {"action": "revoke", "token": token.pk})
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None
    own, _ = api_token_create(actor=Actor(user=operator), user=operator, name="mine", scopes=["graphs:read"])
    assert client.post(AGENTS, {"action": "revoke", "token": own.pk}).status_code == 404  # agents' tokens only


def test_create_agent_command(capsys):
    call_command("create_agent", "nightly")
    assert User.objects.get(username="nightly").is_agent
    call_command("create_agent", "nightly", "--token", "ci", "--scope", "evaluations:run")
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith("wm_")
    assert ApiToken.objects.get(user__username="nightly").scopes == ["evaluations:run"]
    with pytest.raises(CommandError):
        call_command("create_agent", "nightly")  # exists already
    with pytest.raises(CommandError):
        call_command("create_agent", "other", "--scope", "reviews:judge")
    assert not User.objects.filter(username="other").exists()
