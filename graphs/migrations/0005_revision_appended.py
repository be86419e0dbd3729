"""A rejection-memory revision may hold only the entries it appends to its parent's memory (issue 29): `appended`,
with `document` null. Existing revisions keep their whole documents (nothing is rewritten). Going back, each such
revision gets its whole document first, so removing the column loses nothing."""

from django.db import migrations, models


def whole_documents(apps, schema_editor):
    """Reverse: the whole document of every revision stored as what it appends (its parent's, with its entries)."""
    Revision = apps.get_model("graphs", "Revision")
    chains = Revision.objects.filter(appended__isnull=False).values_list("workspace_id", flat=True).distinct()
    for workspace_id in chains:
        whole = None
        for row in Revision.objects.filter(workspace_id=workspace_id, kind="rejections").order_by("seq"):
            if row.document is not None:
                whole = row.document
                continue
            appended = row.appended
            whole = {**whole, "entries": [*whole["entries"], *appended["entries"]]}
            whole.update(iteration=appended["iteration"], schema=appended["schema"])
            Revision.objects.filter(pk=row.pk).update(document=whole, appended=None)


class Migration(migrations.Migration):
    dependencies = [
        ("graphs", "0004_workspace_canary"),
    ]

    operations = [
        migrations.AddField(
            model_name="revision",
            name="appended",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="revision",
            name="document",
            field=models.JSONField(null=True),
        ),
        migrations.RunPython(migrations.RunPython.noop, whole_documents),
        migrations.AddConstraint(
            model_name="revision",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("appended__isnull", True), ("document__isnull", False)),
                    models.Q(("appended__isnull", False), ("document__isnull", True), ("kind", "rejections")),
                    _connector="OR",
                ),
                name="graphs_revision_document_or_appended",
            ),
        ),
    ]
