"""Opaque cursors for cursor-paginated API lists: a prefixed integer key, base64url-encoded without padding."""

import base64
import binascii


class InvalidCursor(ValueError):
    pass


class IntCursor:
    """Encodes the key of the last row a page showed; decoding refuses anything this API did not issue."""

    def __init__(self, prefix: str) -> None:
        self.prefix = f"{prefix}:"

    def encode(self, key: int) -> str:
        return base64.urlsafe_b64encode(f"{self.prefix}{key}".encode()).decode().rstrip("=")

    def decode(self, cursor: str) -> int:
        try:
            text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise InvalidCursor("the cursor is not one this API issued") from None
        number = text.removeprefix(self.prefix)
        if not text.startswith(self.prefix) or not (number.isascii() and number.isdigit()):
            raise InvalidCursor("the cursor is not one this API issued")
        return int(number)

    def page(self, rows, cursor: str | None, limit: int, *, key: str = "id") -> tuple[list, str | None]:
        """One page of `rows` (a queryset), newest first by the integer column `key`: at most `limit` rows below
        the one `cursor` names, and the cursor of the next page (None on the last). One query; InvalidCursor for a
        cursor this one did not issue."""
        rows = rows.order_by(f"-{key}")
        if cursor:
            rows = rows.filter(**{f"{key}__lt": self.decode(cursor)})
        found = list(rows[: limit + 1])
        next_cursor = self.encode(getattr(found[limit - 1], key)) if len(found) > limit else None
        return found[:limit], next_cursor
