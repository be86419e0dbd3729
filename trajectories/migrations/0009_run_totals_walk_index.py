"""A covering index for the explorer's totals walk, and runs vacuumed after fewer inserts on PostgreSQL.

The totals of a filter the day rows cannot answer are those of the newest 1,000 matching runs, found by walking the
runs newest first (trajectories.selectors.run_totals). With every column such a filter or the totals read in the
index, PostgreSQL walks the index alone (an index-only scan: at a million runs, 2.4 ms instead of 7.7 for a score
range), as long as the visibility map marks the walked pages all-visible, which vacuum does. By default an
insert-only table is vacuumed after 20% new rows (200,000 at a million runs), so the newest runs, where the walk
starts, would mostly need the table itself; here after 1% (and 1,000 rows), which keeps the newest pages visible.
Building the index locks the runs table against writes for its duration (a few seconds at a million runs).
"""

from django.db import migrations, models


def _autovacuum(schema_editor, options: str) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE trajectories_run {options}")


def vacuum_sooner(apps, schema_editor) -> None:
    _autovacuum(schema_editor, "SET (autovacuum_vacuum_insert_scale_factor = 0.01)")


def vacuum_as_before(apps, schema_editor) -> None:
    _autovacuum(schema_editor, "RESET (autovacuum_vacuum_insert_scale_factor)")


class Migration(migrations.Migration):
    dependencies = [
        ("trajectories", "0008_run_total"),
    ]

    operations = [
        migrations.RunPython(vacuum_sooner, vacuum_as_before),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(
                fields=["id"],
                include=(
                    "source",
                    "intent",
                    "outcome",
                    "score",
                    "cost",
                    "step_count",
                    "duration_seconds",
                    "total_tokens",
                    "created_at",
                ),
                name="trajectories_run_totals_walk",
            ),
        ),
    ]
