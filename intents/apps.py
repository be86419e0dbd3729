from django.apps import AppConfig


def _take_over(run_ids: list[int]) -> None:
    from .tasks import proposal_reap

    proposal_reap.delay()  # the next step claims each run and goes on at once


class IntentsConfig(AppConfig):
    name = "intents"

    def ready(self) -> None:
        from django.db.models import Q

        from accounts.services import system_audit_record
        from common.leases import register_lease_takeover

        from . import audit_blinding, promotable  # noqa: F401 (registers intent taxonomy versions with reviews)
        from .models import IntentProposalRun

        audit_blinding.register()  # judgments in the audit log are sealed until the candidate is placed
        # A dead worker's proposal runs are taken over now, not when their lease runs out (common.leases).
        register_lease_takeover(
            IntentProposalRun,
            running=Q(status=IntentProposalRun.Status.RUNNING),
            take_over=_take_over,
            audit=system_audit_record,
        )
