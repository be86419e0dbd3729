"""Real embedding models for intent labels, plugged in with WAYMARK_INTENT_EMBEDDER (see intents.embeddings).

`Model2VecEmbedder` wraps a model2vec static model (a token-embedding table averaged per text: no torch, no GPU)
loaded from a local directory, the layout `StaticModel.save_pretrained` writes (model.safetensors, tokenizer.json,
config.json) or a sentence-transformers static-embedding export. model2vec is optional: install it (`pip install
model2vec`) only to use this adapter; it is imported when an embedder is built, never when this module is.

    WAYMARK_INTENT_EMBEDDER = "intents.embedders.model2vec_from_settings"
    WAYMARK_INTENT_EMBEDDER_PATH = "/srv/models/potion-base-8M"

Nothing is downloaded: the path must be an existing directory with the model's files in it, or the embedder is
refused before model2vec sees it (model2vec reads any path that does not exist as a hub model id and fetches it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# Where the weights and the tokenizer sit, in the layouts model2vec loads (its own first, as model2vec tries them).
_LAYOUTS = (
    ("model.safetensors", "tokenizer.json", "config.json"),
    ("model.safetensors", "tokenizer.json", "config_sentence_transformers.json"),
    ("0_StaticEmbedding/model.safetensors", "0_StaticEmbedding/tokenizer.json", "config_sentence_transformers.json"),
)
_NAME_DIRECTORY_CHARS = 120  # the stored embedder name has 200 characters: the digest must never be cut off
_DIGEST_CHARS = 16


def _model_files(directory: Path) -> tuple[Path, ...]:
    for layout in _LAYOUTS:
        files = tuple(directory / name for name in layout)
        if all(path.is_file() for path in files):
            return files
    raise ImproperlyConfigured(
        f"model2vec embedder: {str(directory)!r} holds no model2vec model "
        "(expected model.safetensors, tokenizer.json and config.json, as StaticModel.save_pretrained writes them)"
    )


def _digest(files: Sequence[Path]) -> str:
    """SHA-256 over the weights, the tokenizer and the config, each length-prefixed: a change to any of them changes
    the vectors, so it changes the embedder's name."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.stat().st_size.to_bytes(8, "little"))
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()[:_DIGEST_CHARS]


class Model2VecEmbedder:
    """A model2vec static model from a local directory. Rows are the mean of the text's token vectors, as float64
    scaled to unit length; a text with no known token (or an empty one) gets one fixed unit vector (every component
    1/sqrt(d)).

    `name` is "model2vec:<directory name>:<digest>", the digest covering the weights, tokenizer and config files,
    so two models (or one model retrained in place) never share stored vectors."""

    def __init__(self, path: str | Path) -> None:
        if not isinstance(path, str | Path) or not str(path).strip():
            raise ImproperlyConfigured("model2vec embedder: a local model directory is required (no path given)")
        directory = Path(path).expanduser().resolve()
        if not directory.is_dir():
            raise ImproperlyConfigured(
                f"model2vec embedder: {str(path)!r} is not an existing local directory; "
                "Waymark loads models from disk only and never downloads one"
            )
        files = _model_files(directory)
        try:
            from model2vec import StaticModel
        except ImportError as error:
            raise ImproperlyConfigured(
                f"model2vec embedder: the model2vec package is not installed (pip install model2vec): {error}"
            ) from error
        # An existing directory is read as it is: model2vec calls the hub only for a path that does not exist.
        self._model = StaticModel.from_pretrained(directory, token=None)
        self.directory = directory
        self._dimensions = int(self._model.dim)
        if self._dimensions < 1:
            raise ImproperlyConfigured(f"model2vec embedder: the model in {str(directory)!r} has no dimensions")
        self._name = f"model2vec:{directory.name[:_NAME_DIRECTORY_CHARS]}:{_digest(files)}"
        self._empty = np.full(self._dimensions, 1.0 / np.sqrt(self._dimensions), dtype=np.float64)

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def __repr__(self) -> str:
        return f"Model2VecEmbedder({str(self.directory)!r})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        texts = list(texts)
        if not all(isinstance(text, str) for text in texts):
            raise TypeError("embed() takes strings only")
        if not texts:
            return np.zeros((0, self._dimensions), dtype=np.float64)
        # No worker processes (this runs inside Celery workers), no progress bar; normalised here, in float64.
        raw = self._model.encode(texts, normalize=False, show_progress_bar=False, use_multiprocessing=False)
        matrix = np.asarray(raw, dtype=np.float64).reshape(len(texts), self._dimensions)
        norms = np.linalg.norm(matrix, axis=1)
        empty = norms == 0.0  # no known token; a non-finite row stays so, and intents.embeddings refuses it
        matrix[~empty] /= norms[~empty, None]
        matrix[empty] = self._empty
        return matrix


def model2vec_from_settings() -> Model2VecEmbedder:
    """The factory to name in WAYMARK_INTENT_EMBEDDER: the model in the directory WAYMARK_INTENT_EMBEDDER_PATH."""
    path = getattr(settings, "WAYMARK_INTENT_EMBEDDER_PATH", "") or ""
    if not str(path).strip():
        raise ImproperlyConfigured(
            "WAYMARK_INTENT_EMBEDDER_PATH must name the local directory of a model2vec model "
            "when WAYMARK_INTENT_EMBEDDER is intents.embedders.model2vec_from_settings"
        )
    return Model2VecEmbedder(path)
