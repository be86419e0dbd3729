"""The rubric tests' shared fixtures (tests/helpers/rubrics.py) and a second reviewer for promotions."""

import pytest

from accounts.roles import Role
from tests.factories import user_with
from tests.helpers.rubrics import committed  # noqa: F401 (the fixture)


@pytest.fixture
def second_reviewer(db):
    return user_with(Role.REVIEWER, username="rob")
