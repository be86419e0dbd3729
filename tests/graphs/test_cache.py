"""The guidance caches: content-addressed contexts, graphs parsed once per digest, cards that follow the pointer."""

import pytest
from django.conf import settings as django_settings
from django.core.cache import cache as shared

from graphs import cache, selectors
from graphs.guidance import workspace_guidance
from graphs.models import Revision
from tests.graphs.factories import make_demo_workspace
from tests.promote import promote_graph_revision

pytestmark = pytest.mark.django_db


def test_a_graph_is_parsed_once_per_digest(django_assert_num_queries):
    workspace = make_demo_workspace()
    revision = workspace.active_revision
    with django_assert_num_queries(1):
        first = selectors.graph_at(revision.pk, revision.digest)
    with django_assert_num_queries(0):
        assert selectors.graph_at(revision.pk, revision.digest) is first
    assert first.digest == revision.digest


def test_a_tampered_document_is_refused():
    workspace = make_demo_workspace()
    skeleton_rev = Revision.objects.get(workspace=workspace, seq=0)
    with pytest.raises(ValueError, match="does not match its digest"):
        selectors.graph_at(skeleton_rev.pk, "0" * 64)


def test_serialized_contexts_are_keyed_by_content_and_shared(django_assert_num_queries):
    workspace = make_demo_workspace()
    steps = [{"action": "search"}]
    first = workspace_guidance(slug=workspace.slug, query="q", steps=steps, mode="raw_subgraph")
    cache.clear_local()  # another process: only the shared cache is warm
    with django_assert_num_queries(1):  # the document, parsed once in this process; the context comes shared
        again = workspace_guidance(slug=workspace.slug, query="q", steps=steps, mode="raw_subgraph")
    assert again.text == first.text and again.subgraph_digest == first.subgraph_digest


def test_a_pointer_move_elsewhere_reaches_this_process_within_the_local_window(monkeypatch):
    workspace = make_demo_workspace()
    assert selectors.workspace_card(workspace.slug)["active"]["seq"] == 1
    first = Revision.objects.get(workspace=workspace, seq=0)
    promote_graph_revision(first, on_commit=False)  # committed by another process: its callback runs there
    shared.set(cache._version_key(workspace.slug), "moved-elsewhere", None)  # the commit callback of another process
    assert selectors.workspace_card(workspace.slug)["active"]["seq"] == 1  # this process's copy, for at most 1 s
    monkeypatch.setattr(cache.recent_cards, "max_age", 0.0)  # the local window (CARD_LOCAL_SECONDS) has passed
    assert selectors.workspace_card(workspace.slug)["active"]["seq"] == 0


def test_a_card_built_before_a_pointer_move_is_never_served_after_it():
    workspace = make_demo_workspace()

    def build_then_move():
        stale = {"id": workspace.pk, "active": {"seq": 1}}
        cache.forget_active(workspace.slug)  # a commit lands between the reader's version read and its write
        return stale

    assert cache.card(workspace.slug, build_then_move)["active"]["seq"] == 1  # the racing reader itself
    cache.recent_cards.clear()
    assert cache.shared_card(workspace.slug) is None
    assert selectors.workspace_card(workspace.slug)["active"]["seq"] == 1  # rebuilt from the database


@pytest.mark.redis
def test_the_api_works_over_the_redis_cache(settings, api_client, operator, make_token):
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": django_settings.TEST_REDIS_URL,
        }
    }
    from django.core.cache import cache as redis_cache

    redis_cache.clear()
    make_demo_workspace()
    token = make_token(operator, "graphs:read", "graphs:guide")
    for _ in range(2):
        cache.clear_local()
        active = api_client.get("/api/v1/graphs/two-hop-qa/active", token=token)
        assert active.status_code == 200 and active.json()["seq"] == 1
        payload = {"steps": [{"action": "read"}], "mode": "raw_subgraph"}
        answer = api_client.post("/api/v1/graphs/two-hop-qa/guidance", payload, token=token).json()
        assert answer["node_id"] == "read"
    assert cache.shared_card("two-hop-qa")["active"]["seq"] == 1
    redis_cache.clear()
