"""Each framework page of docs/integrations/ runs as written: every ```python block (one per page, three on the
instrumentors page: OpenInference openai, openai-v2, OpenInference anthropic), each in a fresh interpreter, against
the stand-in provider (OPENAI_BASE_URL / ANTHROPIC_BASE_URL) and the live server (WAYMARK_URL, WAYMARK_TOKEN). The
run it sends must arrive whole."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from trajectories.models import Run

from .expect import TASK, call_cost
from .provider import Script, StandIn

pytestmark = pytest.mark.postgres

DOCS = Path(__file__).resolve().parents[3] / "docs" / "integrations"
UNPRICED = "gpt-4o-mini"  # not in the price table: the run says so rather than guessing a cost


@dataclass(frozen=True)
class Example:
    """The n-th python block of a page; `model` the one it asks for; `nested` the model spans folded into another
    (the Anthropic SDK's own span under OpenInference's), 0 when nothing nests."""

    page: str
    n: int = 0
    model: str = UNPRICED
    nested: int = 0

    def __str__(self) -> str:
        return f"{self.page}#{self.n}"


EXAMPLES = [
    Example("pydantic-ai.md"),
    Example("langgraph.md"),
    Example("openai-agents.md"),
    Example("strands-agents.md"),
    Example("instrumentors.md", 0),  # OpenInference, openai
    Example("instrumentors.md", 1),  # opentelemetry-instrumentation-openai-v2
    Example("instrumentors.md", 2, model="claude-haiku-4-5", nested=3),  # OpenInference, anthropic
]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def snippets(page: str) -> list[str]:
    return BLOCK.findall((DOCS / page).read_text())


def test_every_python_block_of_the_pages_is_run():
    """A block added to a page without an Example here would go untested: the list must name every one."""
    pages = sorted({example.page for example in EXAMPLES})
    assert sorted(str(e) for e in EXAMPLES) == sorted(f"{p}#{n}" for p in pages for n in range(len(snippets(p))))


@pytest.mark.parametrize("example", EXAMPLES, ids=str)
def test_the_page_example_sends_its_run(example, live_server, agent_token, tmp_path):
    code = tmp_path / "example.py"
    code.write_text(snippets(example.page)[example.n])
    calls = [("lookup_policy", {"topic": "refunds"}), ("issue_refund", {"order_id": "ORD-4101", "amount": 39.9})]
    script = Script(calls=calls, answer="Refunded.", model=example.model)
    with StandIn() as provider:
        provider.play(script)
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
    assert run.metadata["model"] == example.model
    assert run.total_tokens == sum(sum(script.usage(n)) for n in range(3))  # each call once
    assert run.metadata["otlp"].get("nested_model_spans", 0) == example.nested
    if example.model == UNPRICED:
        assert UNPRICED in run.metadata["otlp"]["inferred"]["cost"]  # not in the price table: said, not guessed
    else:
        assert round(run.cost, 6) == round(sum(call_cost(script, n) for n in range(3)), 6) > 0
