"""`{% open_novelty_alerts as n %}`: the number of open novelty alerts (one query), for the review queue page."""

from django import template

from intents.windows.selectors import open_alert_count

register = template.Library()


@register.simple_tag
def open_novelty_alerts() -> int:
    return open_alert_count()
