"""`manage.py seed_demo`: demo users for each role, an agent token shown once, demo runs; idempotent."""

import io
import stat

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from accounts.demo import DEMO_PASSWORD, DEMO_TOKEN_FILENAME, DEMO_TOKEN_SCOPES
from accounts.models import ApiToken, AuditEvent, User
from accounts.services import api_token_authenticate
from trajectories.models import Run, Step


@pytest.fixture
def var_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    return tmp_path


def seed() -> str:
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


def _totals() -> dict[str, int]:
    return {
        "users": User.objects.count(),
        "groups": Group.objects.count(),
        "tokens": ApiToken.objects.count(),
        "events": AuditEvent.objects.count(),
        "runs": Run.objects.count(),
        "steps": Step.objects.count(),
    }


def test_it_creates_a_user_for_each_role(db, var_dir):
    seed()
    users = {u.username: u for u in User.objects.all()}
    assert set(users) == {"admin", "rita", "rob", "otto", "vera", "demo-agent"}
    assert [u.username for u in users.values() if u.is_agent] == ["demo-agent"]
    assert users["admin"].is_superuser and users["admin"].is_admin
    assert users["rita"].is_reviewer and users["rob"].is_reviewer and not users["rita"].is_operator
    assert users["otto"].is_operator and not users["otto"].is_admin
    vera = users["vera"]
    assert not (vera.is_reviewer or vera.is_operator or vera.is_admin)
    assert set(Group.objects.values_list("name", flat=True)) == {"reviewer", "operator", "admin"}


def test_it_creates_demo_runs_with_steps_and_outcomes(db, var_dir):
    seed()
    assert Run.objects.count() >= 20
    assert Step.objects.count() > Run.objects.count()
    assert set(Run.objects.values_list("outcome", flat=True)) >= {"success", "failure"}


@pytest.mark.parametrize("username", ["admin", "rita", "rob", "otto", "vera"])
def test_the_demo_users_can_log_in_with_the_demo_password(db, var_dir, username):
    seed()
    client = Client()
    assert client.login(username=username, password=DEMO_PASSWORD)
    assert client.get("/").status_code == 200


def test_it_saves_the_agent_token_privately_and_prints_only_where(db, var_dir):
    output = seed()
    token_file = var_dir / DEMO_TOKEN_FILENAME
    plaintext = token_file.read_text().strip()
    assert plaintext.startswith("wm_") and plaintext not in output and str(token_file) in output
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600

    token = api_token_authenticate(plaintext)
    assert token is not None and token.name == "demo-agent"
    assert sorted(token.scopes) == sorted(DEMO_TOKEN_SCOPES)
    assert token.user.username == "demo-agent" and token.user.is_agent  # an agent identity, not a person

    again = seed()
    assert plaintext not in again
    assert token_file.read_text().strip() == plaintext


def test_running_it_twice_creates_nothing_new(db, var_dir):
    seed()
    first = _totals()
    output = seed()
    assert _totals() == first
    assert "0 created" in output


def test_it_keeps_an_existing_users_password(db, var_dir):
    User.objects.create_user(username="rita", password="rita-chose-this")
    seed()
    rita = User.objects.get(username="rita")
    assert rita.check_password("rita-chose-this")
    assert not rita.check_password(DEMO_PASSWORD)


def test_it_replaces_a_revoked_agent_token(db, var_dir):
    seed()
    old = ApiToken.objects.get(name="demo-agent")
    ApiToken.objects.filter(pk=old.pk).update(revoked_at=old.created_at)

    output = seed()

    new = ApiToken.objects.get(name="demo-agent", revoked_at__isnull=True)
    assert new.pk != old.pk
    plaintext = (var_dir / DEMO_TOKEN_FILENAME).read_text().strip()
    assert api_token_authenticate(plaintext).pk == new.pk
    assert plaintext not in output and str(var_dir / DEMO_TOKEN_FILENAME) in output


def test_every_user_it_creates_is_audited(db, var_dir):
    seed()
    created = set(AuditEvent.objects.filter(verb="user.create").values_list("target_label", flat=True))
    assert created == {"admin", "rita", "rob", "otto", "vera"}


def test_a_demo_token_of_an_older_seed_owned_by_a_person_is_replaced(db, var_dir):
    from accounts.tokens import new_token

    seed()
    otto = User.objects.get(username="otto")
    ApiToken.objects.filter(user__username="demo-agent").update(revoked_at=timezone.now())
    _, prefix, digest = new_token()
    legacy = ApiToken.objects.create(
        user=otto, name="demo-agent", prefix=prefix, digest=digest, scopes=["evaluations:run"]
    )
    seed()
    legacy.refresh_from_db()
    assert legacy.revoked_at is not None
    token = api_token_authenticate((var_dir / DEMO_TOKEN_FILENAME).read_text().strip())
    assert token.user.username == "demo-agent" and "evaluations:run" in token.scopes
