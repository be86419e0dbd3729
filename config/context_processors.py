from django.conf import settings
from django.http import HttpRequest

from .navigation import main_nav


def waymark(request: HttpRequest) -> dict:
    """What every page needs: whether a real model is configured (pages say so when the scripted one answers), and for
    a logged-in user the main navigation's links (config.navigation)."""
    user = getattr(request, "user", None)
    nav = main_nav(request.path, administers=user.may_administer) if user is not None and user.is_authenticated else ""
    return {"model_is_scripted": not settings.ANTHROPIC_API_KEY, "main_nav": nav}
