"""Tests: PostgreSQL and Redis when reachable (required under CI=true), SQLite and in-memory stand-ins otherwise.

Tests that need a real PostgreSQL or Redis carry the `postgres` / `redis` marker and are skipped with a visible
reason when the suite runs without them (tests/conftest.py).
"""

import socket

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .env import env_bool, env_str


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


CI = env_bool("CI")
_pg_url = env_str("WAYMARK_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
_pg = dj_database_url.parse(_pg_url)
POSTGRES_AVAILABLE = _reachable(_pg.get("HOST") or "127.0.0.1", int(_pg.get("PORT") or 5432))
if POSTGRES_AVAILABLE:
    DATABASES = {"default": _pg}
    # Each parallel worker (or developer) can ask for its own test database name.
    DATABASES["default"]["TEST"] = {"NAME": env_str("WAYMARK_TEST_DB_NAME", "test_waymark")}
elif CI:
    raise ImproperlyConfigured("CI=true but PostgreSQL is not reachable at " + _pg_url)
else:
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}

TEST_REDIS_URL = env_str("WAYMARK_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
REDIS_AVAILABLE = _reachable("127.0.0.1", 6379) if "127.0.0.1:6379" in TEST_REDIS_URL else True
if CI and not REDIS_AVAILABLE:
    raise ImproperlyConfigured("CI=true but Redis is not reachable at " + TEST_REDIS_URL)

SECRET_KEY = "waymark-test-secret-key-not-for-production-0123456789abcdef"
WAYMARK_TOKEN_PEPPER = "waymark-test-pepper"
DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
if env_str("WAYMARK_TEST_CACHE_URL", ""):  # server processes a test starts share Redis with it (test_token_cache)
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": env_str("WAYMARK_TEST_CACHE_URL", ""),
        }
    }
WAYMARK_LIVENESS_CACHE = "default"  # the stamps share the test cache (Redis for the worker fault tests)
# The locmem cache lives for the whole run: limits no other test can reach (tests/common/test_ratelimit.py lowers them).
# The suite's replays are a handful of cases: the default certification policy asks nothing of the bound or of n
# there (a net regression and a critical breakage still fail); tests of certification set the policy they test.
WAYMARK_CERTIFICATION_POLICY = {"margin": 1.0, "min_n": 1}
WAYMARK_API_RATE_PER_TOKEN = 10**9
WAYMARK_API_AUTH_FAILURES_PER_IP = 10**9
# Ingest in flight per token and agent (common/fairshare.py): no cap other tests reach (tests/common/test_fairshare.py
# lowers them).
WAYMARK_INGEST_CONCURRENT_PER_TOKEN = 10**6
WAYMARK_INGEST_CONCURRENT_PER_AGENT = 10**6
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.InMemoryStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
CELERY_TASK_ALWAYS_EAGER = True
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_BROKER_URL = "memory://"
CELERY_BROKER_TRANSPORT_OPTIONS = {}
ANTHROPIC_API_KEY = ""
LOGGING = {"version": 1, "disable_existing_loggers": False, "root": {"level": "WARNING"}}
