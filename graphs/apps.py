from django.apps import AppConfig


def _on_evaluation_job(job_id: int, subject: str) -> None:
    from .tasks import on_evaluation_job

    on_evaluation_job(job_id, subject)


def _evolution_take_over(run_ids: list[int]) -> None:
    from .tasks import evolution_reap

    evolution_reap.delay()  # the next step claims each run and resumes it from its checkpoints


def _certification_take_over(certification_ids: list[int]) -> None:
    from .certification_services import take_over

    take_over(certification_ids)


class GraphsConfig(AppConfig):
    name = "graphs"

    def ready(self) -> None:
        from django.db.models import Q

        from accounts.services import system_audit_record
        from common.leases import register_lease_takeover
        from trajectories.jobs import register_job_kind

        from . import promotable  # noqa: F401 (registers graph revisions with reviews)
        from .evolution.jobs import JOB_KIND
        from .models import EvolutionRun, GraphCertification

        register_job_kind(JOB_KIND, on_answered=_on_evaluation_job, on_expired=_on_evaluation_job)
        # A dead worker's runs and certifications are taken over now, not when their lease runs out (common.leases).
        register_lease_takeover(
            EvolutionRun,
            running=Q(status=EvolutionRun.Status.RUNNING),
            take_over=_evolution_take_over,
            audit=system_audit_record,
        )
        register_lease_takeover(
            GraphCertification,
            running=Q(status=GraphCertification.Status.RUNNING),
            take_over=_certification_take_over,
            audit=system_audit_record,
        )
