"""The health check: /healthz, for load balancers and operators."""

from django.core.cache import cache
from django.db import connection
from django.http import HttpRequest, JsonResponse

from .celery import app as celery_app
from .health_start import is_starting
from .heartbeat import worker_state


def healthz(request: HttpRequest) -> JsonResponse:
    """Database, broker and cache reachability, and the worker heartbeat's age. No secrets: names and states only.

    503 when the database, the broker or the cache is down: this web process cannot do its work, so a load balancer
    should take it out of rotation. A stale or unknown worker heartbeat answers 200 with status "degraded": pages and
    the ingest API still work (tasks wait in the queue), and restarting web processes would not bring a worker back;
    alert on the worker check instead. Just after the web process started, before a worker stamped a heartbeat, the
    status is "starting" (config.health_start), not "degraded".
    """
    checks: dict[str, dict] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = {"ok": True, "state": "ok", "vendor": connection.vendor}
    except Exception as exc:
        checks["database"] = {"ok": False, "state": "error", "error": type(exc).__name__}
    try:
        with celery_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
            checks["broker"] = {
                "ok": True,
                "state": "ok",
                "transport": conn.transport_cls if isinstance(conn.transport_cls, str) else "custom",
            }
    except Exception as exc:
        checks["broker"] = {"ok": False, "state": "error", "error": type(exc).__name__}
    try:
        cache.set("healthz", "1", 5)
        cache_ok = cache.get("healthz") == "1"
        checks["cache"] = {"ok": cache_ok, "state": "ok" if cache_ok else "error"}
    except Exception as exc:
        checks["cache"] = {"ok": False, "state": "error", "error": type(exc).__name__}
    try:
        checks["worker"] = worker_state()
    except Exception as exc:
        checks["worker"] = {"ok": False, "state": "unknown", "age_seconds": None, "error": type(exc).__name__}
    serving = all(checks[name]["ok"] for name in ("database", "broker", "cache"))
    if not serving:
        status = "down"
    elif checks["worker"]["ok"]:
        status = "ok"
    elif is_starting(checks["worker"]):
        status = "starting"
    else:
        status = "degraded"
    return JsonResponse({"status": status, "checks": checks}, status=200 if serving else 503)
