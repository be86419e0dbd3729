"""Canonical JSON and content digests: sorted keys, compact separators, NaN refused, UTF-8 kept."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

SCHEMA_VERSION = 1


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def canonical_json(obj: Any) -> str:
    """The one byte-stable JSON form every digest is computed over."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=False, default=_plain)


def sha256_digest(obj: Any) -> str:
    """SHA-256 hex of the canonical JSON of `obj`."""
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()
