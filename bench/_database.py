"""The throwaway PostgreSQL databases the benchmarks run on: one helper instead of a copy in every script.

Each bench names its own database on the server `DATABASE_URL` points at (default 127.0.0.1:5432) and never
touches another. `django_on(name)` is what an in-process bench needs: the database created if missing, Django
set up on it with the test settings and migrated (afresh if a migration changed under it). Benches that run the
stack as subprocesses take `urls(name)` and `create(name, fresh=True)` and migrate through `manage.py`.
Not a bench itself: `make bench` runs `bench/*.py` but the names starting with "_".
"""

from __future__ import annotations

import os
import sys
from urllib.parse import urlsplit, urlunsplit

SERVER_DEFAULT = "postgres://postgres@127.0.0.1:5432/postgres"


def urls(name: str) -> tuple[str, str]:
    """The database's URL and the server's maintenance database's (for CREATE and DROP DATABASE)."""
    parts = urlsplit(os.environ.get("DATABASE_URL") or SERVER_DEFAULT)
    return urlunsplit(parts._replace(path=f"/{name}")), urlunsplit(parts._replace(path="/postgres"))


def create(name: str, *, fresh: bool = False) -> str:
    """Create the database if it is missing (dropped first when `fresh`); return its URL."""
    import psycopg

    url, admin_url = urls(name)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        if fresh:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if fresh or conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{name}"')
    return url


def django_on(name: str, *, settings_module: str = "config.settings.test") -> None:
    """Set Django up in this process on the database `name`, migrated; exit with a message without PostgreSQL."""
    os.environ["WAYMARK_TEST_DATABASE_URL"] = create(name)
    os.environ["DJANGO_SETTINGS_MODULE"] = settings_module
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        sys.exit(f"{sys.argv[0]} needs PostgreSQL (set DATABASE_URL or start it on 127.0.0.1:5432)")
    settings.DATABASES["default"]["NAME"] = name
    try:
        call_command("migrate", verbosity=0)
    except Exception:  # a migration changed under the throwaway database (a shared working tree): start it afresh
        connection.close()
        create(name, fresh=True)
        call_command("migrate", verbosity=0)
