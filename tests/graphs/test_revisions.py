"""The RevisionStore contract of spec §8, run against graphs.revisions over the Revision model."""

import pytest

from graphs import revisions
from graphs.models import Revision
from graphs.revisions import HeadMoved
from tests.graphs.factories import make_empty_workspace

pytestmark = pytest.mark.django_db

DOC_A = {"schema": 1, "text": "première révision ✓ 日本語"}
DOC_B = {"schema": 1, "text": "second"}


@pytest.fixture
def ws():
    return make_empty_workspace("contract")


def test_an_empty_chain_has_no_head(ws):
    assert revisions.head(ws, "graph") is None


def test_the_first_append_is_seq_0_without_parent_and_keeps_meta(ws):
    first = revisions.append(ws, "graph", DOC_A, expected_head=None, meta={"origin": "skeleton"})
    assert (first.seq, first.parent_digest, first.meta) == (0, None, {"origin": "skeleton"})
    assert revisions.head(ws, "graph").digest == first.digest


def test_the_second_append_is_seq_1_with_the_first_as_parent(ws):
    first = revisions.append(ws, "graph", DOC_A, expected_head=None)
    second = revisions.append(ws, "graph", DOC_B, expected_head=first.digest)
    assert (second.seq, second.parent_digest) == (1, first.digest)


def test_the_digest_covers_the_document_only(ws):
    first = revisions.append(ws, "graph", DOC_A, expected_head=None, meta={"a": 1})
    other = make_empty_workspace("other")
    again = revisions.append(other, "graph", DOC_A, expected_head=None, meta={"b": 2})
    assert first.digest == again.digest and len(first.digest) == 64


def test_it_rejects_a_stale_expected_head(ws):
    first = revisions.append(ws, "graph", DOC_A, expected_head=None)
    revisions.append(ws, "graph", DOC_B, expected_head=first.digest)
    with pytest.raises(HeadMoved) as caught:
        revisions.append(ws, "graph", {"x": 1}, expected_head=first.digest)
    assert caught.value.expected == first.digest
    assert caught.value.actual == revisions.head(ws, "graph").digest
    assert (caught.value.workspace, caught.value.kind) == ("contract", "graph")
    assert Revision.objects.filter(workspace=ws).count() == 2


def test_it_rejects_none_as_the_expected_head_of_a_non_empty_chain(ws):
    revisions.append(ws, "graph", DOC_A, expected_head=None)
    with pytest.raises(HeadMoved):
        revisions.append(ws, "graph", DOC_B, expected_head=None)


def test_it_rejects_a_digest_as_the_expected_head_of_an_empty_chain(ws):
    with pytest.raises(HeadMoved):
        revisions.append(ws, "graph", DOC_A, expected_head="0" * 64)


def test_list_is_newest_first_and_limited(ws):
    first = revisions.append(ws, "graph", DOC_A, expected_head=None)
    revisions.append(ws, "graph", DOC_B, expected_head=first.digest)
    assert [r.seq for r in revisions.list_revisions(ws, "graph")] == [1, 0]
    assert [r.seq for r in revisions.list_revisions(ws, "graph", limit=1)] == [1]


def test_get_returns_utf8_content_intact_and_none_for_an_unknown_digest(ws):
    first = revisions.append(ws, "graph", DOC_A, expected_head=None)
    assert revisions.get(ws, "graph", first.digest).document == DOC_A
    assert revisions.get(ws, "graph", "f" * 64) is None


def test_kinds_and_workspaces_are_isolated(ws):
    other = make_empty_workspace("other")
    graph = revisions.append(ws, "graph", DOC_A, expected_head=None)
    rejections = revisions.append(ws, "rejections", DOC_B, expected_head=None)
    assert rejections.seq == 0
    assert revisions.head(other, "graph") is None
    assert revisions.get(ws, "rejections", graph.digest) is None
    assert revisions.get(other, "graph", graph.digest) is None
    for kind in ("traces", "checkpoints"):
        assert revisions.head(ws, kind) is None


def test_it_refuses_an_unknown_kind_and_a_document_that_is_not_json(ws):
    with pytest.raises(ValueError):
        revisions.append(ws, "wiki", DOC_A, expected_head=None)
    with pytest.raises(ValueError):
        revisions.append(ws, "graph", {"x": float("nan")}, expected_head=None)
    with pytest.raises(ValueError):
        revisions.append(ws, "graph", {"x": "nul\x00"}, expected_head=None)
    assert not Revision.objects.filter(workspace=ws).exists()


def test_revisions_cannot_be_updated_or_deleted(ws):
    first = revisions.append(ws, "graph", DOC_A, expected_head=None)
    with pytest.raises(TypeError):
        first.save()
    with pytest.raises(TypeError):
        first.delete()
    with pytest.raises(TypeError):
        Revision.objects.filter(pk=first.pk).update(meta={})
