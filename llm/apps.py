from django.apps import AppConfig


class LlmConfig(AppConfig):
    name = "llm"
    verbose_name = "Model gateway"

    def ready(self) -> None:
        from common.reaper import register_stuck_work

        from .services import model_calls_abandon_stuck

        # A call whose worker died never finishes: the reaper has llm mark it abandoned.
        register_stuck_work("llm.modelcall", model_calls_abandon_stuck)
