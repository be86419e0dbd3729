"""The one byte-stable JSON form that digests are taken over, and the digests (pure: no Django, so cores use it too).

Sorted keys, compact separators, UTF-8 kept, NaN and infinities refused; a Mapping that is not a dict is written as
one. Content revisions, graph digests, taxonomy and window documents, rubric versions and certificates are all
sha256 over this form, so a value has one digest wherever it is computed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=False, default=_plain)


def digest_hex(value: Any) -> str:
    """SHA-256 hex of the canonical JSON of `value`."""
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def digest(value: Any) -> str:
    """`sha256:` and the hex: the form stored and shown beside the algorithm's name."""
    return "sha256:" + digest_hex(value)
