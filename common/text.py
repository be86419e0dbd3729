"""Text entering Waymark: strings must be encodable as UTF-8, API bodies must say they are JSON, and identifiers
must be plain (no invisible or direction-changing characters).

A JSON body may spell a lone surrogate (`"\\ud800"`); Python keeps it in a str, but no database, template or response
can encode it, so it is refused where it enters (API schemas, the API body parser, importers, forms).
"""

from __future__ import annotations

import unicodedata
from typing import Any

from django.core.exceptions import ValidationError
from django.http import HttpRequest
from ninja.parser import Parser

from .errors import ApiError
from .jsonbody import DuplicateKey, loads_unique

NUL_MESSAGE = "must not contain NUL characters"
SURROGATE_MESSAGE = "must be valid Unicode text (it holds a lone surrogate, which cannot be encoded as UTF-8)"


def is_encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def require_encodable(text: str) -> str:
    """For pydantic validators: the text, or ValueError."""
    if not is_encodable(text):
        raise ValueError(SURROGATE_MESSAGE)
    return text


def require_storable(text: str) -> str:
    """For pydantic validators: text every database, template and response can hold — no NUL (PostgreSQL text
    cannot hold one), no lone surrogate — or ValueError."""
    if "\x00" in text:
        raise ValueError(NUL_MESSAGE)
    return require_encodable(text)


# Code points Unicode marks Default_Ignorable that are not format characters (those are refused by category):
# they render as nothing (soft hyphen, Hangul fillers, variation selectors, tags, …).
_IGNORABLE_RANGES = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F),
    (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFFA0, 0xFFA0), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)  # fmt: skip
# Controls, format characters (the bidi controls U+202A–U+202E, U+2066–U+2069, U+200E/U+200F, U+061C, the zero
# width characters), surrogates, private use, unassigned, and line or paragraph separators.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
INVISIBLE_MESSAGE = "must not contain invisible or direction-changing characters"


def _first_invisible(text: str) -> tuple[int, str] | None:
    """The position and code point of the first character in `text` that cannot be seen or that reorders what is
    shown around it (a space other than U+0020 counts: it passes for one), else None."""
    for position, char in enumerate(text):
        code = ord(char)
        category = unicodedata.category(char)
        if (
            category in _HIDDEN_CATEGORIES
            or (category == "Zs" and char != " ")
            or any(low <= code <= high for low, high in _IGNORABLE_RANGES)
        ):
            return position, char
    return None


def plain_identifier_error(text: str) -> str | None:
    """What is wrong with `text` as an identifier (or a name shown as one), naming its first invisible or
    direction-changing character, else None: with one, an id can be displayed as another."""
    found = _first_invisible(text)
    if found is None:
        return None
    position, char = found
    name = unicodedata.name(char, "unnamed character")
    return f"{INVISIBLE_MESSAGE} (U+{ord(char):04X} {name} at position {position + 1})"


def require_plain_identifier(text: str) -> str:
    """For pydantic validators: the identifier, or ValueError (plain_identifier_error). Pass text normalized (NFC)
    and stripped as it will be stored."""
    problem = plain_identifier_error(text)
    if problem is not None:
        raise ValueError(problem)
    return text


def validate_encodable(text: Any) -> None:
    """A Django form field validator: `forms.CharField(validators=[validate_encodable])`."""
    if isinstance(text, str) and not is_encodable(text):
        raise ValidationError(SURROGATE_MESSAGE, code="surrogate")


def printable_key(key: str) -> str:
    """A key as it can be shown in an error message (lone surrogates as \\udXXX)."""
    return key.encode("utf-8", "backslashreplace").decode("utf-8")


def first_unencodable(value: Any) -> list[str | int] | None:
    """The path to the first string (object key or value) in a JSON value that cannot be encoded, else None."""
    pending: list[tuple[Any, list[str | int]]] = [(value, [])]
    while pending:
        item, path = pending.pop()
        if isinstance(item, str):
            if not is_encodable(item):
                return path
        elif isinstance(item, dict):
            for key, child in reversed(item.items()):
                if isinstance(key, str) and not is_encodable(key):
                    return [*path, printable_key(key)]
                pending.append((child, [*path, key]))
        elif isinstance(item, list | tuple):
            pending.extend((child, [*path, index]) for index, child in reversed(list(enumerate(item))))
    return None


def dotted(path: list[str | int]) -> str:
    """["steps", 0, "arguments", "q"] -> "steps[0].arguments.q"."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def is_json_request(request: HttpRequest) -> bool:
    """application/json, or a structured `+json` type (RFC 6839); parameters such as charset are allowed."""
    content_type = (request.content_type or "").strip().lower()
    return content_type == "application/json" or (
        content_type.startswith("application/") and content_type.endswith("+json")
    )


NOT_JSON_MESSAGE = "the body must be JSON sent with Content-Type: application/json"


class JsonBodyParser(Parser):
    """The API's body parser: JSON only (a text/plain or form body is a CORS "simple request" any page can send), no
    key twice in one object (json would keep the last silently), and no string in it that cannot be encoded. It
    raises ApiError; ninja wraps it in a 400 HttpError whose cause config.api answers."""

    def parse_body(self, request: HttpRequest) -> Any:
        if not is_json_request(request):
            raise ApiError(
                400, "unsupported_media_type", NOT_JSON_MESSAGE, {"content_type": request.content_type or ""}
            )
        try:
            data = loads_unique(request.body, constants=True)
        except DuplicateKey as exc:
            error = {
                "loc": ["body", *(printable_key(p) if isinstance(p, str) else p for p in exc.loc)],
                "msg": f"the key {printable_key(exc.key)!r} appears twice in one object",
                "type": "duplicate_key",
            }
            raise ApiError(422, "invalid", "the request has a key twice in one object", {"errors": [error]})
        where = first_unencodable(data)
        if where is not None:
            error = {"loc": ["body", *map(str, where)], "msg": SURROGATE_MESSAGE, "type": "string_unicode"}
            raise ApiError(422, "invalid", "the request does not match the schema", {"errors": [error]})
        return data
