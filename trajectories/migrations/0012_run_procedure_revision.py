"""Runs record the content revision of the procedure version they followed (issue 27): the canary watch attributes
a run to an arm by it, as it does by `graph_revision` for graphs. A database default as well (''), so writers that
name their columns need not know it; on PostgreSQL adding the column rewrites nothing."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("trajectories", "0011_totals_walk_index_postgresql_only"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="procedure_revision",
            field=models.CharField(blank=True, db_default="", default="", max_length=100),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["procedure_revision", "-id"], name="trajectories_run_procedure_rev"),
        ),
    ]
