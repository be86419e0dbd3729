from django.apps import AppConfig


class ProceduresConfig(AppConfig):
    name = "procedures"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from trajectories.jobs import register_job_kind

        from . import promotable  # noqa: F401 (registers procedure versions with reviews)
        from .models import Procedure, ProcedureVersion
        from .replay.services.live import REPLAY_JOB_KIND
        from .tasks import on_replay_job_answered

        for model in (Procedure, ProcedureVersion):  # this process shows its own writes at once (active_body)
            post_save.connect(_list_changed, sender=model, dispatch_uid=f"active_body:save:{model.__name__}")
            post_delete.connect(_list_changed, sender=model, dispatch_uid=f"active_body:delete:{model.__name__}")
        register_job_kind(REPLAY_JOB_KIND, on_answered=on_replay_job_answered, on_expired=on_replay_job_answered)
        # An offline replay holds a lease (procedures.replay.services.offline): a dead worker's replay is taken over
        # by the redelivered message or requeued by the beat (procedures.requeue_expired_replays), not reaped blindly.
        # Live replays end at their own deadline (replay_live_settle).
        from . import lease_takeover_services  # noqa: F401 (and a dead worker's are taken over: common.liveness)


def _list_changed(**_kwargs) -> None:
    from . import active_body

    active_body.changed()
