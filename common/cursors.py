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
