"""The embedded default (`make run`): SQLite under var/, the filesystem broker, the styled error pages.

Django's debug pages (the technical 404 with the URLconf, the technical 500 with settings and local variables) only
when `WAYMARK_DEBUG=1` is set on purpose, as everywhere else (README: Configuration). What debug also switched on
here, and how the embedded default does without it:
- static files: WhiteNoise serves them from static/ and the apps (its finders), no collectstatic needed. Debug also
  turned on WhiteNoise's autorefresh (each file looked up on disk when asked for); without it WhiteNoise lists the
  files once at start and would serve a file edited later with its old length (a cut stylesheet), so autorefresh
  stays on here, debug or not. Browsers may keep a file for WhiteNoise's 60 s (0 under debug);
- ALLOWED_HOSTS: always the explicit list (WAYMARK_ALLOWED_HOSTS, localhost and loopback by default), debug or not;
- template debug: Django's default (on with DEBUG only), which only changes the technical page of a template error.
"""

from config.sentry import init_sentry

from .base import *  # noqa: F403
from .env import env_bool

DEBUG = env_bool("WAYMARK_DEBUG", False)
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True  # what is on disk now, as under debug (above)
init_sentry()  # only when SENTRY_DSN is set (config/sentry.py)
