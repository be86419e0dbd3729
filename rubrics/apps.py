from django.apps import AppConfig


def _take_over(job_ids: list[int]) -> None:
    from .tasks import rubric_reap

    rubric_reap.delay()  # claimed again at once, keeping the judges already written


class RubricsConfig(AppConfig):
    name = "rubrics"

    def ready(self) -> None:
        from django.db.models import Q

        from accounts.services import system_audit_record
        from common.leases import register_lease_takeover

        # Registers rubric versions as a promotable kind with reviews (and seals people's assessments in the audit
        # log until one's own: audit_blinding, imported by promotable).
        from . import (
            promotable,  # noqa: F401
            run_page,  # noqa: F401 (the run page's rubric panel and the explorer's score column)
        )
        from .models import RubricJob, RubricJobStatus

        # A dead worker's rubric jobs are taken over now, not when their lease runs out (common.leases).
        register_lease_takeover(
            RubricJob, running=Q(status=RubricJobStatus.RUNNING), take_over=_take_over, audit=system_audit_record
        )
