from django.apps import AppConfig


class ReviewsConfig(AppConfig):
    name = "reviews"

    def ready(self) -> None:
        from . import rubric_promotable  # noqa: F401 (registers rubric versions as a promotable kind)
