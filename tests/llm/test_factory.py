import pytest

from llm.adapters.anthropic import AnthropicChatModel
from llm.core import ModelRequest, ScriptedChatModel
from llm.demo import DEMO_MODEL_ID, DEMO_REPLIES
from llm.factory import chat_model_from_spec, get_chat_model, get_recorded_chat_model
from llm.models import ModelCall


def test_without_a_key_the_scripted_demo_model_answers(settings):
    settings.ANTHROPIC_API_KEY = ""
    model = get_chat_model()
    assert isinstance(model, ScriptedChatModel)
    assert model.model_id == DEMO_MODEL_ID


def test_with_a_key_the_anthropic_model_answers_with_the_configured_settings(settings):
    settings.ANTHROPIC_API_KEY = "sk-test-not-used"
    settings.WAYMARK_ANTHROPIC_MODEL = "claude-haiku-4-5"
    settings.WAYMARK_MODEL_TIMEOUT = 12.5
    settings.WAYMARK_MODEL_RETRIES = 4
    model = get_chat_model()
    assert isinstance(model, AnthropicChatModel)
    assert (model.model_id, model.timeout, model.max_retries) == ("claude-haiku-4-5", 12.5, 4)


@pytest.mark.parametrize("role", ["refiner", "guidance", "intents", "rubric", "assessments", "anything-else"])
def test_the_demo_model_never_runs_out(role, settings):
    settings.ANTHROPIC_API_KEY = ""
    model = get_chat_model()
    request = ModelRequest(role=role, system="", parts=("q",), max_tokens=10)
    replies = {model.complete(request).text for _ in range(3)}
    assert replies <= set(DEMO_REPLIES.get(role, DEMO_REPLIES["*"]))


@pytest.mark.django_db
def test_the_recorded_model_writes_the_ledger(settings):
    settings.ANTHROPIC_API_KEY = ""
    get_recorded_chat_model("guidance").complete(ModelRequest(role="guidance", system="", parts=("q",), max_tokens=9))
    call = ModelCall.objects.get()
    assert (call.role, call.model_id, call.provider, call.status) == (
        "guidance",
        DEMO_MODEL_ID,
        "scripted",
        "succeeded",
    )


def test_a_scripted_spec_reads_its_file(tmp_path):
    path = tmp_path / "replies.jsonl"
    path.write_text('"first"\n"second"\n')
    model = chat_model_from_spec(f"scripted:{path}")
    request = ModelRequest(role="refiner", system="", parts=("q",), max_tokens=9)
    assert [model.complete(request).text for _ in range(2)] == ["first", "second"]


def test_an_anthropic_spec_names_its_model(settings):
    settings.ANTHROPIC_API_KEY = "sk-test-not-used"
    model = chat_model_from_spec("anthropic:claude-opus-4-6")
    assert isinstance(model, AnthropicChatModel)
    assert model.model_id == "claude-opus-4-6"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("openai:gpt-4o", "unsupported model"),
        ("anthropic:", "unsupported model"),
        ("", "unsupported model"),
        ("claude-opus-4-6", "unsupported model"),
        ("scripted:/nonexistent/replies.json", "cannot read the script"),
    ],
)
def test_a_bad_spec_is_a_clear_value_error(spec, message, settings):
    settings.ANTHROPIC_API_KEY = "sk-test-not-used"
    with pytest.raises(ValueError, match=message):
        chat_model_from_spec(spec)


def test_an_anthropic_spec_needs_a_key(settings):
    settings.ANTHROPIC_API_KEY = ""
    with pytest.raises(ValueError, match="ANTHROPIC_API_KEY"):
        chat_model_from_spec("anthropic:claude-opus-4-6")


def test_the_anthropic_model_sends_its_calls_to_anthropic_base_url(settings, monkeypatch):
    """ANTHROPIC_BASE_URL (a proxy, a gateway, a local stand-in for the provider) is honoured through the SDK: the
    configured model posts to it. The HTTP layer is replaced; nothing leaves the process."""
    import httpx2

    from tests.llm.stand_in import message

    settings.ANTHROPIC_API_KEY = "sk-test"
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://provider-stand-in.test:8089/anthropic")
    seen = []

    def handle_request(transport, request):
        seen.append(request)
        return httpx2.Response(200, json=message("from the stand-in"))

    monkeypatch.setattr(httpx2.HTTPTransport, "handle_request", handle_request)
    reply = get_chat_model().complete(ModelRequest(role="guidance", system="", parts=("q",), max_tokens=9))
    assert reply.text == "from the stand-in"
    assert [str(request.url) for request in seen] == ["http://provider-stand-in.test:8089/anthropic/v1/messages"]
    assert seen[0].headers["authorization"] == "Bearer sk-test"
