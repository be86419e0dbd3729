"""graphs.core's document helpers: the schema number of the documents the core writes (`SCHEMA_VERSION`: graphs,
rejection memories, trace and checkpoint records), and, under the names the core uses, the project's one canonical
JSON and its SHA-256 hex (common/canonical.py), over which graph digests, the revision stores, the paired gate's seed
and objective digests are computed."""

from __future__ import annotations

from common.canonical import canonical_json
from common.canonical import digest_hex as sha256_digest

__all__ = ["SCHEMA_VERSION", "canonical_json", "sha256_digest"]

SCHEMA_VERSION = 1
