"""A local stand-in for the model providers: an HTTP server on 127.0.0.1 answering the OpenAI Chat Completions API
(plain and streamed), the OpenAI Responses API and the Anthropic Messages API with a scripted conversation.

The script is a list of tool calls and a closing answer. Each request is answered from what the conversation already
holds: with N tool results in it, the answer is the (N+1)-th tool call, or the closing text once every call has its
result. So any framework's agent loop drives the same run. Every answer reports its usage (`Script.usage(n)`), so a
test knows the tokens the run really spent. Never the network: the SDKs are pointed at `base_url`.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Script:
    calls: list[tuple[str, dict[str, Any]]]
    answer: str = "Done."
    model: str = "claude-haiku-4-5"
    input_tokens: int = 120  # the n-th answer (from 0) reports input_tokens + 10 * n, output_tokens + n
    output_tokens: int = 20
    fail_at: int | None = None  # this request (from 0) is answered 400, as a provider refusing the request does
    requests: list[dict[str, Any]] = field(default_factory=list)

    def usage(self, n: int) -> tuple[int, int]:
        return self.input_tokens + 10 * n, self.output_tokens + n

    def total(self, answers: int | None = None) -> tuple[int, int]:
        """Input and output tokens of the whole conversation (every tool call answered, then the closing text)."""
        count = len(self.calls) + 1 if answers is None else answers
        spent = [self.usage(n) for n in range(count)]
        return sum(i for i, _ in spent), sum(o for _, o in spent)


def _tool_results(path: str, body: dict[str, Any]) -> int:
    if path.endswith("/chat/completions"):
        return sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
    if path.endswith("/responses"):
        items = body.get("input")
        return (
            sum(1 for i in items if isinstance(i, dict) and i.get("type") == "function_call_output")
            if isinstance(items, list)
            else 0
        )
    count = 0
    for message in body.get("messages", []):
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, list):
            count += sum(1 for block in content if isinstance(block, dict) and block.get("type") == "tool_result")
    return count


class _Handler(BaseHTTPRequestHandler):
    server: StandIn
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # model lists, health checks: nothing here
        self._send(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        script = self.server.script
        script.requests.append({"path": self.path, "body": body})
        n = _tool_results(self.path, body)
        index = len(script.requests) - 1
        call = script.calls[n] if n < len(script.calls) else None
        usage = script.usage(index)
        if script.fail_at is not None and index >= script.fail_at:
            error = {"type": "invalid_request_error", "message": "stand-in: the request was refused"}
            return self._send(400, {"type": "error", "error": error})
        if self.path.endswith("/chat/completions"):
            if body.get("stream"):
                return self._stream(_chat_chunks(script, call, n, usage, body))
            return self._send(200, _chat(script, call, n, usage))
        if self.path.endswith("/responses"):
            return self._send(200, _response(script, call, n, usage))
        if self.path.endswith("/messages"):
            if body.get("stream"):
                return self._stream(_anthropic_events(script, call, n, usage), events=True)
            return self._send(200, _message(script, call, n, usage))
        return self._send(404, {"error": {"message": f"no route {self.path}"}})

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, chunks: list[Any], events: bool = False) -> None:
        lines = []
        for chunk in chunks:
            if events:
                lines.append(f"event: {chunk['type']}\ndata: {json.dumps(chunk)}\n\n")
            else:
                lines.append(f"data: {json.dumps(chunk) if chunk != '[DONE]' else chunk}\n\n")
        data = "".join(lines).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _chat(script: Script, call: Any, n: int, usage: tuple[int, int]) -> dict[str, Any]:
    if call is None:
        message: dict[str, Any] = {"role": "assistant", "content": script.answer}
        finish = "stop"
    else:
        tool, arguments = call
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": f"call_{n}", "type": "function", "function": {"name": tool, "arguments": json.dumps(arguments)}}
            ],
        }
        finish = "tool_calls"
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 1_790_000_000,
        "model": script.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }


def _chat_chunks(script: Script, call: Any, n: int, usage: tuple[int, int], body: dict[str, Any]) -> list[Any]:
    base = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": 1_790_000_000, "model": script.model}
    if call is None:
        deltas = [{"role": "assistant", "content": script.answer}]
        finish = "stop"
    else:
        tool, arguments = call
        deltas = [
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "index": 0,
                        "id": f"call_{n}",
                        "type": "function",
                        "function": {"name": tool, "arguments": json.dumps(arguments)},
                    }
                ],
            }
        ]
        finish = "tool_calls"
    chunks: list[Any] = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if (body.get("stream_options") or {}).get("include_usage"):
        chunks.append(
            {
                **base,
                "choices": [],
                "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
            }
        )
    chunks.append("[DONE]")
    return chunks


def _response(script: Script, call: Any, n: int, usage: tuple[int, int]) -> dict[str, Any]:
    if call is None:
        output = [
            {
                "type": "message",
                "id": f"msg_{n}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": script.answer, "annotations": []}],
            }
        ]
    else:
        tool, arguments = call
        output = [
            {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": f"call_{n}",
                "name": tool,
                "arguments": json.dumps(arguments),
                "status": "completed",
            }
        ]
    return {
        "id": f"resp_{n}",
        "object": "response",
        "created_at": 1_790_000_000,
        "status": "completed",
        "model": script.model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": usage[0],
            "output_tokens": usage[1],
            "total_tokens": sum(usage),
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def _message(script: Script, call: Any, n: int, usage: tuple[int, int]) -> dict[str, Any]:
    if call is None:
        content: list[dict[str, Any]] = [{"type": "text", "text": script.answer}]
        stop = "end_turn"
    else:
        tool, arguments = call
        content = [{"type": "tool_use", "id": f"toolu_{n}", "name": tool, "input": arguments}]
        stop = "tool_use"
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": script.model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage[0],
            "output_tokens": usage[1],
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        },
    }


def _anthropic_events(script: Script, call: Any, n: int, usage: tuple[int, int]) -> list[dict[str, Any]]:
    message = _message(script, call, n, usage)
    start = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 0}}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            events += [
                {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
                {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": block["text"]}},
            ]
        else:
            events += [
                {"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}},
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])},
                },
            ]
        events.append({"type": "content_block_stop", "index": index})
    events += [
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage[1]},
        },
        {"type": "message_stop"},
    ]
    return events


class StandIn(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script = Script(calls=[])
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> StandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()
        self.server_close()

    def play(self, script: Script) -> Script:
        self.script = script
        return script
