"""Text embedders for intent labels: the protocol, and an offline default that needs nothing but numpy.

`HashedNgramEmbedder` is a feature-hashing bag of word n-grams and character n-grams. It knows no synonyms, but
labels that share words or word pieces land close ("reset my password" and "password reset"), and it is
deterministic everywhere: features are hashed with BLAKE2b (never Python's per-process salted `hash()`), so a
vector stored by one process is the vector any other process computes.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections import Counter
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from .normalize import normalize_intent

HASHED_NGRAM_VERSION = "hashed-ngram-v1"
_EMPTY_FEATURE = "\x00empty"  # text with no word at all still gets a (shared) unit vector


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors. `name` identifies the embedder and its settings: vectors are stored under it, so
    two embedders (or one with other settings) never mix."""

    @property
    def name(self) -> str: ...

    @property
    def dimensions(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One row of `dimensions` floats per text, in order: shape `(len(texts), dimensions)`."""
        ...


def _checked_range(value: tuple[int, int], what: str) -> tuple[int, int]:
    try:
        low, high = (int(bound) for bound in value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a (low, high) pair of integers") from None
    if not 1 <= low <= high:
        raise ValueError(f"{what} must satisfy 1 <= low <= high")
    return low, high


@functools.lru_cache(maxsize=1 << 17)
def _feature_hash(feature: str) -> int:
    return int.from_bytes(hashlib.blake2b(feature.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


@functools.lru_cache(maxsize=1 << 15)
def _char_grams(word: str, low: int, high: int) -> tuple[str, ...]:
    marked = f"<{word}>"
    return tuple(
        f"c{size}:" + marked[start : start + size]
        for size in range(low, min(high, len(marked)) + 1)
        for start in range(len(marked) - size + 1)
    )


class HashedNgramEmbedder:
    """Word n-grams and character n-grams (of each word between `<` and `>`) of the normalized text, hashed into
    `dimensions` signed buckets, weighted by sublinear term frequency (1 + ln count). The word part and the
    character part are each scaled to unit length and weigh the same; the sum is L2-normalised (float64 rows)."""

    def __init__(
        self,
        dimensions: int = 384,
        word_ngrams: tuple[int, int] = (1, 2),
        char_ngrams: tuple[int, int] = (3, 5),
    ) -> None:
        if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1:
            raise ValueError("dimensions must be a positive integer")
        self._dimensions = dimensions
        self.word_ngrams = _checked_range(word_ngrams, "word_ngrams")
        self.char_ngrams = _checked_range(char_ngrams, "char_ngrams")

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def name(self) -> str:
        (word_low, word_high), (char_low, char_high) = self.word_ngrams, self.char_ngrams
        return (
            f"{HASHED_NGRAM_VERSION}:dim={self._dimensions}:words={word_low}-{word_high}:chars={char_low}-{char_high}"
        )

    def __repr__(self) -> str:
        return (
            f"HashedNgramEmbedder(dimensions={self._dimensions}, word_ngrams={self.word_ngrams}, "
            f"char_ngrams={self.char_ngrams})"
        )

    def features(self, text: str) -> tuple[Counter[str], Counter[str]]:
        """The word features and the character features of one text, with their counts."""
        words = normalize_intent(text).split()
        word_features: Counter[str] = Counter()
        char_features: Counter[str] = Counter()
        if not words:
            word_features[_EMPTY_FEATURE] = 1
            return word_features, char_features
        low, high = self.word_ngrams
        for size in range(low, high + 1):
            for start in range(len(words) - size + 1):
                word_features[f"w{size}:" + " ".join(words[start : start + size])] += 1
        low, high = self.char_ngrams
        for word in words:
            char_features.update(_char_grams(word, low, high))
        return word_features, char_features

    def _hashed(self, features: Counter[str]) -> np.ndarray:
        vector = np.zeros(self._dimensions, dtype=np.float64)
        for feature, count in features.items():
            digest = _feature_hash(feature)
            sign = -1.0 if digest >> 63 else 1.0
            vector[digest % self._dimensions] += sign * (1.0 + math.log(count))
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm > 0.0 else vector

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        texts = list(texts)
        matrix = np.zeros((len(texts), self._dimensions), dtype=np.float64)
        for row, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError("embed() takes strings only")
            word_features, char_features = self.features(text)
            vector = self._hashed(word_features) + self._hashed(char_features)
            norm = float(np.linalg.norm(vector))
            if norm == 0.0:  # the two parts cancelled exactly (possible only with very few dimensions)
                vector = self._hashed(Counter({_EMPTY_FEATURE: 1}))
                norm = 1.0
            matrix[row] = vector / norm
        return matrix
