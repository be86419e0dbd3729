"""Read-only admin views of procedures: every write goes through procedures' services modules (audited)."""

from django.contrib import admin

from .models import Procedure, ProcedureVersion, ReplayRun


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Procedure)
class ProcedureAdmin(ReadOnlyAdmin):
    list_display = ("intent", "title", "active_version", "revision", "updated_at")
    search_fields = ("intent", "title")


@admin.register(ProcedureVersion)
class ProcedureVersionAdmin(ReadOnlyAdmin):
    list_display = ("procedure", "number", "status", "content_revision", "created_at")
    list_filter = ("status",)
    exclude = ("source_run_ids", "training_run_ids", "held_out_run_ids", "skipped_run_ids")


@admin.register(ReplayRun)
class ReplayRunAdmin(ReadOnlyAdmin):
    list_display = ("pk", "version", "mode", "status", "created_at", "finished_at")
    list_filter = ("mode", "status")
    exclude = ("held_out_run_ids",)
