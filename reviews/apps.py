from django.apps import AppConfig


class ReviewsConfig(AppConfig):
    name = "reviews"

    def ready(self) -> None:
        from django.db.models import Q

        from accounts.services import system_audit_record
        from common.leases import register_lease_takeover

        from . import audit_blinding
        from .choices import DeliveryStatus
        from .models import WebhookDelivery
        from .webhooks import webhook_deliveries_take_over

        audit_blinding.register()  # judgments in the audit log are sealed until the request closes
        # A webhook attempt whose worker process died is tried again now, not when its lease runs out (common.leases).
        register_lease_takeover(
            WebhookDelivery,
            running=Q(status=DeliveryStatus.PENDING),
            take_over=webhook_deliveries_take_over,
            audit=system_audit_record,
        )
