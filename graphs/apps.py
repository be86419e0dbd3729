from django.apps import AppConfig


def _on_evaluation_job(job_id: int, subject: str) -> None:
    from .tasks import on_evaluation_job

    on_evaluation_job(job_id, subject)


class GraphsConfig(AppConfig):
    name = "graphs"

    def ready(self) -> None:
        from trajectories.jobs import register_job_kind

        from . import promotable  # noqa: F401 (registers graph revisions with reviews)
        from .evolution.jobs import JOB_KIND

        register_job_kind(JOB_KIND, on_answered=_on_evaluation_job, on_expired=_on_evaluation_job)
        from . import lease_takeover_services  # noqa: F401 (a dead worker's runs are taken over: common.liveness)
