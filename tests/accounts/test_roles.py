import pytest
from django.contrib.auth.models import Group
from django.core.management import ManagementUtility, call_command
from django.db import connections

from accounts.models import AuditEvent
from accounts.roles import AGENT_SCOPES, SCOPES, Role, scopes_allowed_for
from accounts.services import Actor, ensure_roles, user_roles_set
from tests.factories import user_with

pytestmark = pytest.mark.django_db

# What a person without a role may grant: the scopes that only read (issue 24: the read-only role writes nothing).
OPEN_SCOPES = sorted(
    [
        "trajectories:read",
        "graphs:read",
        "graphs:guide",
        "procedures:read",
        "rubrics:read",
        "intents:read",
        "certification:read",
    ]
)


def test_the_three_role_groups_exist_after_migrate():
    assert set(Group.objects.values_list("name", flat=True)) >= {"reviewer", "operator", "admin"}


def test_ensure_roles_is_idempotent():
    Group.objects.filter(name="operator").delete()
    assert ensure_roles() == ["operator"]
    assert ensure_roles() == []
    assert Group.objects.filter(name__in=[r.value for r in Role]).count() == 3


def test_migrate_recreates_a_missing_role_group():
    Group.objects.filter(name="reviewer").delete()
    call_command("migrate", verbosity=0)
    assert Group.objects.filter(name="reviewer").exists()


def test_a_user_without_a_role_may_grant_only_the_open_scopes(viewer):
    assert sorted(scopes_allowed_for(viewer)) == OPEN_SCOPES


def test_reviews_judge_needs_the_reviewer_role(reviewer):
    assert sorted(scopes_allowed_for(reviewer)) == sorted(
        [*OPEN_SCOPES, "reviews:judge", "rubrics:write", "intents:write"]
    )


def test_procedures_mine_needs_the_operator_role():
    assert sorted(scopes_allowed_for(user_with(Role.OPERATOR))) == sorted(
        [*OPEN_SCOPES, "procedures:mine", "evolutions:run", "rubrics:write", "intents:write", "certification:write"]
    )


def test_admins_and_superusers_may_grant_every_scope_but_the_agent_only_ones(admin_user):
    assert sorted(scopes_allowed_for(admin_user)) == sorted(set(SCOPES) - AGENT_SCOPES)
    assert sorted(scopes_allowed_for(user_with(is_superuser=True))) == sorted(set(SCOPES) - AGENT_SCOPES)


def test_an_inactive_user_may_grant_nothing(outsider):
    assert scopes_allowed_for(outsider) == []
    assert scopes_allowed_for(user_with(Role.ADMIN, is_active=False)) == []


def _set_roles(capsys, monkeypatch, *args: str) -> tuple[int, str, str]:
    monkeypatch.setattr(connections, "close_all", lambda: None)  # keep the test's transaction open
    try:
        ManagementUtility(["manage.py", "set_roles", *args]).execute()
        status = 0
    except SystemExit as exit_:
        status = exit_.code
    out, err = capsys.readouterr()
    return status, out, err


def test_set_roles_gives_exactly_the_roles_listed_and_is_audited(capsys, monkeypatch, reviewer):
    status, out, err = _set_roles(capsys, monkeypatch, "rita", "operator", "admin")
    assert (status, err) == (0, "")
    assert out.strip() == "rita: admin, operator"
    assert sorted(reviewer.groups.values_list("name", flat=True)) == ["admin", "operator"]
    event = AuditEvent.objects.get(verb="user.roles_set")
    assert (event.before, event.after) == ({"roles": ["reviewer"]}, {"roles": ["admin", "operator"]})


def test_set_roles_with_no_role_makes_a_user_read_only_and_a_repeat_changes_nothing(capsys, monkeypatch, operator):
    assert _set_roles(capsys, monkeypatch, "otto")[1].strip() == "otto: no role (read-only)"
    assert not operator.groups.exists()
    assert _set_roles(capsys, monkeypatch, "otto")[0] == 0
    assert AuditEvent.objects.filter(verb="user.roles_set").count() == 1


def test_set_roles_keeps_groups_that_are_not_roles(viewer):
    other = Group.objects.create(name="beta-testers")
    viewer.groups.add(other)
    assert user_roles_set(actor=Actor.system(), user=viewer, roles=[Role.REVIEWER]) == ["reviewer"]
    assert sorted(viewer.groups.values_list("name", flat=True)) == ["beta-testers", "reviewer"]
    assert viewer.is_reviewer


@pytest.mark.parametrize(
    ("args", "reason"),
    [(["nobody", "reviewer"], "unknown user 'nobody'"), (["vera", "root"], "unknown role(s): root")],
    ids=["unknown-user", "unknown-role"],
)
def test_set_roles_refuses_bad_input(capsys, monkeypatch, viewer, args, reason):
    status, out, err = _set_roles(capsys, monkeypatch, *args)
    assert (status, out) == (2, "")
    assert reason in err and len(err.strip().splitlines()) == 1
    assert not viewer.groups.exists()
    assert not AuditEvent.objects.exists()
