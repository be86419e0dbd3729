from django.contrib import admin

from .models import ModelCall


@admin.register(ModelCall)
class ModelCallAdmin(admin.ModelAdmin):
    """Read-only: the ledger is written by llm.services only."""

    list_display = ("started_at", "role", "model_id", "status", "input_tokens", "output_tokens", "latency_ms", "cost")
    list_filter = ("status", "provider", "role")
    search_fields = ("model_id", "role", "subject_type", "subject_id", "request_digest")
    date_hierarchy = "started_at"

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
