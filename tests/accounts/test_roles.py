import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command

from accounts.roles import SCOPES, Role, scopes_allowed_for
from accounts.services import ensure_roles
from tests.factories import user_with

pytestmark = pytest.mark.django_db

OPEN_SCOPES = sorted(set(SCOPES) - {"reviews:judge", "procedures:mine"})


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
    assert sorted(scopes_allowed_for(reviewer)) == sorted([*OPEN_SCOPES, "reviews:judge"])


def test_procedures_mine_needs_the_operator_role():
    assert sorted(scopes_allowed_for(user_with(Role.OPERATOR))) == sorted([*OPEN_SCOPES, "procedures:mine"])


def test_admins_and_superusers_may_grant_every_scope(admin_user):
    assert sorted(scopes_allowed_for(admin_user)) == sorted(SCOPES)
    assert sorted(scopes_allowed_for(user_with(is_superuser=True))) == sorted(SCOPES)


def test_an_inactive_user_may_grant_nothing(outsider):
    assert scopes_allowed_for(outsider) == []
    assert scopes_allowed_for(user_with(Role.ADMIN, is_active=False)) == []
