"""The RevisionStore contract of spec §8, as one function every adapter runs (the host runs it on its own adapter).

`revision_store_contract(store)` needs an empty store (or at least empty chains for the two workspaces it is given),
and `head_moved` is the exception the adapter raises when the head moved (the core's HeadMoved by default).
"""

import pytest

from graphs.core.stores import HeadMoved

FIRST = {"schema": 1, "text": "première révision ✓", "items": [1, 2, 3]}
SECOND = {"schema": 1, "text": "second", "items": []}


def revision_store_contract(store, *, workspaces=("contract-a", "contract-b"), head_moved=HeadMoved):
    """Every check of spec §8's contract test, on two workspaces and the kinds `graph` and `rejections`."""
    workspace, other_workspace = workspaces

    assert store.head(workspace, "graph") is None, "an empty chain has no head"
    assert list(store.list(workspace, "graph")) == []

    first = store.append(workspace, "graph", FIRST, expected_head=None, meta={"origin": "contract", "iteration": 0})
    assert first.seq == 0
    assert first.parent_digest is None
    assert dict(first.meta) == {"origin": "contract", "iteration": 0}
    assert first.workspace == workspace and first.kind == "graph"
    assert len(first.digest) == 64
    assert first.created_at, "created_at is set (ISO UTC)"
    assert store.head(workspace, "graph").digest == first.digest

    second = store.append(workspace, "graph", SECOND, expected_head=first.digest)
    assert second.seq == 1
    assert second.parent_digest == first.digest
    assert dict(second.meta) == {}

    with pytest.raises(head_moved):
        store.append(workspace, "graph", {"stale": True}, expected_head=first.digest)
    with pytest.raises(head_moved):
        store.append(workspace, "graph", {"stale": True}, expected_head=None)
    assert store.head(workspace, "graph").digest == second.digest, "a refused append changes nothing"

    assert [revision.seq for revision in store.list(workspace, "graph")] == [1, 0]
    assert [revision.seq for revision in store.list(workspace, "graph", limit=1)] == [1]

    fetched = store.get(workspace, "graph", first.digest)
    assert fetched is not None
    assert fetched.document == FIRST, "UTF-8 content comes back intact"
    assert fetched.seq == 0
    assert store.get(workspace, "graph", "0" * 64) is None

    assert store.head(workspace, "rejections") is None, "kinds are isolated"
    assert store.head(other_workspace, "graph") is None, "workspaces are isolated"
    assert store.get(other_workspace, "graph", first.digest) is None
    assert store.get(workspace, "rejections", first.digest) is None
    other = store.append(other_workspace, "graph", FIRST, expected_head=None)
    assert other.seq == 0 and other.digest == first.digest, "the digest covers the document only"
    assert [revision.seq for revision in store.list(workspace, "graph")] == [1, 0]
