"""The embedded default (`make run`): SQLite under var/, the filesystem broker, debug pages on."""

from config.sentry import init_sentry

from .base import *  # noqa: F403
from .env import env_bool

DEBUG = env_bool("WAYMARK_DEBUG", True)
WHITENOISE_USE_FINDERS = True
init_sentry()  # only when SENTRY_DSN is set (config/sentry.py)
