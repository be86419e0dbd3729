from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _ensure_roles_after_migrate(sender, using="default", **kwargs) -> None:
    from .services import ensure_roles

    if using == "default":
        ensure_roles()


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts, tokens and audit"

    def ready(self) -> None:
        # The role groups exist after every `migrate` (and after the test runner's flushes).
        post_migrate.connect(_ensure_roles_after_migrate, sender=self, dispatch_uid="accounts.ensure_roles")
