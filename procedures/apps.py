from django.apps import AppConfig


class ProceduresConfig(AppConfig):
    name = "procedures"

    def ready(self) -> None:
        from django.db.models import Q
        from django.db.models.signals import post_delete, post_save

        from accounts.services import system_audit_record
        from common.leases import register_lease_takeover
        from trajectories.jobs import register_job_kind

        from . import promotable  # noqa: F401 (registers procedure versions with reviews)
        from .models import Procedure, ProcedureVersion, ReplayMode, ReplayRun, ReplayStatus
        from .replay.services.live import REPLAY_JOB_KIND
        from .tasks import on_replay_job_answered

        for model in (Procedure, ProcedureVersion):  # this process shows its own writes at once (active_body)
            post_save.connect(_list_changed, sender=model, dispatch_uid=f"active_body:save:{model.__name__}")
            post_delete.connect(_list_changed, sender=model, dispatch_uid=f"active_body:delete:{model.__name__}")
        register_job_kind(REPLAY_JOB_KIND, on_answered=on_replay_job_answered, on_expired=on_replay_job_answered)
        # An offline replay holds a lease (procedures.replay.services.offline): a dead worker's replay is taken over
        # by the redelivered message or requeued by the beat (procedures.requeue_expired_replays), not reaped blindly,
        # and at once when its worker process is known dead (common.leases). Live replays end at their own deadline
        # (replay_live_settle).
        register_lease_takeover(
            ReplayRun,
            running=Q(mode=ReplayMode.OFFLINE, status=ReplayStatus.RUNNING),
            take_over=_take_over,
            audit=system_audit_record,
        )


def _take_over(replay_ids: list[int]) -> None:
    from .tasks import requeue_expired_replays

    requeue_expired_replays.delay()  # the usual take-over (a fresh claim, attempts counted) runs at once


def _list_changed(**_kwargs) -> None:
    from . import active_body

    active_body.changed()
