"""AnthropicChatModel driven through the real anthropic SDK; only its HTTP transport is replaced. No network."""

import json

import anthropic
import httpx2
import pytest

from llm.adapters.anthropic import AnthropicChatModel
from llm.core import (
    ModelReplyIncomplete,
    ModelReplyInvalid,
    ModelRequest,
    ModelRequestRejected,
    ModelTimeout,
    ModelUnavailable,
)

MODEL = "claude-sonnet-4-6"


def message_body(text="Hello there", **usage):
    return {
        "id": "msg_01abc",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 5, **usage},
    }


def error_body(status, kind, message, **headers):
    return httpx2.Response(
        status,
        json={"type": "error", "error": {"type": kind, "message": message}},
        headers={"retry-after-ms": "1", **headers},  # keep the SDK's backoff short in tests
    )


class FakeMessagesApi:
    """Answers POST /v1/messages from a list of responses (or exceptions) and keeps every request it saw."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def model(self, max_retries=2, timeout=5.0) -> AnthropicChatModel:
        client = anthropic.Anthropic(api_key="sk-test", http_client=httpx2.Client(transport=httpx2.MockTransport(self)))
        return AnthropicChatModel(MODEL, "sk-test", timeout=timeout, max_retries=max_retries, client=client)

    def sent(self, index=0) -> dict:
        return json.loads(self.requests[index].content)


def ask(model, *parts, system="You mine procedures.", max_tokens=256):
    return model.complete(ModelRequest(role="refiner", system=system, parts=parts or ("hi",), max_tokens=max_tokens))


def test_it_sends_one_user_message_with_the_text_parts_and_no_tools():
    api = FakeMessagesApi(httpx2.Response(200, json=message_body()))
    ask(api.model(), "part one", "   ", "part two", max_tokens=300)
    request = api.requests[0]
    assert request.method == "POST"
    assert request.url.path == "/v1/messages"
    body = api.sent()
    assert body["model"] == MODEL
    assert body["max_tokens"] == 300
    assert body["system"] == "You mine procedures."
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "text", "text": "part two"}]}
    ]
    assert "tools" not in body
    assert "temperature" not in body  # API version 2026-10-21 rejects sampling parameters


def test_it_leaves_out_a_blank_system_text():
    api = FakeMessagesApi(httpx2.Response(200, json=message_body()))
    ask(api.model(), system="  ")
    assert "system" not in api.sent()


def test_it_returns_the_text_and_usage():
    api = FakeMessagesApi(
        httpx2.Response(
            200,
            json={
                **message_body(cache_read_input_tokens=40, cache_creation_input_tokens=3),
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "text", "text": "Hello "},
                    {"type": "text", "text": "world"},
                ],
            },
        )
    )
    response = ask(api.model())
    assert response.text == "Hello world"
    assert response.model == MODEL
    assert response.stop_reason == "end_turn"
    assert response.response_id == "msg_01abc"
    assert (response.usage.input_tokens, response.usage.cached_input_tokens, response.usage.output_tokens) == (
        15,
        40,
        5,
    )


@pytest.mark.parametrize(("status", "kind"), [(529, "overloaded_error"), (500, "api_error"), (429, "rate_limit_error")])
def test_it_retries_a_transient_failure_and_then_succeeds(status, kind):
    api = FakeMessagesApi(error_body(status, kind, "busy"), httpx2.Response(200, json=message_body("after retry")))
    assert ask(api.model(max_retries=2)).text == "after retry"
    assert len(api.requests) == 2


def test_it_gives_up_after_the_allowed_retries_with_a_transient_error():
    api = FakeMessagesApi(*[error_body(529, "overloaded_error", "Overloaded") for _ in range(3)])
    with pytest.raises(ModelUnavailable, match=r"HTTP 529: Overloaded \(after 2 retries\)") as raised:
        ask(api.model(max_retries=2))
    assert len(api.requests) == 3
    assert isinstance(raised.value, ConnectionError)  # transient for Celery's retry policy


def test_it_does_not_retry_a_bad_request():
    api = FakeMessagesApi(
        error_body(400, "invalid_request_error", "max_tokens: too large"), httpx2.Response(200, json=message_body())
    )
    with pytest.raises(ModelRequestRejected, match="HTTP 400: max_tokens: too large"):
        ask(api.model(max_retries=3))
    assert len(api.requests) == 1


def test_a_timeout_surfaces_as_a_model_timeout():
    api = FakeMessagesApi(httpx2.ReadTimeout("read timed out"))
    with pytest.raises(ModelTimeout, match=r"did not answer within 7s \(after 0 retries\)") as raised:
        ask(api.model(max_retries=0, timeout=7))
    assert isinstance(raised.value, TimeoutError)


def test_a_timeout_is_retried_like_any_transient_failure():
    api = FakeMessagesApi(httpx2.ConnectTimeout("connect timed out"), httpx2.Response(200, json=message_body("ok")))
    assert ask(api.model(max_retries=1)).text == "ok"


def test_an_unreachable_provider_surfaces_as_unavailable():
    api = FakeMessagesApi(httpx2.ConnectError("connection refused"))
    with pytest.raises(ModelUnavailable, match="could not be reached"):
        ask(api.model(max_retries=0))


def test_it_needs_a_model_id_and_a_key():
    with pytest.raises(ValueError, match="model id"):
        AnthropicChatModel("", "sk-test")
    with pytest.raises(ValueError, match="API key"):
        AnthropicChatModel(MODEL, "")


# -- replies that are not answers (issue 25, item 4) ------------------------------------------------------------------


def test_an_html_page_answered_with_200_is_an_invalid_reply_with_its_diagnostics():
    page = "<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1></body></html>"
    api = FakeMessagesApi(httpx2.Response(200, text=page, headers={"content-type": "text/html", "request-id": "req_7"}))
    with pytest.raises(ModelReplyInvalid, match=r"answered HTTP 200 with text/html, not a Messages reply") as raised:
        ask(api.model())
    error = raised.value
    assert isinstance(error, ModelUnavailable) and isinstance(error, ConnectionError)  # transient, like a 502
    assert error.diagnostics == {
        "kind": "html",
        "http_status": 200,
        "content_type": "text/html",
        "request_id": "req_7",
        "body_chars": len(page),
    }
    assert error.partial.text == page  # what came back is kept for the ledger, never parsed as an answer
    assert len(api.requests) == 1


def test_malformed_json_is_an_invalid_reply_naming_the_parse_error():
    api = FakeMessagesApi(
        httpx2.Response(200, text='{"id": "msg_1", "content": [', headers={"content-type": "application/json"})
    )
    with pytest.raises(ModelReplyInvalid, match="not valid JSON") as raised:
        ask(api.model())
    assert raised.value.diagnostics["kind"] == "not_json"
    assert raised.value.diagnostics["detail"].startswith("Expecting value")
    assert raised.value.partial.text == '{"id": "msg_1", "content": ['


@pytest.mark.parametrize(
    "body",
    [
        {"hello": "world"},
        [1, 2, 3],
        {"type": "message", "id": "msg_1", "content": "not a list", "usage": {"input_tokens": 1, "output_tokens": 1}},
        {"type": "error", "error": {"type": "api_error", "message": "odd"}},
    ],
)
def test_json_that_is_not_a_messages_response_is_an_invalid_reply(body):
    api = FakeMessagesApi(httpx2.Response(200, json=body))
    with pytest.raises(ModelReplyInvalid, match="not a Messages reply") as raised:
        ask(api.model())
    assert raised.value.diagnostics["kind"] == "not_a_message"
    assert json.loads(raised.value.partial.text) == body


def test_an_empty_content_list_is_an_incomplete_reply_with_its_usage():
    api = FakeMessagesApi(httpx2.Response(200, json={**message_body(), "content": []}))
    with pytest.raises(ModelReplyIncomplete, match="no text") as raised:
        ask(api.model())
    error = raised.value
    assert not isinstance(error, ConnectionError)  # not transient: the same question tends to get the same
    assert error.diagnostics == {"kind": "empty", "stop_reason": "end_turn", "max_tokens": 256, "output_tokens": 5}
    assert error.partial.text == ""
    assert (error.partial.usage.input_tokens, error.partial.usage.output_tokens) == (12, 5)
    assert error.partial.response_id == "msg_01abc"


def test_a_reply_of_blank_text_or_thinking_only_is_an_incomplete_reply():
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    for content in ([{"type": "text", "text": "  \n"}], [thinking]):
        api = FakeMessagesApi(httpx2.Response(200, json={**message_body(), "content": content}))
        with pytest.raises(ModelReplyIncomplete) as raised:
            ask(api.model())
        assert raised.value.diagnostics["kind"] == "empty"


def test_a_reply_cut_at_max_tokens_is_incomplete_never_an_answer():
    body = {**message_body('{"add_nodes": [{"id": "check_poli'), "stop_reason": "max_tokens"}
    api = FakeMessagesApi(httpx2.Response(200, json=body))
    with pytest.raises(ModelReplyIncomplete, match=r"cut at max_tokens \(256\)") as raised:
        ask(api.model(), max_tokens=256)
    error = raised.value
    assert error.diagnostics == {
        "kind": "max_tokens",
        "stop_reason": "max_tokens",
        "max_tokens": 256,
        "output_tokens": 5,
    }
    assert error.partial.text == '{"add_nodes": [{"id": "check_poli'
    assert error.partial.stop_reason == "max_tokens"


@pytest.mark.parametrize("stop_reason", ["refusal", "model_context_window_exceeded"])
def test_other_stop_reasons_short_of_an_answer_are_incomplete(stop_reason):
    api = FakeMessagesApi(httpx2.Response(200, json={**message_body("I can"), "stop_reason": stop_reason}))
    with pytest.raises(ModelReplyIncomplete, match=stop_reason) as raised:
        ask(api.model())
    assert raised.value.diagnostics["kind"] == stop_reason


def test_a_reply_ended_by_a_stop_sequence_is_an_answer():
    api = FakeMessagesApi(httpx2.Response(200, json={**message_body("done"), "stop_reason": "stop_sequence"}))
    assert ask(api.model()).text == "done"


def test_529_overloaded_past_the_retries_is_unavailable_with_its_diagnostics():
    api = FakeMessagesApi(
        *[error_body(529, "overloaded_error", "Overloaded", **{"request-id": f"req_{n}"}) for n in range(3)]
    )
    with pytest.raises(ModelUnavailable, match=r"HTTP 529: Overloaded \(after 2 retries\)") as raised:
        ask(api.model(max_retries=2))
    assert len(api.requests) == 3
    assert raised.value.diagnostics == {
        "kind": "http_error",
        "http_status": 529,
        "error_type": "overloaded_error",
        "request_id": "req_2",
        "attempts": 3,
    }


def test_sustained_429s_are_unavailable_with_the_providers_retry_after():
    limited = [error_body(429, "rate_limit_error", "rate limited", **{"retry-after": "17"}) for _ in range(4)]
    api = FakeMessagesApi(*limited)
    with pytest.raises(ModelUnavailable, match=r"HTTP 429: rate limited \(after 3 retries\)") as raised:
        ask(api.model(max_retries=3))
    assert len(api.requests) == 4  # the SDK retried, each time after retry-after-ms
    assert raised.value.diagnostics["http_status"] == 429
    assert raised.value.diagnostics["retry_after"] == 17
    assert raised.value.diagnostics["attempts"] == 4
