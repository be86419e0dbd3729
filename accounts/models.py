from datetime import datetime

from django.contrib.auth.models import AbstractUser
from django.db import models
from django.utils import timezone

from .roles import Role


class User(AbstractUser):
    """A person, or an agent identity (`is_agent`): a service account created by an operator, without a password
    or roles, whose tokens alone may push runs and answer evaluation jobs (roles.AGENT_SCOPES). What a person may do
    follows from their groups (Role) or superuser status."""

    is_agent = models.BooleanField(default=False)

    def get_session_auth_hash(self) -> str:
        """As Django's; a user served by accounts.session_users carries it (its password hash is not kept)."""
        kept = self.__dict__.get("_session_auth_hash")
        return kept if kept is not None else super().get_session_auth_hash()

    def set_password(self, raw_password: str | None) -> None:
        self.__dict__.pop("_session_auth_hash", None)  # the new hash follows from the new password
        super().set_password(raw_password)

    def has_role(self, role: Role | str) -> bool:
        if not self.is_active or self.is_agent:
            return False
        if self.is_superuser:
            return True
        names = getattr(self, "_role_names", None)
        if names is None:
            names = self._role_names = frozenset(self.groups.values_list("name", flat=True))
        return str(role) in names or Role.ADMIN.value in names

    @property
    def is_reviewer(self) -> bool:
        return self.has_role(Role.REVIEWER)

    @property
    def is_operator(self) -> bool:
        return self.has_role(Role.OPERATOR)

    @property
    def is_admin(self) -> bool:
        return self.has_role(Role.ADMIN)

    # -- permission predicates: one per rule, used by services, views, the API and templates ---------------------
    # Each follows from the roles above, so inactive users and agent identities hold none of them. Templates read
    # them as `user.may_propose`; the anonymous user has none of these attributes, which templates read as false.

    @property
    def may_propose(self) -> bool:
        """Propose a promotion (reviews): reviewers and operators."""
        return self.is_reviewer or self.is_operator

    @property
    def may_judge(self) -> bool:
        """Judge promotion requests and take items from the review queue: reviewers."""
        return self.is_reviewer

    @property
    def may_operate(self) -> bool:
        """Operator-only actions: mine, amend and re-run procedures, start and cancel graph evolution and intent
        analysis runs, run intent windows."""
        return self.is_operator

    @property
    def may_decide_alerts(self) -> bool:
        """Decide intent drift alerts: reviewers and operators."""
        return self.is_reviewer or self.is_operator

    @property
    def may_draft_intents(self) -> bool:
        """Draft intent taxonomy candidates: reviewers and operators."""
        return self.is_reviewer or self.is_operator

    @property
    def may_assess(self) -> bool:
        """Propose rubrics, judge runs with models and assess runs from the pages: reviewers and operators."""
        return self.is_reviewer or self.is_operator

    @property
    def may_administer(self) -> bool:
        """Admin-only actions: manage webhooks, override a failing gate, read the audit log, the admin site."""
        return self.is_admin

    def may_withdraw(self, request) -> bool:
        """Withdraw a promotion request (`request` has a proposer_id): its proposer, or an admin."""
        return self.pk == request.proposer_id or self.is_admin


class ApiToken(models.Model):
    """A bearer token `wm_<prefix>_<secret>`: only the prefix (for lookup) and an HMAC digest are stored."""

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True)
    digest = models.CharField(max_length=64)
    scopes = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # None: never expires. From this instant on the token is refused (401, "expired"); set once, at creation.
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return token_label(self.name, self.prefix)

    def expired(self, now: datetime | None = None) -> bool:
        """Whether the token has expired at `now` (default: the current time); expired at `expires_at` itself."""
        return self.expires_at is not None and self.expires_at <= (now or timezone.now())

    @property
    def state(self) -> str:
        """The state: "revoked", "expired" or "active" (revoked wins over expired)."""
        if self.revoked_at is not None:
            return "revoked"
        return "expired" if self.expired() else "active"

    @property
    def is_active(self) -> bool:
        return self.state == "active"


class AuditEventQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise TypeError("audit events are append-only")

    def delete(self):
        raise TypeError("audit events are append-only")


class AuditEvent(models.Model):
    """One state change. Written by accounts.services.audit_record inside the change's own transaction."""

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor_user = models.ForeignKey(User, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    actor_token = models.ForeignKey(ApiToken, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    verb = models.CharField(max_length=80, db_index=True)
    target_type = models.CharField(max_length=80)
    target_id = models.CharField(max_length=120)
    target_label = models.CharField(max_length=200, blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    request_id = models.CharField(max_length=64, blank=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["target_type", "target_id"])]

    def __str__(self) -> str:
        return f"{self.verb} {self.target_type}:{self.target_id}"

    def save(self, *args, **kwargs):
        if self.pk is not None and not self._state.adding:
            raise TypeError("audit events are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise TypeError("audit events are append-only")

    @property
    def actor_label(self) -> str:
        token = self.actor_token if self.actor_token_id else None
        return actor_label(
            token=(token.name, token.prefix) if token else None,
            username=self.actor_user.username if self.actor_user_id else None,
        )


def token_label(name: str, prefix: str) -> str:
    """How a token is named to people: its name and the start of its plaintext, never the secret."""
    return f"{name} (wm_{prefix}_…)"


def actor_label(*, token: tuple[str, str] | None, username: str | None) -> str:
    """Who did something, as the audit log names them: a token (name, prefix) it was done with, else the user, else
    the system."""
    if token is not None:
        return f"token {token_label(*token)}"
    return username if username is not None else "system"
