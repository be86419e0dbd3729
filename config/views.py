"""Pages that belong to no single app: the dashboard and the health check."""

from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from . import dashboard as dashboard_selectors
from .celery import app as celery_app


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    return render(request, "dashboard.html", dashboard_selectors.dashboard_context(request.user))


def healthz(request: HttpRequest) -> JsonResponse:
    """Database and broker reachability; 503 when either is down (load balancers read the status)."""
    checks: dict[str, dict] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = {"ok": True, "vendor": connection.vendor}
    except Exception as exc:
        checks["database"] = {"ok": False, "error": type(exc).__name__}
    try:
        with celery_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
            checks["broker"] = {
                "ok": True,
                "transport": conn.transport_cls if isinstance(conn.transport_cls, str) else "custom",
            }
    except Exception as exc:
        checks["broker"] = {"ok": False, "error": type(exc).__name__}
    try:
        cache.set("healthz", "1", 5)
        checks["cache"] = {"ok": cache.get("healthz") == "1"}
    except Exception as exc:
        checks["cache"] = {"ok": False, "error": type(exc).__name__}
    ok = all(check["ok"] for check in checks.values())
    return JsonResponse({"status": "ok" if ok else "degraded", "checks": checks}, status=200 if ok else 503)
