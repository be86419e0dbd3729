"""The dashboard's reads: a fixed number of queries whatever the data size."""

from accounts.models import AuditEvent


def dashboard_context() -> dict:
    return {
        "counts": {},
        "recent_events": list(AuditEvent.objects.select_related("actor_user", "actor_token")[:10]),
    }
