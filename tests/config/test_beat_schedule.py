"""`make run`'s beat in a fresh var dir (issue 25, item 5): the Procfile's beat keeps its schedule under
WAYMARK_VAR_DIR, which scripts/run.sh creates (and the settings create on load), so a fresh clone's beat starts
instead of failing on a directory nothing made, and it never writes into another checkout's var/."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups (Linux)")


def procfile_command(name: str) -> str:
    line = next(line for line in (ROOT / "Procfile").read_text().splitlines() if line.startswith(f"{name}:"))
    return line.split(":", 1)[1].strip()


def test_run_sh_creates_the_var_dir_the_procfile_names():
    run_sh = (ROOT / "scripts" / "run.sh").read_text()
    assert 'mkdir -p "${WAYMARK_VAR_DIR:-var}"' in run_sh
    assert '--schedule "${WAYMARK_VAR_DIR:-var}/celerybeat-schedule"' in procfile_command("beat")


def test_the_procfiles_beat_starts_in_a_fresh_var_dir(tmp_path):
    var_dir = tmp_path / "fresh" / "var"  # nothing made it: not this test, not run.sh
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("WAYMARK_", "DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "CELERY_"))
    }
    env.update(DJANGO_SETTINGS_MODULE="config.settings.local", WAYMARK_VAR_DIR=str(var_dir))
    # As honcho runs a Procfile line: through the shell, from the checkout.
    beat = subprocess.Popen(
        ["/bin/sh", "-c", procfile_command("beat")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    schedule = list(var_dir.glob("celerybeat-schedule*"))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and beat.poll() is None:
            schedule = list(var_dir.glob("celerybeat-schedule*"))
            if schedule:
                break
            time.sleep(0.2)
        time.sleep(1)  # still running once it wrote its schedule
        alive = beat.poll() is None
    finally:
        if beat.poll() is None:
            os.killpg(beat.pid, signal.SIGTERM)
        output = beat.communicate(timeout=30)[0].decode(errors="replace")
    assert schedule, output
    assert alive, output
    assert "beat: Starting" in output
