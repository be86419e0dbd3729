"""Replies that are not answers, through the real SDK (HTTP mocked) and the ledger: each is a failed ModelCall with
its diagnostics and what came back (the tokens a cut reply spent are counted and priced), and is raised, never
returned as a reply (issue 25, item 4)."""

from decimal import Decimal

import pytest

from llm.core import ModelError, ModelReplyIncomplete, ModelReplyInvalid, ModelUnavailable
from llm.models import ModelCall
from llm.recording import RecordedChatModel

from .factories import a_request
from .stand_in import HTML_PAGE, NOT_ANSWERS, stand_in_model

pytestmark = pytest.mark.django_db


def recorded(kind):
    return RecordedChatModel(stand_in_model(kind), "guidance", subject=("graphs.workspace", 3))


@pytest.mark.parametrize("kind", sorted(NOT_ANSWERS))
def test_every_reply_that_is_not_an_answer_is_a_failed_call_with_its_diagnostics(kind):
    model = recorded(kind)
    with pytest.raises(ModelError) as raised:
        model.complete(a_request("guidance"))
    call = ModelCall.objects.get()
    assert call == model.last_call
    assert call.status == ModelCall.Status.FAILED
    assert call.error.startswith(type(raised.value).__name__ + ": ")
    assert call.diagnostics == raised.value.diagnostics
    assert call.diagnostics["kind"] in {kind, "http_error"}


def test_an_html_page_is_kept_whole_on_the_call_and_marked_transient():
    with pytest.raises(ModelReplyInvalid) as raised:
        recorded("html").complete(a_request("guidance"))
    assert isinstance(raised.value, ModelUnavailable)
    call = ModelCall.objects.get()
    assert call.response_text == HTML_PAGE
    assert call.diagnostics == {
        "kind": "html",
        "http_status": 200,
        "content_type": "text/html",
        "request_id": "req_html",
        "body_chars": len(HTML_PAGE),
    }
    assert (call.input_tokens, call.output_tokens) == (0, 0)


def test_a_reply_cut_at_max_tokens_keeps_its_text_and_its_spent_tokens():
    with pytest.raises(ModelReplyIncomplete):
        recorded("max_tokens").complete(a_request("guidance"))
    call = ModelCall.objects.get()
    assert call.status == ModelCall.Status.FAILED
    assert call.response_text.startswith('{"intents": [')
    assert call.stop_reason == "max_tokens"
    assert (call.input_tokens, call.output_tokens) == (12, 4096)
    assert call.cost == Decimal("0.061476")  # 12 × $3 + 4,096 × $15 per million: spent, so counted
    assert "cut at max_tokens (512)" in call.error
    assert call.diagnostics["max_tokens"] == 512


def test_a_provider_that_stays_rate_limited_is_recorded_with_its_attempts_and_retry_after():
    with pytest.raises(ModelUnavailable):
        recorded("rate_limited").complete(a_request("guidance"))
    call = ModelCall.objects.get()
    assert call.diagnostics == {
        "kind": "http_error",
        "http_status": 429,
        "error_type": "rate_limit_error",
        "request_id": "",
        "attempts": 2,
        "retry_after": 17,
    }
    assert call.response_text == ""


def test_the_calls_page_shows_a_failed_calls_diagnostics(viewer):
    from django.urls import reverse

    from tests.conftest import logged_in

    with pytest.raises(ModelReplyIncomplete):
        recorded("max_tokens").complete(a_request("guidance"))
    html = logged_in(viewer).get(reverse("llm:calls")).content.decode()
    assert "<strong>Diagnostics</strong>" in html
    assert "<dt>stop_reason</dt><dd><code>max_tokens</code></dd>" in html
    assert "ModelReplyIncomplete: claude-sonnet-4-6 sent a reply cut at max_tokens (512)" in html
