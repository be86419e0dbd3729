"""A one-endpoint API guarded by the real bearer auth, for testing tokens before the app APIs exist."""

from django.urls import path
from ninja import NinjaAPI

from accounts.api_auth import scoped

api = NinjaAPI(urls_namespace="accounts-token-test")


@api.get("/whoami", auth=scoped("trajectories:read"))
def whoami(request):
    return {"username": request.user.username, "token": request.api_token.name}


@api.get("/queue", auth=scoped("reviews:judge"))
def queue(request):
    return {"ok": True}


urlpatterns = [path("api/", api.urls)]
