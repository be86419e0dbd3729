import pytest

from llm.adapters.anthropic import AnthropicChatModel
from llm.core import ModelRequest, ScriptedChatModel
from llm.demo import DEMO_MODEL_ID, DEMO_REPLIES
from llm.factory import get_chat_model, get_recorded_chat_model
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
