"""The offline default embedder: the same in every process, unit rows of the right shape, similar phrasings close."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from intents.core.embed import Embedder, HashedNgramEmbedder

ROOT = Path(__file__).resolve().parents[3]
TEXTS = ["reset my password", "password reset", "cancel my order", "Ünïcödé — café login", "", "!!!", "a"]


def cosine(embedder: HashedNgramEmbedder, first: str, second: str) -> float:
    left, right = embedder.embed([first, second])
    return float(left @ right)


def test_it_is_an_embedder_with_a_name_that_says_its_settings():
    default = HashedNgramEmbedder()
    assert isinstance(default, Embedder)
    assert default.dimensions == 384
    assert default.name == "hashed-ngram-v1:dim=384:words=1-2:chars=3-5"
    other = HashedNgramEmbedder(dimensions=64, word_ngrams=(1, 3), char_ngrams=(2, 4))
    assert other.name == "hashed-ngram-v1:dim=64:words=1-3:chars=2-4"


def test_it_gives_one_unit_row_per_text_in_order():
    embedder = HashedNgramEmbedder()
    matrix = embedder.embed(TEXTS)
    assert matrix.shape == (len(TEXTS), 384)
    assert matrix.dtype == np.float64
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, rtol=0, atol=1e-12)
    for row, text in enumerate(TEXTS):
        assert np.array_equal(embedder.embed([text])[0], matrix[row])
    assert embedder.embed([]).shape == (0, 384)
    assert HashedNgramEmbedder(dimensions=7).embed(TEXTS).shape == (len(TEXTS), 7)


def test_it_embeds_the_normalized_text():
    embedder = HashedNgramEmbedder()
    first, second, third = embedder.embed(["  Reset_Password!! ", "reset password", "ＲＥＳＥＴ　password"])
    assert np.array_equal(first, second)
    assert np.array_equal(first, third)


def test_similar_phrasings_land_close():
    embedder = HashedNgramEmbedder()
    assert cosine(embedder, "reset my password", "password reset") > cosine(
        embedder, "reset my password", "cancel my order"
    )
    assert cosine(embedder, "reset my password", "password reset") > 0.6
    assert cosine(embedder, "reset my password", "cancel my order") < 0.3
    assert cosine(embedder, "refund my flight", "refunding a flight") > cosine(
        embedder, "refund my flight", "change my seat"
    )


def test_word_order_still_counts_through_word_bigrams():
    embedder = HashedNgramEmbedder()
    assert cosine(embedder, "password reset", "reset password") < 1.0 - 1e-6
    assert cosine(HashedNgramEmbedder(word_ngrams=(1, 1)), "password reset", "reset password") == pytest.approx(1.0)


def test_it_is_the_same_in_another_process_with_another_hash_seed():
    """No salted hash(): a vector stored by one worker is the vector every other worker computes."""
    script = (
        "import json, sys; from intents.core.embed import HashedNgramEmbedder; "
        "print(json.dumps(HashedNgramEmbedder().embed(json.loads(sys.argv[1])).tolist()))"
    )
    here = HashedNgramEmbedder().embed(TEXTS)
    for seed in ("1", "2"):
        environment = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        output = subprocess.run(
            [sys.executable, "-c", script, json.dumps(TEXTS)],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
            env=environment,
        ).stdout
        assert np.array_equal(np.array(json.loads(output)), here)


def test_it_pins_its_hashing():
    """A changed hash or weighting would silently mix old and new vectors under one name: bump the version."""
    vector = HashedNgramEmbedder(dimensions=16).embed(["reset password"])[0]
    assert np.count_nonzero(vector) > 4
    assert np.array_equal(vector, HashedNgramEmbedder(dimensions=16).embed(["reset password"])[0])
    assert vector.tolist() == pytest.approx(PINNED_RESET_PASSWORD_16, abs=1e-6)


PINNED_RESET_PASSWORD_16 = [
    *(-0.119309, 0.114312, -0.477236, -0.472238, -0.472238, 0.0, -0.119309, -0.119309),
    *(0.357927, 0.0, 0.0, -0.238618, -0.238618, 0.119309, -0.119309, 0.0),
]


@pytest.mark.parametrize(
    "options",
    [
        {"dimensions": 0},
        {"dimensions": True},
        {"dimensions": 2.5},
        {"word_ngrams": (0, 2)},
        {"word_ngrams": (3, 2)},
        {"char_ngrams": (1,)},
        {"char_ngrams": "ab"},
    ],
)
def test_it_rejects_bad_settings(options):
    with pytest.raises(ValueError):
        HashedNgramEmbedder(**options)


def test_it_rejects_one_string_or_non_strings():
    with pytest.raises(TypeError):
        HashedNgramEmbedder().embed("reset password")
    with pytest.raises(TypeError):
        HashedNgramEmbedder().embed([b"reset password"])
