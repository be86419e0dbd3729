"""The production settings: `check --deploy` is clean, and they refuse to load without their required environment."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent

PRODUCTION_ENV = {
    "DJANGO_SETTINGS_MODULE": "config.settings.production",
    "WAYMARK_SECRET_KEY": secrets.token_urlsafe(50),
    "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/test",
    "REDIS_URL": "redis://127.0.0.1:6379/0",
    "WAYMARK_ALLOWED_HOSTS": "waymark.example.com",
}


def _run(args: list[str], **env: str | None) -> subprocess.CompletedProcess:
    """Run a Python command in a clean environment: only PATH/HOME plus the production variables (None drops one)."""
    clean = {key: os.environ[key] for key in ("PATH", "HOME", "LANG") if key in os.environ}
    clean.update(PRODUCTION_ENV)
    for key, value in env.items():
        if value is None:
            clean.pop(key, None)
        else:
            clean[key] = value
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120, check=False
    )


def test_check_deploy_is_clean_under_the_production_settings():
    result = _run(["manage.py", "check", "--deploy"])
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "System check identified no issues" in output
    assert "WARNINGS" not in output and "ERRORS" not in output


LOAD_SETTINGS = ["-c", "import django; django.setup(); print('loaded')"]


def test_the_production_settings_load_with_their_required_environment():
    result = _run(LOAD_SETTINGS)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "loaded"


@pytest.mark.parametrize(
    ("override", "reason"),
    [
        ({"WAYMARK_SECRET_KEY": None}, "WAYMARK_SECRET_KEY must be set"),
        ({"WAYMARK_SECRET_KEY": "too-short-0123456789"}, "WAYMARK_SECRET_KEY must be set"),
        ({"DATABASE_URL": None}, "production needs DATABASE_URL"),
        ({"DATABASE_URL": "sqlite:////tmp/waymark.sqlite3"}, "production needs DATABASE_URL"),
        ({"REDIS_URL": None}, "production needs REDIS_URL"),
    ],
    ids=["no-secret-key", "short-secret-key", "no-database-url", "sqlite-database-url", "no-redis-url"],
)
def test_the_production_settings_refuse_to_load_without_their_required_environment(override, reason):
    result = _run(LOAD_SETTINGS, **override)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert reason in result.stderr
    assert "loaded" not in result.stdout
