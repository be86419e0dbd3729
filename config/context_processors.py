from django.conf import settings
from django.http import HttpRequest


def waymark(request: HttpRequest) -> dict:
    """What every page needs: whether a real model is configured (pages say so when the scripted one answers)."""
    return {"model_is_scripted": not settings.ANTHROPIC_API_KEY}
