from django.apps import AppConfig


class ProceduresConfig(AppConfig):
    name = "procedures"

    def ready(self) -> None:
        from config.reaper import register_stuck_work
        from trajectories.jobs import register_job_kind

        from . import promotable  # noqa: F401 (registers procedure versions with reviews)
        from .models import ReplayMode, ReplayRun, ReplayStatus
        from .services import REPLAY_JOB_KIND, replays_reaped
        from .tasks import on_replay_job_answered

        register_job_kind(REPLAY_JOB_KIND, on_answered=on_replay_job_answered, on_expired=on_replay_job_answered)
        # An offline replay whose worker died stays "running": the reaper fails it and its version settles.
        # (Live replays end at their own deadline: replay_live_settle.)
        register_stuck_work(
            ReplayRun,
            status_field="status",
            running=ReplayStatus.RUNNING,
            since_field="started_at",
            stuck_status=ReplayStatus.FAILED,
            only={"mode": ReplayMode.OFFLINE},
            on_reaped=replays_reaped,
        )
