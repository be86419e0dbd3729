"""Web and task processes freeze what set-up made (config.heap): checked in fresh interpreters, since a freeze is for
the life of a process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

WEB = "import gc; import config.wsgi; print(gc.get_freeze_count())"
TASKS = (
    "import gc; from config.celery import app; from celery.signals import worker_process_init;"
    " before = gc.get_freeze_count(); worker_process_init.send(sender=None); print(before, gc.get_freeze_count())"
)


def _run(code: str) -> list[int]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return [int(word) for word in done.stdout.split()]


@pytest.mark.parametrize("code", [WEB, TASKS])
def test_a_process_freezes_what_set_up_made(code):
    counts = _run(code)
    # Django, the apps and the URLconf: tens of thousands of objects (a task process: when its signal comes)
    assert counts[-1] - (counts[0] if len(counts) == 2 else 0) > 10_000


def test_objects_made_after_the_freeze_stay_in_the_collectors_sight():
    frozen, after = _run(
        "import gc; from config.heap import freeze_startup_objects; freeze_startup_objects();"
        " frozen = gc.get_freeze_count(); later = [[] for _ in range(1000)]; print(frozen, gc.get_freeze_count())"
    )
    assert frozen == after > 0
