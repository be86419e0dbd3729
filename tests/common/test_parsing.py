import pytest

from common.cursors import IntCursor, InvalidCursor
from common.parsing import int_or_none


@pytest.mark.parametrize(("text", "expected"), [("0", 0), ("42", 42), ("9" * 18, int("9" * 18))])
def test_ascii_digits_are_read(text, expected):
    assert int_or_none(text) == expected


@pytest.mark.parametrize("text", [None, "", "²", "١٢", "１２", "-1", "1.5", " 1", "9" * 19])
def test_anything_else_is_none(text):
    assert int_or_none(text) is None


def test_a_cursor_round_trips_and_refuses_what_it_did_not_issue():
    cursor = IntCursor("run")
    assert cursor.decode(cursor.encode(1234)) == 1234
    for bad in ["", "!!", IntCursor("seq").encode(5), "cnVuOsKy"]:  # the last is "run:²"
        with pytest.raises(InvalidCursor):
            cursor.decode(bad)
