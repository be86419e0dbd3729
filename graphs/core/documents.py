"""graphs.core's document helpers: the schema number of the documents the core writes (`SCHEMA_VERSION`: graphs,
rejection memories, trace and checkpoint records), and canonical JSON with its SHA-256 digest (`canonical_json`,
`sha256_digest`: sorted keys, compact separators, NaN refused, UTF-8 kept, read-only mappings written as objects).
Graph digests, the revision stores, the paired gate's seed and objective digests are computed over it. Other apps
keep their own canonical JSON (one shared copy is issue 28, item 6)."""

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
