"""Webhook deliveries hold an attempt under the one lease mechanism (common.leases; issue 28, item 2).

Before, `next_attempt_at` was both when a delivery was due and, while an attempt ran, the end of its claim. It is
renamed `due_at` (the due time only) and the claim moves to the lease columns, with no row lost and no value dropped:
a pending delivery with an attempt not yet logged was claimed at `next_attempt_at` - 2 minutes (the claim window
then, WEBHOOK_CLAIM), so its lease runs out at `next_attempt_at` as its claim did and it is due from the claim's
start; every other delivery keeps its time as `due_at`, with no lease. Backwards, a lease's end becomes the row's
`next_attempt_at` again.
"""

from datetime import timedelta

import django.utils.timezone
from django.db import migrations, models
from django.db.models import Count, F

CLAIM = timedelta(minutes=2)  # reviews.webhooks.WEBHOOK_CLAIM when this migration was written


def claims_to_leases(apps, schema_editor):
    Delivery = apps.get_model("reviews", "WebhookDelivery")
    claimed = (
        Delivery.objects.filter(status="pending")
        .annotate(logged=Count("attempt_log"))
        .filter(attempts__gt=F("logged"))
        .values_list("pk", "next_attempt_at")
    )
    for pk, claim_ends in list(claimed):
        Delivery.objects.filter(pk=pk).update(lease_expires_at=claim_ends, next_attempt_at=claim_ends - CLAIM)


def leases_to_claims(apps, schema_editor):
    Delivery = apps.get_model("reviews", "WebhookDelivery")
    Delivery.objects.filter(status="pending", lease_expires_at__isnull=False).update(
        next_attempt_at=F("lease_expires_at")
    )


class Migration(migrations.Migration):
    dependencies = [
        ("reviews", "0006_rubrics_leave_for_their_app"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="webhookdelivery", name="reviews_web_status_067868_idx"),
        migrations.AddField(
            model_name="webhookdelivery",
            name="lease_owner",
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.AddField(
            model_name="webhookdelivery",
            name="lease_expires_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(claims_to_leases, leases_to_claims),
        migrations.RenameField(model_name="webhookdelivery", old_name="next_attempt_at", new_name="due_at"),
        migrations.AlterField(
            model_name="webhookdelivery",
            name="due_at",
            field=models.DateTimeField(
                default=django.utils.timezone.now, help_text="its creation, then each failed attempt's backoff"
            ),
        ),
        migrations.AddIndex(
            model_name="webhookdelivery",
            index=models.Index(fields=["status", "due_at"], name="reviews_delivery_due"),
        ),
    ]
