"""`make run`'s settings (config.settings.local, as they are) with the failing views of tests/config/urls_boom.py and
its failing middleware: what a browser sees when something breaks on the embedded default."""

from config.settings.local import *  # noqa: F403
from config.settings.local import MIDDLEWARE

ROOT_URLCONF = "tests.config.urls_boom"
MIDDLEWARE = [*MIDDLEWARE, "tests.config.urls_boom.BoomMiddleware"]
