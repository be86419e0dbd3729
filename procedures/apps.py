from django.apps import AppConfig


class ProceduresConfig(AppConfig):
    name = "procedures"

    def ready(self) -> None:
        from trajectories.jobs import register_job_kind

        from . import promotable  # noqa: F401 (registers procedure versions with reviews)
        from .live_replay_services import REPLAY_JOB_KIND
        from .tasks import on_replay_job_answered

        register_job_kind(REPLAY_JOB_KIND, on_answered=on_replay_job_answered, on_expired=on_replay_job_answered)
        # An offline replay holds a lease (procedures.offline_replay_services): a dead worker's replay is taken over
        # by the redelivered message or requeued by the beat (procedures.requeue_expired_replays), not reaped blindly.
        # Live replays end at their own deadline (replay_live_settle).
