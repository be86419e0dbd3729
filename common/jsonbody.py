"""JSON bodies parsed strictly: no NaN or Infinity, and no key twice in one object, at any depth.

`json.loads` keeps the last of duplicate keys, so `{"runs": [...], "runs": []}` would silently be an empty batch and
two `tool` keys in a step would keep whichever came last. `loads_unique` refuses both with `DuplicateKey`, naming the
key and where it is (a loc as the API's errors give it: `["runs", 3, "steps", 0, "tool"]`).

The check on every object is one dict built from its pairs and a length comparison (json's C scanner hands the pairs
to `object_pairs_hook`); only a body that has a duplicate is parsed a second time, keeping the pairs, to find where.
"""

from __future__ import annotations

import json
from typing import Any


class DuplicateKey(ValueError):
    def __init__(self, key: str, loc: list[str | int]) -> None:
        super().__init__(f"the key {key!r} appears twice in one object")
        self.key = key
        self.loc = loc


class _Found(ValueError):
    """Raised out of the scanner at the first object with a repeated key (where is looked up afterwards)."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# Called once per object of every body: the builtins bound as locals.
def _unique_pairs(pairs: list[tuple[str, Any]], dict=dict, len=len) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _Found
    return obj


class _Pairs(list):
    """An object kept as its pairs, in order (the second parse)."""


def loads_unique(text: str | bytes, *, constants: bool = False) -> Any:
    """`json.loads(text)` refusing duplicate keys (DuplicateKey, a ValueError) and, unless `constants`, NaN and
    Infinity (ValueError)."""
    extra = {} if constants else {"parse_constant": _reject_constant}
    try:
        return json.loads(text, object_pairs_hook=_unique_pairs, **extra)
    except _Found:
        pairs = json.loads(text, object_pairs_hook=_Pairs, **extra)
        key, loc = first_duplicate(pairs)
        raise DuplicateKey(key, loc) from None


def first_duplicate(document: Any) -> tuple[str, list[str | int]]:
    """The first repeated key in document order, and its loc, in a document parsed with objects as `_Pairs`."""
    pending: list[tuple[Any, list[str | int]]] = [(document, [])]
    while pending:
        node, path = pending.pop()
        if isinstance(node, _Pairs):
            seen: set[str] = set()
            for key, _ in node:
                if key in seen:
                    return key, [*path, key]
                seen.add(key)
            pending.extend((value, [*path, key]) for key, value in reversed(node))
        elif isinstance(node, list):
            pending.extend((value, [*path, index]) for index, value in reversed(list(enumerate(node))))
    raise LookupError("no duplicate key")  # pragma: no cover (only called after one was seen)
