"""Compressed OTLP bodies that expand past the limit (issue 30): refused with 413 after inflating at most the limit
plus one byte, never the whole body."""

from __future__ import annotations

import tracemalloc
import zlib

import pytest
from django.conf import settings
from django.test import Client

from otlp.models import PendingSpan, Trace
from trajectories.models import Run

from .agents import OTLP_PATH

pytestmark = pytest.mark.django_db
EXPANDED = 256 * 2**20  # what the bomb inflates to: 50 times the default limit


def _bomb(wbits: int) -> bytes:
    """EXPANDED bytes of zeros, compressed (about a thousandth of it)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    zeros = bytes(2**20)
    return b"".join(packer.compress(zeros) for _ in range(EXPANDED // len(zeros))) + packer.flush()


@pytest.mark.parametrize(
    ("encoding", "wbits"), [("gzip", 16 + zlib.MAX_WBITS), ("deflate", zlib.MAX_WBITS), ("deflate", -zlib.MAX_WBITS)]
)
@pytest.mark.parametrize("content_type", ["application/x-protobuf", "application/json"])
def test_a_zip_bomb_answers_413_without_being_inflated_whole(make_agent_token, encoding, wbits, content_type):
    token = make_agent_token("trajectories:write")
    body = _bomb(wbits)
    assert len(body) < settings.WAYMARK_INGEST_MAX_BYTES  # small on the wire: only inflating shows its size
    client = Client()
    headers = {"Authorization": f"Bearer {token}", "Content-Encoding": encoding}
    warm = zlib.compressobj(9, zlib.DEFLATED, wbits)
    client.generic("POST", OTLP_PATH, warm.compress(b"{}") + warm.flush(), content_type=content_type, headers=headers)
    tracemalloc.start()
    try:
        response = client.generic("POST", OTLP_PATH, body, content_type=content_type, headers=headers)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.status_code == 413, response.content
    answer = response.json()
    assert answer["code"] == "payload_too_large"
    assert answer["details"] == {"max_bytes": settings.WAYMARK_INGEST_MAX_BYTES}
    assert peak < 3 * settings.WAYMARK_INGEST_MAX_BYTES, f"{peak / 2**20:.0f} MiB allocated"
    assert not (Run.objects.exists() or Trace.objects.exists() or PendingSpan.objects.exists())
