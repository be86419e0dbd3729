"""Thin Celery tasks of reviews: webhook deliveries (ids in; the service returns early when not due)."""

from celery import shared_task

from common.liveness import lease_owner

from . import webhooks


@shared_task(name="reviews.deliver_webhook", bind=True, ignore_result=True)
def deliver_webhook(self, delivery_id: int) -> None:
    webhooks.webhook_delivery_attempt(delivery_id=delivery_id, worker=lease_owner(self.request.id))


@shared_task(name="reviews.deliver_due_webhooks", ignore_result=True)
def deliver_due_webhooks() -> int:
    """Celery beat, every minute: pending deliveries due that no attempt holds (retries whose message was lost, and
    attempts whose worker died: their lease ran out)."""
    due = webhooks.webhook_deliveries_due()
    for delivery_id in due:
        deliver_webhook.delay(delivery_id)
    return len(due)
