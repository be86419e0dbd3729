"""Template tags of the reviewed intent taxonomy, for pages of other apps (the review queue's card)."""

from django import template

from intents.taxonomy.selectors import awaiting_count

register = template.Library()


@register.simple_tag(takes_context=True)
def intent_candidates_awaiting(context) -> int:
    """How many intent candidates wait for the current user's judgment (one query; 0 for non-reviewers)."""
    request = context.get("request")
    return awaiting_count(getattr(request, "user", None))
