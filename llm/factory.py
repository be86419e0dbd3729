"""Which model answers: Anthropic when ANTHROPIC_API_KEY is set, else the scripted demo model."""

from __future__ import annotations

from django.conf import settings

from common.demo_seeding import seeding_the_demo
from llm.core import ChatModel

from .demo import demo_chat_model
from .recording import RecordedChatModel
from .services import Subject


def model_is_scripted() -> bool:
    """No key, or the demo being seeded (common.demo_seeding.scripted_seeding)."""
    return not settings.ANTHROPIC_API_KEY or seeding_the_demo()


def get_chat_model() -> ChatModel:
    """The configured model (settings WAYMARK_ANTHROPIC_MODEL, WAYMARK_MODEL_TIMEOUT, WAYMARK_MODEL_RETRIES)."""
    if model_is_scripted():
        return demo_chat_model()
    from .adapters.anthropic import AnthropicChatModel

    return AnthropicChatModel(
        model_id=settings.WAYMARK_ANTHROPIC_MODEL,
        api_key=settings.ANTHROPIC_API_KEY,
        timeout=settings.WAYMARK_MODEL_TIMEOUT,
        max_retries=settings.WAYMARK_MODEL_RETRIES,
    )


def get_recorded_chat_model(role: str | None = None, *, subject: Subject = None) -> RecordedChatModel:
    """The configured model with every call recorded in the ModelCall ledger."""
    return RecordedChatModel(get_chat_model(), role, subject=subject)


def chat_model_from_spec(spec: str) -> ChatModel:
    """A model named on a command line: `anthropic:MODEL_ID` or `scripted:FILE` (JSON array of strings, or JSONL).

    ValueError ("unsupported model" for any other scheme) names what is wrong; nothing is called.
    """
    scheme, _, value = (spec or "").partition(":")
    value = value.strip()
    if scheme == "anthropic" and value:
        if not settings.ANTHROPIC_API_KEY:
            raise ValueError("anthropic models need ANTHROPIC_API_KEY to be set")
        from .adapters.anthropic import AnthropicChatModel

        return AnthropicChatModel(
            model_id=value,
            api_key=settings.ANTHROPIC_API_KEY,
            timeout=settings.WAYMARK_MODEL_TIMEOUT,
            max_retries=settings.WAYMARK_MODEL_RETRIES,
        )
    if scheme == "scripted" and value:
        from llm.core import ScriptedChatModel

        try:
            return ScriptedChatModel.from_file(value)
        except OSError as error:
            raise ValueError(f"cannot read the script {value}: {error.strerror or error}") from None
    raise ValueError(f"unsupported model {spec!r}: use anthropic:MODEL_ID or scripted:FILE")
