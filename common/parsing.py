"""Parsing identifiers that arrive as text (URLs, query strings, promotion candidate ids)."""


def int_or_none(text: str | None, *, max_digits: int = 18) -> int | None:
    """The integer an ASCII digit string spells (fitting a 64-bit column), else None. `"²".isdigit()` is True in
    Python but `int("²")` fails, so only ASCII digits count."""
    if not text or not (text.isascii() and text.isdigit()) or len(text) > max_digits:
        return None
    return int(text)
