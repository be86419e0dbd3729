from django.apps import AppConfig


class ReviewsConfig(AppConfig):
    name = "reviews"

    def ready(self) -> None:
        from . import audit_blinding, rubric_promotable  # noqa: F401 (registers rubric versions as a promotable kind)

        audit_blinding.register()  # judgments in the audit log are sealed until the request closes
        from . import lease_takeover_services  # noqa: F401 (a dead worker's rubric jobs are taken over: liveness)
