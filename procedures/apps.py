from django.apps import AppConfig


class ProceduresConfig(AppConfig):
    name = "procedures"

    def ready(self) -> None:
        from trajectories.jobs import register_job_kind

        from .services import REPLAY_JOB_KIND
        from .tasks import on_replay_job_answered

        register_job_kind(REPLAY_JOB_KIND, on_answered=on_replay_job_answered, on_expired=on_replay_job_answered)
