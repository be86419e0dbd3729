"""Thin Celery tasks of reviews: webhook deliveries (ids in; the service returns early when not due)."""

from celery import shared_task

from . import webhooks


@shared_task(name="reviews.deliver_webhook", ignore_result=True)
def deliver_webhook(delivery_id: int) -> None:
    webhooks.webhook_delivery_attempt(delivery_id=delivery_id)


@shared_task(name="reviews.deliver_due_webhooks", ignore_result=True)
def deliver_due_webhooks() -> int:
    """Celery beat, every minute: pending deliveries whose retry is due (recovers retries lost with a worker)."""
    due = webhooks.webhook_deliveries_due()
    for delivery_id in due:
        deliver_webhook.delay(delivery_id)
    return len(due)
