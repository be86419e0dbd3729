"""The configured embedder, and storing vectors once per (text, embedder).

The default is intents.core.embed.HashedNgramEmbedder: deterministic, numpy only, nothing to download. A real
embedding model is plugged in with the setting WAYMARK_INTENT_EMBEDDER = "package.module.factory", a callable with no
arguments that returns an object with `name`, `dimensions` and `embed(texts) -> np.ndarray` (the
intents.core.embed.Embedder protocol). The factory must load its model from a local path (for example a
sentence-transformers model directory named by another setting): Waymark downloads nothing at run time, so a
factory that would fetch weights must fail instead. The embedder's `name` should say which model and version it is;
vectors are stored under that name, so two models never mix.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from .models import Embedding

MAX_DIMENSIONS = 8192


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@functools.cache
def _embedder_from(path: str):
    if not path:
        from .core.embed import HashedNgramEmbedder

        return HashedNgramEmbedder()
    try:
        factory = import_string(path)
    except ImportError as error:
        raise ImproperlyConfigured(f"WAYMARK_INTENT_EMBEDDER: cannot import {path!r}: {error}") from error
    embedder = factory()
    for attribute in ("name", "dimensions", "embed"):
        if not hasattr(embedder, attribute):
            raise ImproperlyConfigured(f"WAYMARK_INTENT_EMBEDDER: {path!r} returned an embedder without {attribute}")
    return embedder


def get_embedder():
    """The embedder labels are embedded with (built once per process)."""
    return _embedder_from(getattr(settings, "WAYMARK_INTENT_EMBEDDER", "") or "")


def vectors_of(embedder, texts: Sequence[str]) -> np.ndarray:
    """The embedder's float32 vectors for `texts`, checked: one finite row of `dimensions` values per text."""
    matrix = np.asarray(embedder.embed(list(texts)), dtype=np.float32)
    if matrix.shape != (len(texts), int(embedder.dimensions)):
        raise ValueError(
            f"embedder {embedder.name!r} returned shape {matrix.shape}, expected ({len(texts)}, {embedder.dimensions})"
        )
    if not np.isfinite(matrix).all():
        raise ValueError(f"embedder {embedder.name!r} returned a non-finite value")
    return matrix


def as_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def missing_embeddings(embedder, texts: Sequence[str]) -> list[Embedding]:
    """Unsaved rows for the texts that have no vector under this embedder yet (one query, then the embedder once).

    Call outside a transaction (a real embedder may be slow); intents.services saves the rows."""
    unique = list(dict.fromkeys(text for text in texts if text))
    if not unique:
        return []
    digests = {text: text_digest(text) for text in unique}
    known = set(
        Embedding.objects.filter(embedder=embedder.name, text_digest__in=list(digests.values())).values_list(
            "text_digest", flat=True
        )
    )
    todo = [text for text in unique if digests[text] not in known]
    if not todo:
        return []
    matrix = vectors_of(embedder, todo)
    return [
        Embedding(
            text_digest=digests[text],
            embedder=str(embedder.name)[:200],
            dimensions=int(embedder.dimensions),
            vector=as_bytes(row),
            text=text,
        )
        for text, row in zip(todo, matrix, strict=True)
    ]
