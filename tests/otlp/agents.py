"""Agents instrumented with the real OpenTelemetry SDK, for the OTLP ingest tests.

Each call runs a small support agent under its own TracerProvider and returns the finished spans (in the order they
ended, as a BatchSpanProcessor would see them) for a test to export in the batches and order it chooses.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

OTLP_PATH = "/api/v1/otlp/v1/traces"
TASK = "Refund order ORD-4101: the kettle arrived damaged."
PLAN = [
    ("lookup_policy", {"topic": "refunds"}, "Refunds within 30 days."),
    ("check_account", {"customer": "C-77"}, {"status": "active"}),
    ("issue_refund", {"order_id": "ORD-4101", "amount": 39.9}, "Refund of 39.90 EUR issued."),
]


def _tracer(service: str, extra_resource: dict[str, Any] | None = None):
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service, **(extra_resource or {})}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("waymark-tests"), exporter, provider


def genai_agent(
    *,
    service: str = "support-agent",
    failing_tool: str | None = None,
    root_status: StatusCode = StatusCode.OK,
    outcome: str | None = None,
    plan=PLAN,
    attributes: dict[str, Any] | None = None,
    resource: dict[str, Any] | None = None,
) -> list[ReadableSpan]:
    """invoke_agent → per tool: a chat span (tokens, cost) then an execute_tool span; ends with a closing chat.
    `attributes` are added to the agent span's, `resource` to the resource's."""
    tracer, exporter, provider = _tracer(service, {"deployment.environment": "test", **(resource or {})})
    messages = [{"role": "user", "parts": [{"type": "text", "content": TASK}]}]
    root_attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "support",
        "gen_ai.input.messages": json.dumps(messages),
        "waymark.intent": "refund_request",
        "app.build": "2026.12.1",
    }
    if outcome is not None:
        root_attributes["waymark.outcome"] = outcome
    root_attributes.update(attributes or {})
    with tracer.start_as_current_span("invoke_agent support", attributes=root_attributes) as root:
        for tool, arguments, result in plan:
            with tracer.start_as_current_span(
                "chat claude-sonnet-4-5",
                attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.usage.input_tokens": 800,
                    "gen_ai.usage.cache_read.input_tokens": 200,
                    "gen_ai.usage.output_tokens": 40,
                    "waymark.cost": 0.003,
                },
            ):
                pass
            with tracer.start_as_current_span(
                f"execute_tool {tool}",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": tool,
                    "gen_ai.tool.call.arguments": json.dumps(arguments),
                    "gen_ai.tool.call.result": result if isinstance(result, str) else json.dumps(result),
                },
            ) as span:
                if tool == failing_tool:
                    span.set_status(Status(StatusCode.ERROR, f"{tool} failed: upstream timeout"))
        with tracer.start_as_current_span(
            "chat claude-sonnet-4-5",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.usage.input_tokens": 100,
                "gen_ai.usage.output_tokens": 20,
            },
        ):
            pass
        if root_status is not StatusCode.UNSET:
            root.set_status(Status(root_status))
    provider.shutdown()
    return list(exporter.get_finished_spans())


def openinference_agent(*, service: str = "phoenix-agent") -> list[ReadableSpan]:
    """An OpenInference-shaped trace: AGENT → (LLM, TOOL) × 2."""
    tracer, exporter, provider = _tracer(service)
    with tracer.start_as_current_span(
        "agent", attributes={"openinference.span.kind": "AGENT", "input.value": "What is the status of ORD-7?"}
    ) as root:
        for tool, parameters, output in (
            ("lookup_order", {"order_id": "ORD-7"}, "shipped"),
            ("notify", {"channel": "email"}, "sent"),
        ):
            with tracer.start_as_current_span(
                "llm",
                attributes={
                    "openinference.span.kind": "LLM",
                    "llm.token_count.prompt": 500,
                    "llm.token_count.completion": 30,
                },
            ):
                pass
            with tracer.start_as_current_span(
                tool,
                attributes={
                    "openinference.span.kind": "TOOL",
                    "tool.name": tool,
                    # As the instrumentors emit it: the schema in tool.parameters, the call's arguments in input.value.
                    "tool.parameters": json.dumps({"type": "object", "properties": {k: {} for k in parameters}}),
                    "input.value": json.dumps(parameters),
                    "output.value": output,
                },
            ):
                pass
        root.set_status(Status(StatusCode.OK))
    provider.shutdown()
    return list(exporter.get_finished_spans())


def plain_http_trace() -> list[ReadableSpan]:
    """A trace with nothing an agent would emit (what a web framework's instrumentation sends)."""
    tracer, exporter, provider = _tracer("web")
    with tracer.start_as_current_span("GET /healthz", attributes={"http.request.method": "GET"}):
        pass
    provider.shutdown()
    return list(exporter.get_finished_spans())


def trace_hex(spans: list[ReadableSpan]) -> str:
    return format(spans[0].context.trace_id, "032x")


def protobuf_body(spans: list[ReadableSpan]) -> bytes:
    return encode_spans(spans).SerializeToString()


def _ids_to_hex(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            key: base64.b64decode(value).hex()
            if key in ("traceId", "spanId", "parentSpanId") and isinstance(value, str)
            else _ids_to_hex(value)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_ids_to_hex(item) for item in node]
    return node


def json_body(spans: list[ReadableSpan]) -> bytes:
    """The OTLP JSON encoding of the same request the exporter sends: protobuf JSON mapping, hex ids, integer enums."""
    document = json_format.MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    return json.dumps(_ids_to_hex(document)).encode()


def root_last_batches(spans: list[ReadableSpan]) -> list[list[ReadableSpan]]:
    """Several batches, out of order: the later half of the children first (reversed), then the earlier half
    (reversed), the root alone at the end."""
    *children, root = spans
    assert root.parent is None
    half = len(children) // 2
    return [list(reversed(children[half:])), list(reversed(children[:half])), [root]]
