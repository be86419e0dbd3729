"""IntCursor.page: keyset pages newest first, each a cursor to the next, refusing a cursor it did not issue."""

import pytest
from django.contrib.auth import get_user_model

from common.cursors import IntCursor, InvalidCursor

pytestmark = pytest.mark.django_db


def test_pages_walk_every_row_newest_first_once_and_the_last_has_no_cursor():
    users = get_user_model().objects
    made = [users.create(username=f"reader-{n}").pk for n in range(5)]
    rows = users.filter(pk__in=made)
    cursor = IntCursor("user")
    seen, after = [], None
    for expected_size in (2, 2, 1):
        page, after = cursor.page(rows, after, 2)
        assert len(page) == expected_size
        seen += [user.pk for user in page]
    assert after is None
    assert seen == sorted(made, reverse=True)


def test_a_page_can_be_keyed_on_another_integer_column_and_refuses_a_foreign_cursor():
    users = get_user_model().objects
    for n in range(3):
        users.create(username=f"keyed-{n}")
    rows = users.filter(username__startswith="keyed-")
    page, after = IntCursor("user").page(rows, None, 2, key="pk")
    assert [user.username for user in page] == ["keyed-2", "keyed-1"]
    assert IntCursor("user").page(rows, after, 2, key="pk")[0][0].username == "keyed-0"
    with pytest.raises(InvalidCursor):
        IntCursor("user").page(rows, IntCursor("other").encode(1), 2)
