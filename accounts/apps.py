from django.apps import AppConfig
from django.core import checks
from django.core.signals import request_finished
from django.db.models.signals import m2m_changed, post_delete, post_migrate, post_save


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
        self._invalidate_cached_tokens()
        from . import throttle

        checks.register(throttle.check_limits)

    def _invalidate_cached_tokens(self) -> None:
        """Any change to a token, a user or a user's groups drops every process's cached tokens
        (accounts.token_cache); the last-used times are written after responses."""
        from . import token_cache
        from .models import ApiToken, User

        def on_user_saved(sender, update_fields=None, **kwargs) -> None:
            if update_fields is not None and set(update_fields) <= {"last_login"}:
                return  # a login: nothing a token depends on
            token_cache.bump_version()

        post_save.connect(token_cache.bump_version, sender=ApiToken, dispatch_uid="accounts.token_saved")
        post_delete.connect(token_cache.bump_version, sender=ApiToken, dispatch_uid="accounts.token_deleted")
        post_save.connect(on_user_saved, sender=User, weak=False, dispatch_uid="accounts.user_saved")
        post_delete.connect(token_cache.bump_version, sender=User, dispatch_uid="accounts.user_deleted")
        m2m_changed.connect(token_cache.bump_version, sender=User.groups.through, dispatch_uid="accounts.groups")
        request_finished.connect(token_cache.flush_used_on_request_finished, dispatch_uid="accounts.last_used")
