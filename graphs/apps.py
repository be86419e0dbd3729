from django.apps import AppConfig


class GraphsConfig(AppConfig):
    name = "graphs"

    def ready(self) -> None:
        from . import promotable  # noqa: F401 (registers graph revisions with reviews)
