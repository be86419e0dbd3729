"""A stand-in for the Anthropic Messages API behind the real SDK client (httpx2.MockTransport): never the network.

Callers' tests (guidance, evolution, intents, rubrics) drive the real AnthropicChatModel with the replies below.
"""

from __future__ import annotations

import anthropic
import httpx2

from llm.adapters.anthropic import AnthropicChatModel

MODEL = "claude-sonnet-4-6"
HTML_PAGE = "<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1></body></html>"


def message(text="Hello there", *, stop_reason="end_turn", content=None, output_tokens=5):
    return {
        "id": "msg_01abc",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": text}] if content is None else content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": output_tokens},
    }


def html_page() -> httpx2.Response:
    return httpx2.Response(200, text=HTML_PAGE, headers={"content-type": "text/html", "request-id": "req_html"})


def malformed_json() -> httpx2.Response:
    return httpx2.Response(200, text='{"id": "msg_1", "content": [', headers={"content-type": "application/json"})


def not_a_message() -> httpx2.Response:
    return httpx2.Response(200, json={"hello": "world"})


def empty_content() -> httpx2.Response:
    return httpx2.Response(200, json=message(content=[]))


def cut_at_max_tokens(text='{"intents": [{"trajectory_id": "demo:1", "inte') -> httpx2.Response:
    return httpx2.Response(200, json=message(text, stop_reason="max_tokens", output_tokens=4096))


def overloaded() -> httpx2.Response:
    return _error(529, "overloaded_error", "Overloaded")


def rate_limited(retry_after: int = 17) -> httpx2.Response:
    return _error(429, "rate_limit_error", "rate limited", **{"retry-after": str(retry_after)})


def _error(status: int, kind: str, text: str, **headers: str) -> httpx2.Response:
    body = {"type": "error", "error": {"type": kind, "message": text}}
    return httpx2.Response(status, json=body, headers={"retry-after-ms": "1", **headers})  # short SDK backoff


# Each kind of reply that is not an answer, as one response (the sustained errors repeat it on every attempt).
NOT_ANSWERS = {
    "html": html_page,
    "not_json": malformed_json,
    "not_a_message": not_a_message,
    "empty": empty_content,
    "max_tokens": cut_at_max_tokens,
    "overloaded": overloaded,
    "rate_limited": rate_limited,
}


class StandIn:
    """Answers POST /v1/messages with `answer()` every time (a factory of httpx2 responses), counting requests."""

    def __init__(self, answer) -> None:
        self.answer = answer
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        return self.answer()

    def model(self, max_retries: int = 1) -> AnthropicChatModel:
        client = anthropic.Anthropic(api_key="sk-test", http_client=httpx2.Client(transport=httpx2.MockTransport(self)))
        return AnthropicChatModel(MODEL, "sk-test", timeout=5.0, max_retries=max_retries, client=client)


def stand_in_model(kind: str, max_retries: int = 1) -> AnthropicChatModel:
    return StandIn(NOT_ANSWERS[kind]).model(max_retries)
