"""Filters for showing an audit event's before/after compactly."""

import json

from django import template

register = template.Library()


@register.filter
def as_json(value) -> str:
    """Indented JSON with sorted keys (for the <details> body)."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


@register.filter
def json_summary(value, limit: int = 80) -> str:
    """One line of JSON, cut to `limit` characters (for the <summary>)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 1] + "…"
