"""The embedded default's management commands print no system-check warning (issue 24: `make run` printed 30 W040,
ten per command, for the totals walk's covering index SQLite cannot build; migration 0011)."""

import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from trajectories.models import Run


def test_the_runs_declare_only_indexes_every_database_builds():
    assert not [index.name for index in Run._meta.indexes if index.include or index.condition is not None]


def test_the_embedded_default_passes_the_system_checks_without_a_warning(tmp_path):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "WAYMARK_VAR_DIR": str(tmp_path),
    }
    for name in ("DATABASE_URL", "REDIS_URL"):
        env.pop(name, None)
    checked = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=Path(settings.BASE_DIR),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stderr
    output = checked.stdout + checked.stderr
    assert "System check identified no issues" in output and "W040" not in output, output
