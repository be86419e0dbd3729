from django.apps import AppConfig


class LlmConfig(AppConfig):
    name = "llm"
    verbose_name = "Model gateway"

    def ready(self) -> None:
        from config.reaper import register_stuck_work

        from .models import ModelCall

        # A call whose worker died never finishes: the reaper marks it abandoned.
        register_stuck_work(
            ModelCall,
            status_field="status",
            running=ModelCall.Status.RUNNING,
            since_field="started_at",
            stuck_status=ModelCall.Status.ABANDONED,
        )
