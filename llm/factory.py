"""Which model answers: Anthropic when ANTHROPIC_API_KEY is set, else the scripted demo model."""

from __future__ import annotations

from django.conf import settings

from llm.core import ChatModel

from .demo import demo_chat_model
from .recording import RecordedChatModel
from .services import Subject


def model_is_scripted() -> bool:
    return not settings.ANTHROPIC_API_KEY


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
