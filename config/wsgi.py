import os

from django.core.wsgi import get_wsgi_application

from config.health_start import note_web_started
from config.heap import freeze_startup_objects

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
application = get_wsgi_application()
note_web_started()  # /healthz says "starting" until a worker stamps its heartbeat (config.health_start)
freeze_startup_objects()  # full collections walk only what requests allocate (config.heap)
