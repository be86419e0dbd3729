"""The totals walk's covering index (0009) is PostgreSQL's alone: it leaves the model's declared indexes.

SQLite builds no covering index. Declared on the model, the index was a second plain index on the primary key there
(its INCLUDE columns dropped), and Django's system checks warned about it (models.W040) on every management command
of the embedded default, once per index of the model. Its place is now beside the other PostgreSQL-only indexes of
the runs (0004): here the model state forgets it; on PostgreSQL the index 0009 built stays as it is, and on SQLite
the redundant copy of the primary key index is dropped (docs/decisions.md).
"""

from django.db import migrations

INDEX = "trajectories_run_totals_walk"


def drop_the_sqlite_copy(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX}")


def make_the_sqlite_copy(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {INDEX} ON trajectories_run (id)")


class Migration(migrations.Migration):
    dependencies = [
        ("trajectories", "0010_step_run_index_covered_by_unique"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.RemoveIndex(model_name="run", name=INDEX)],
            database_operations=[migrations.RunPython(drop_the_sqlite_copy, make_the_sqlite_copy)],
        ),
    ]
