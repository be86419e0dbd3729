"""Each framework page of docs/integrations/ runs as written: its one ```python block, in a fresh interpreter,
against the stand-in provider (OPENAI_BASE_URL / ANTHROPIC_BASE_URL) and the live server (WAYMARK_URL,
WAYMARK_TOKEN). The run it sends must arrive whole."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from trajectories.models import Run

from .expect import TASK
from .provider import Script, StandIn

pytestmark = pytest.mark.postgres

DOCS = Path(__file__).resolve().parents[3] / "docs" / "integrations"
PAGES = ["pydantic-ai.md", "langgraph.md", "openai-agents.md", "strands-agents.md", "instrumentors.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def snippet(page: str) -> str:
    blocks = BLOCK.findall((DOCS / page).read_text())
    assert len(blocks) == 1, f"{page} has {len(blocks)} python blocks; the test runs the one example"
    return blocks[0]


@pytest.mark.parametrize("page", PAGES)
def test_the_page_example_sends_its_run(page, live_server, agent_token, tmp_path):
    code = tmp_path / "example.py"
    code.write_text(snippet(page))
    calls = [("lookup_policy", {"topic": "refunds"}), ("issue_refund", {"order_id": "ORD-4101", "amount": 39.9})]
    with StandIn() as provider:
        provider.play(Script(calls=calls, answer="Refunded.", model="gpt-4o-mini"))
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("OTEL_", "OPENAI_", "ANTHROPIC_", "WAYMARK_"))
        }
        env |= {
            "WAYMARK_URL": live_server.url,
            "WAYMARK_TOKEN": agent_token,
            "OPENAI_BASE_URL": provider.url + "/v1",
            "OPENAI_API_KEY": "stand-in",
            "ANTHROPIC_BASE_URL": provider.url,
            "ANTHROPIC_API_KEY": "stand-in",
        }
        done = subprocess.run(
            [sys.executable, str(code)], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path
        )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Refunded." in done.stdout
    run = Run.objects.get()
    assert (run.source, run.task, run.outcome) == ("refund-agent", TASK, "success")
    steps = list(run.steps.order_by("ordinal"))
    assert [(s.tool, s.arguments) for s in steps] == calls
    assert all(s.ok and s.observation for s in steps)
    assert run.metadata["model"] == "gpt-4o-mini"
    assert run.total_tokens == sum(sum(Script(calls=[]).usage(n)) for n in range(3))
    assert "gpt-4o-mini" in run.metadata["otlp"]["inferred"]["cost"]  # not in the price table: said, not guessed
