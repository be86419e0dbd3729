"""The OTLP path's shortcut through the ingest schema (trajectories.normal_form) stores exactly what the full
validation stores: each framework's real trace (a run that succeeds, and one whose tool raises), mapped once, is
written through the shortcut and then, as the JSON ingest would take it, through the schema; the run and step rows
are the same, column by column."""

from __future__ import annotations

from typing import Any

import pytest
from django.forms.models import model_to_dict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from accounts.services import Actor
from otlp.core.mapping import map_trace
from otlp.core.spans import span_records
from otlp.services import model_price
from trajectories.models import Run
from trajectories.normal_form import normal_runs
from trajectories.schemas import RunIn
from trajectories.services import run_ingest_batch

from . import refund_agents
from .conftest import PROVIDER, RECORDER, _in_a_thread
from .expect import LOOKUP, REFUND, TASK, TOO_MUCH
from .provider import Script

pytestmark = pytest.mark.postgres

SCRIPTS = {
    "succeeds": Script(calls=[LOOKUP, REFUND], answer="Refunded."),
    "tool raises": Script(calls=[LOOKUP, TOO_MUCH]),
}


@pytest.fixture(scope="module")
def agents(stand_in, tracer_provider) -> dict[str, Any]:
    return {
        "pydantic-ai": refund_agents.pydantic_ai(stand_in.url, tracer_provider),
        "langgraph": refund_agents.langgraph(stand_in.url, tracer_provider)[0],
        "openai-agents": refund_agents.openai_agents(stand_in.url, tracer_provider)[0],
        "strands-agents": refund_agents.strands(stand_in.url),
    }


def traced(agent, stand_in, script: Script) -> list:
    RECORDER.take()
    stand_in.play(script)
    RECORDER.recording = True
    try:
        _in_a_thread(lambda: agent(TASK))
    except RuntimeError:  # the tool's error ends the run in some frameworks; others hand it to the model
        pass
    finally:
        PROVIDER.force_flush()
        RECORDER.recording = False
    spans = RECORDER.take()
    assert spans
    return spans


def rows(run_id: int) -> tuple[dict, list[dict]]:
    run = Run.objects.get(pk=run_id)
    stored = model_to_dict(run, exclude=["id", "created_at"])
    steps = [model_to_dict(step, exclude=["id", "run"]) for step in run.steps.order_by("ordinal")]
    return stored, steps


@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.parametrize("framework", ["pydantic-ai", "langgraph", "openai-agents", "strands-agents"])
def test_a_framework_run_is_stored_alike_through_the_shortcut_and_through_the_schema(
    framework, script, agents, stand_in, transactional_db
):
    spans = traced(agents[framework], stand_in, SCRIPTS[script])
    item = map_trace(span_records(encode_spans(spans)).spans, price=model_price).run

    shortcut = normal_runs([item])
    assert isinstance(shortcut[0], RunIn), "the mapped run is in normal form"
    through_shortcut = rows(run_ingest_batch(actor=Actor.system(), items=shortcut).created_ids[0])
    Run.objects.all().delete()
    through_schema = rows(run_ingest_batch(actor=Actor.system(), items=[item]).created_ids[0])

    assert through_shortcut == through_schema
    assert through_schema[1], "the run has steps"
