from django.apps import AppConfig


class IntentsConfig(AppConfig):
    name = "intents"

    def ready(self) -> None:
        from . import audit_blinding, promotable  # noqa: F401 (registers intent taxonomy versions with reviews)

        audit_blinding.register()  # judgments in the audit log are sealed until the candidate is placed
        from . import lease_takeover_services  # noqa: F401 (a dead worker's runs are taken over: common.liveness)
