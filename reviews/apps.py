from django.apps import AppConfig


class ReviewsConfig(AppConfig):
    name = "reviews"

    def ready(self) -> None:
        from . import audit_blinding

        audit_blinding.register()  # judgments in the audit log are sealed until the request closes
