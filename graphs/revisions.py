"""The reference RevisionStore (spec §8) as functions over `Revision`: head, append, get, list.

One append-only chain per (workspace, kind). `append` states the head it expects; a stale expectation raises
`HeadMoved`. The workspace row is locked for the append, and the unique (workspace, kind, seq) constraint is the last
line of defence: a racing writer that slips past the lock still gets HeadMoved, so a chain can never fork.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, transaction

from graphs.core import canonical_json, sha256_digest

from .models import Revision, Workspace

KINDS: tuple[str, ...] = tuple(Revision.Kind.values)


class HeadMoved(Exception):
    """The chain's head is not the one the writer expected (None stands for an empty chain)."""

    def __init__(self, workspace: str, kind: str, expected: str | None, actual: str | None) -> None:
        self.workspace = workspace
        self.kind = kind
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"the {kind} head of workspace {workspace!r} moved: expected {_short(expected)}, found {_short(actual)}"
        )


def _short(digest: str | None) -> str:
    return digest[:12] if digest else "an empty chain"


def _check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    return kind


def _chain(workspace: Workspace, kind: str):
    return Revision.objects.filter(workspace=workspace, kind=_check_kind(kind))


def head(workspace: Workspace, kind: str) -> Revision | None:
    """The newest revision of the chain, or None for an empty chain."""
    return _chain(workspace, kind).order_by("-seq").first()


def _plain_json(value: Any, what: str) -> Any:
    try:
        canonical = canonical_json(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the {what} is not JSON: {exc}") from None
    if "\\u0000" in canonical:
        raise ValueError(f"the {what} holds a NUL character, which cannot be stored")
    return value


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
    _plain_json(document, "document")
    meta = dict(_plain_json(dict(meta or {}), "meta"))
    digest = sha256_digest(document)
    with transaction.atomic():
        Workspace.objects.select_for_update().filter(pk=workspace.pk).values_list("pk", flat=True).first()
        current = head(workspace, kind)
        actual = current.digest if current is not None else None
        if expected_head != actual:
            raise HeadMoved(workspace.slug, kind, expected_head, actual)
        try:
            with transaction.atomic():
                return Revision.objects.create(
                    workspace=workspace,
                    kind=kind,
                    seq=0 if current is None else current.seq + 1,
                    digest=digest,
                    parent_digest=actual,
                    document=document,
                    meta=meta,
                )
        except IntegrityError:
            latest = head(workspace, kind)
            raise HeadMoved(workspace.slug, kind, expected_head, latest.digest if latest else None) from None


def get(workspace: Workspace, kind: str, digest: str) -> Revision | None:
    """The newest revision of the chain with this digest, or None."""
    return _chain(workspace, kind).filter(digest=digest).order_by("-seq").first()


def list_revisions(workspace: Workspace, kind: str, limit: int = 50) -> list[Revision]:
    """Up to `limit` revisions, newest first."""
    return list(_chain(workspace, kind).order_by("-seq")[: max(0, limit)])
