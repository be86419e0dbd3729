"""The model2vec adapter, on a tiny real model built here and saved to a temporary directory (nothing downloaded)."""

from __future__ import annotations

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured
from model2vec import StaticModel
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.normalizers import Lowercase
from tokenizers.pre_tokenizers import Whitespace

from intents import embeddings
from intents.embedders import Model2VecEmbedder, model2vec_from_settings
from intents.models import Embedding

WORDS = ["[UNK]", "reset", "my", "password", "change", "email", "book", "a", "flight", "cancel", "order", "refund"]
DIMENSIONS = 24


def save_model(directory, seed: int = 7):
    """A word-level tokenizer over WORDS and a seeded random table, saved as model2vec saves its models."""
    tokenizer = Tokenizer(WordLevel({word: index for index, word in enumerate(WORDS)}, unk_token="[UNK]"))
    tokenizer.normalizer = Lowercase()
    tokenizer.pre_tokenizer = Whitespace()
    vectors = np.random.default_rng(seed).standard_normal((len(WORDS), DIMENSIONS)).astype(np.float32)
    StaticModel(vectors=vectors, tokenizer=tokenizer).save_pretrained(directory)
    return directory


@pytest.fixture(autouse=True)
def no_hub(monkeypatch):
    """Any attempt to reach a model hub fails the test."""
    import model2vec.persistence.persistence as persistence

    def refuse(*args, **kwargs):
        raise AssertionError("the model hub was called")

    monkeypatch.setattr(persistence.huggingface_hub, "snapshot_download", refuse)


@pytest.fixture
def model_dir(tmp_path):
    return save_model(tmp_path / "tiny-m2v")


@pytest.fixture
def fresh_embedder_cache():
    embeddings._embedder_from.cache_clear()
    yield
    embeddings._embedder_from.cache_clear()


def test_rows_have_the_model_dimensions_and_unit_length(model_dir):
    embedder = Model2VecEmbedder(model_dir)
    assert embedder.dimensions == DIMENSIONS
    matrix = embedder.embed(["reset my password", "Book a flight", "refund"])
    assert matrix.shape == (3, DIMENSIONS) and matrix.dtype == np.float64
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, rtol=1e-12)
    assert embedder.embed([]).shape == (0, DIMENSIONS)


def test_the_same_text_gets_the_same_vector_in_any_batch_and_any_instance(model_dir):
    first = Model2VecEmbedder(model_dir).embed(["cancel my order", "change email"])
    again = Model2VecEmbedder(model_dir).embed(["change email", "cancel my order"])
    np.testing.assert_array_equal(first, again[::-1])


def test_texts_sharing_words_are_closer_than_unrelated_ones(model_dir):
    reset, reset_again, flight = Model2VecEmbedder(model_dir).embed(
        ["reset my password", "password reset", "book a flight"]
    )
    assert float(reset @ reset_again) > float(reset @ flight)
    assert float(reset @ reset_again) > 0.5


def test_a_text_with_no_known_word_gets_one_fixed_unit_vector(model_dir):
    matrix = Model2VecEmbedder(model_dir).embed(["", "zzz qqq", "reset"])
    np.testing.assert_array_equal(matrix[0], matrix[1])
    np.testing.assert_allclose(matrix[0], np.full(DIMENSIONS, 1 / np.sqrt(DIMENSIONS)))
    assert not np.array_equal(matrix[0], matrix[2])


def test_one_string_instead_of_a_list_is_refused(model_dir):
    embedder = Model2VecEmbedder(model_dir)
    with pytest.raises(TypeError, match="not one string"):
        embedder.embed("reset my password")
    with pytest.raises(TypeError, match="strings only"):
        embedder.embed(["reset", 3])


def test_the_name_holds_the_directory_and_a_digest_of_the_weights(tmp_path):
    one = Model2VecEmbedder(save_model(tmp_path / "a" / "tiny-m2v", seed=1))
    same = Model2VecEmbedder(save_model(tmp_path / "b" / "tiny-m2v", seed=1))
    other = Model2VecEmbedder(save_model(tmp_path / "c" / "tiny-m2v", seed=2))
    prefix, directory, digest = one.name.split(":")
    assert (prefix, directory) == ("model2vec", "tiny-m2v") and len(digest) == 16
    assert one.name == same.name  # same files, same name, wherever they sit
    assert other.name != one.name  # another matrix: its vectors are stored apart


@pytest.mark.parametrize("kind", ["missing", "file", "empty", "hub id"])
def test_anything_but_a_local_model_directory_is_refused(tmp_path, kind):
    if kind == "missing":
        path, message = tmp_path / "nowhere", "is not an existing local directory"
    elif kind == "file":
        path, message = tmp_path / "model.safetensors", "is not an existing local directory"
        path.write_bytes(b"not a model")
    elif kind == "empty":
        path, message = tmp_path, "holds no model2vec model"
    else:
        path, message = "minishlab/potion-base-8M", "never downloads"
    with pytest.raises(ImproperlyConfigured, match=message):
        Model2VecEmbedder(path)


def test_the_factory_needs_its_path_setting(settings):
    settings.WAYMARK_INTENT_EMBEDDER_PATH = ""
    with pytest.raises(ImproperlyConfigured, match="WAYMARK_INTENT_EMBEDDER_PATH"):
        model2vec_from_settings()


@pytest.mark.django_db
def test_the_setting_plugs_it_in_and_vectors_are_stored_under_its_name(settings, model_dir, fresh_embedder_cache):
    settings.WAYMARK_INTENT_EMBEDDER = "intents.embedders.model2vec_from_settings"
    settings.WAYMARK_INTENT_EMBEDDER_PATH = str(model_dir)
    embedder = embeddings.get_embedder()
    assert isinstance(embedder, Model2VecEmbedder) and embedder.directory == model_dir.resolve()
    assert embeddings.get_embedder() is embedder

    texts = ["reset my password", "book a flight", "reset my password"]
    rows = embeddings.missing_embeddings(embedder, texts)
    assert len(rows) == 2
    Embedding.objects.bulk_create(rows)
    stored = {row.text: row for row in Embedding.objects.filter(embedder=embedder.name)}
    assert set(stored) == {"reset my password", "book a flight"}
    expected = embedder.embed(["reset my password"])[0].astype(np.float32)
    row = stored["reset my password"]
    assert row.dimensions == DIMENSIONS and row.text_digest == embeddings.text_digest("reset my password")
    np.testing.assert_array_equal(row.as_array(), expected)
    assert embeddings.missing_embeddings(embedder, texts) == []  # stored once per text and embedder
