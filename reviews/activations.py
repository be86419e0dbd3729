"""Reads of the activation history (reviews.models.Activation): what was active for a parent, from when, replacing
what, by which request. Written only by reviews.services, in the activation's transaction."""

from __future__ import annotations

from django.db.models import QuerySet

from .models import Activation


def rollback_target(kind: str, parent_key: str, active_id: str | None) -> str | None:
    """The version the active one replaced when it was last activated (None: nothing active, or it was never
    activated through a review — e.g. the first version a workspace was created with)."""
    if not active_id:
        return None
    latest = (
        Activation.objects.filter(kind=kind, parent_key=parent_key, version_id=str(active_id))
        .order_by("-activated_at", "-id")
        .values_list("replaced_id", flat=True)
        .first()
    )
    return latest or None


def history(kind: str, parent_key: str, *, limit: int = 50) -> QuerySet[Activation]:
    """The parent's activations, newest first, with their requests and who applied them (one query)."""
    return (
        Activation.objects.filter(kind=kind, parent_key=parent_key)
        .select_related("request", "activated_by")
        .order_by("-activated_at", "-id")[:limit]
    )


def activated_since(kind: str, parent_keys: list[str]) -> dict:
    """When each parent's current active version was last activated through a review (one query); parents never
    activated through one are left out."""
    found: dict = {}
    rows = (
        Activation.objects.filter(kind=kind, parent_key__in=parent_keys)
        .order_by("parent_key", "-activated_at", "-id")
        .values_list("parent_key", "activated_at")
    )
    for parent_key, activated_at in rows:
        found.setdefault(parent_key, activated_at)
    return found
