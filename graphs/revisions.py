"""The reference RevisionStore (spec §8) as functions over `Revision`: head, append, get, list.

One append-only chain per (workspace, kind). `append` states the head it expects; a stale expectation raises
`HeadMoved`. The unique (workspace, kind, seq) constraint settles races: of two writers appending after the same head,
the second waits for the first to commit and then fails the constraint, which is reported as HeadMoved, so a chain
can never fork (and writers of different chains never wait for each other).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, transaction

from graphs.core import canonical_json
from graphs.core.stores import HeadMoved

__all__ = ["KINDS", "HeadMoved", "append", "get", "head", "head_meta", "head_pointer", "list_revisions"]

from .models import Revision, Workspace

KINDS: tuple[str, ...] = tuple(Revision.Kind.values)


def _check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    return kind


def _chain(workspace: Workspace, kind: str):
    return Revision.objects.filter(workspace=workspace, kind=_check_kind(kind))


def head(workspace: Workspace, kind: str) -> Revision | None:
    """The newest revision of the chain, or None for an empty chain."""
    return _chain(workspace, kind).order_by("-seq").first()


def head_meta(workspace: Workspace, kind: str) -> dict[str, Any] | None:
    """The meta of the newest revision (None for an empty chain), without its document."""
    return _chain(workspace, kind).order_by("-seq").values_list("meta", flat=True).first()


def head_pointer(workspace: Workspace, kind: str) -> tuple[int, str] | None:
    """(seq, digest) of the newest revision, without its document; None for an empty chain."""
    return _chain(workspace, kind).order_by("-seq").values_list("seq", "digest").first()


def _canonical(value: Any, what: str) -> str:
    try:
        canonical = canonical_json(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the {what} is not JSON: {exc}") from None
    if "\\u0000" in canonical:
        raise ValueError(f"the {what} holds a NUL character, which cannot be stored")
    return canonical


def append(
    workspace: Workspace,
    kind: str,
    document: Any,
    *,
    expected_head: str | None,
    meta: Mapping[str, Any] | None = None,
) -> Revision:
    """Append `document` after `expected_head` (a digest, or None for an empty chain); HeadMoved when stale."""
    _check_kind(kind)
    digest = hashlib.sha256(_canonical(document, "document").encode("utf-8")).hexdigest()
    meta = dict(meta or {})
    _canonical(meta, "meta")
    try:
        # One transaction (a savepoint when the caller has one): a racing writer's IntegrityError rolls back only
        # this append, and the caller's transaction stays usable to read the new head.
        with transaction.atomic():
            current = head_pointer(workspace, kind)
            actual = current[1] if current is not None else None
            if expected_head != actual:
                raise HeadMoved(workspace.slug, kind, expected_head, actual)
            return Revision.objects.create(
                workspace=workspace,
                kind=kind,
                seq=0 if current is None else current[0] + 1,
                digest=digest,
                parent_digest=actual,
                document=document,
                meta=meta,
            )
    except IntegrityError:
        latest = head_pointer(workspace, kind)
        raise HeadMoved(workspace.slug, kind, expected_head, latest[1] if latest else None) from None


def get(workspace: Workspace, kind: str, digest: str) -> Revision | None:
    """The newest revision of the chain with this digest, or None."""
    return _chain(workspace, kind).filter(digest=digest).order_by("-seq").first()


def list_revisions(workspace: Workspace, kind: str, limit: int = 50) -> list[Revision]:
    """Up to `limit` revisions, newest first."""
    return list(_chain(workspace, kind).order_by("-seq")[: max(0, limit)])
