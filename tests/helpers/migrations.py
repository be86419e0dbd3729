"""Moving the test database through its migrations, for tests that prove a migration keeps every row."""

from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate(targets):
    """Migrate the test database to `targets` ([(app, migration name or None)]); the executor, its graph loaded."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor


def leaves():
    """Every app's newest migration."""
    return MigrationExecutor(connection).loader.graph.leaf_nodes()
