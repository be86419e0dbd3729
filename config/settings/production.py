"""Production: PostgreSQL (DATABASE_URL) and Redis (REDIS_URL) are required; HTTPS everywhere."""

from django.core.exceptions import ImproperlyConfigured

from config.logs import logging_config
from config.sentry import init_sentry

from .base import *  # noqa: F403
from .base import DATABASES, REDIS_URL, SECRET_KEY
from .env import env_bool, env_int, env_str

DEBUG = False
if "insecure" in SECRET_KEY or len(SECRET_KEY) < 50:
    raise ImproperlyConfigured("WAYMARK_SECRET_KEY must be set to a long random value in production")
if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql" and not env_bool("WAYMARK_ALLOW_SQLITE"):
    raise ImproperlyConfigured("production needs DATABASE_URL pointing at PostgreSQL")
if not REDIS_URL:
    raise ImproperlyConfigured("production needs REDIS_URL (broker and cache)")

STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("WAYMARK_SSL_REDIRECT", True)
SECURE_HSTS_SECONDS = env_int("WAYMARK_HSTS_SECONDS", 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = env_bool("WAYMARK_HSTS_PRELOAD", False)
if not SECURE_HSTS_PRELOAD:
    # Preloading is an opt-in commitment for a whole registered domain (docs/decisions.md, accounts).
    SILENCED_SYSTEM_CHECKS = ["security.W021"]
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
LOGGING = logging_config(env_str("WAYMARK_LOG_FORMAT", "json"), env_str("WAYMARK_LOG_LEVEL", "INFO"))
# Error reporting: Sentry's SDK when SENTRY_DSN is set (config/sentry.py); without it nothing is imported.
init_sentry()
