from django.apps import AppConfig


class RubricsConfig(AppConfig):
    name = "rubrics"

    def ready(self) -> None:
        # Registers rubric versions as a promotable kind with reviews (and seals people's assessments in the audit
        # log until one's own: audit_blinding, imported by promotable).
        from . import (
            lease_takeover_services,  # noqa: F401 (a dead worker's rubric jobs are taken over: liveness)
            promotable,  # noqa: F401
            run_page,  # noqa: F401 (the run page's rubric panel and the explorer's score column)
        )
