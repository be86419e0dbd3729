"""The permission predicates on accounts.User: one per rule, walked for every kind of user.

Services, views, the API and templates ask these (user.may_propose, …) instead of restating the roles they follow
from, so this table is the whole rule book."""

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from accounts.roles import Role
from tests.factories import user_with

pytestmark = pytest.mark.django_db

PREDICATES = (
    "may_propose",
    "may_judge",
    "may_operate",
    "may_decide_alerts",
    "may_draft_intents",
    "may_assess",
    "may_administer",
)
REVIEWER_OR_OPERATOR = {"may_propose", "may_decide_alerts", "may_draft_intents", "may_assess"}

# who → the predicates they hold (every other one is false)
RULES = {
    "no role": set(),
    "reviewer": REVIEWER_OR_OPERATOR | {"may_judge"},
    "operator": REVIEWER_OR_OPERATOR | {"may_operate"},
    "reviewer and operator": REVIEWER_OR_OPERATOR | {"may_judge", "may_operate"},
    "admin": set(PREDICATES),
    "superuser": set(PREDICATES),
    "agent (even in the admin group)": set(),
    "inactive admin": set(),
    "inactive superuser": set(),
}


def make(who: str):
    match who:
        case "no role":
            return user_with()
        case "reviewer":
            return user_with(Role.REVIEWER)
        case "operator":
            return user_with(Role.OPERATOR)
        case "reviewer and operator":
            return user_with(Role.REVIEWER, Role.OPERATOR)
        case "admin":
            return user_with(Role.ADMIN)
        case "superuser":
            return user_with(is_superuser=True)
        case "agent (even in the admin group)":
            return user_with(Role.ADMIN, is_agent=True)
        case "inactive admin":
            return user_with(Role.ADMIN, is_active=False)
        case "inactive superuser":
            return user_with(is_superuser=True, is_active=False)
    raise AssertionError(who)


@pytest.mark.parametrize("who", list(RULES))
def test_each_predicate_for_each_kind_of_user(who):
    user = make(who)
    held = {name for name in PREDICATES if getattr(user, name)}
    assert held == RULES[who]
    assert all(type(getattr(user, name)) is bool for name in PREDICATES)


@pytest.mark.parametrize("who", list(RULES))
def test_the_proposer_or_an_admin_may_withdraw(who):
    user = make(who)
    own = SimpleNamespace(proposer_id=user.pk)
    someone_elses = SimpleNamespace(proposer_id=user.pk + 1000)
    assert user.may_withdraw(own)  # the proposer, whatever their roles
    assert user.may_withdraw(someone_elses) == ("may_administer" in RULES[who])


def test_templates_read_the_predicates_and_an_anonymous_user_holds_none():
    from django.contrib.auth.models import AnonymousUser
    from django.template import Context, Template

    template = Template("{% if user.may_propose %}propose{% endif %}|{% if user.may_administer %}admin{% endif %}")
    assert template.render(Context({"user": make("reviewer")})) == "propose|"
    assert template.render(Context({"user": make("admin")})) == "propose|admin"
    assert template.render(Context({"user": AnonymousUser()})) == "|"


ROOT = Path(__file__).resolve().parents[2]
RESTATED = re.compile(
    r"\bis_(reviewer|operator|admin)\b.*\bor\b.*\bis_(reviewer|operator|admin)\b|\bor\s+\S*is_admin\b"
)


def test_no_role_combination_is_restated_outside_the_predicates():
    """Services, views, the API and templates ask user.may_…; only the predicates combine roles (demo seeding, which
    checks that seeded people hold roles, is not a permission check)."""
    sources = [
        path
        for folder in ("accounts", "config", "graphs", "intents", "procedures", "reviews", "trajectories", "templates")
        for path in (ROOT / folder).rglob("*")
        if path.suffix in (".py", ".html") and "migrations" not in path.parts and not path.name.endswith("demo.py")
    ]
    assert len(sources) > 50
    restated = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sources
        if path != ROOT / "accounts" / "models.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if RESTATED.search(line)
    ]
    assert restated == []
