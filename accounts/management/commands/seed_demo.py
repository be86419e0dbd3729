"""`manage.py seed_demo`: the demo users, role groups, an agent token and demo data. Safe to run again and again.

The command is a list of steps (`SEED_STEPS`); each takes the shared `SeedContext` and returns one summary line.
Later parts of Waymark add their demo data by appending a step.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand
from django.db import transaction

from accounts.models import ApiToken, User
from accounts.roles import Role
from accounts.services import Actor, agent_create, api_token_create, api_token_revoke, audit_record
from graphs.demo import seed_demo_graphs_step
from intents.demo import seed_demo_intents_step
from procedures.demo import seed_demo_procedures_step
from reviews.demo import seed_demo_reviews_step
from reviews.rubric_demo import seed_demo_rubrics_step
from trajectories.demo import seed_demo_runs

DEMO_PASSWORD = "waymark-demo"
DEMO_TOKEN_NAME = "demo-agent"
DEMO_AGENT = "demo-agent"  # the agent identity that owns the demo agent token (created by the seed)
LEGACY_TOKEN_OWNER = "otto"  # owned the demo token before agent identities; that token is revoked by the seed
DEMO_TOKEN_SCOPES = [
    "trajectories:read",
    "trajectories:write",
    "graphs:read",
    "graphs:guide",
    "procedures:read",
    "evaluations:run",
]
DEMO_TOKEN_FILENAME = "demo-agent-token"


@dataclass(frozen=True)
class DemoUser:
    username: str
    roles: tuple[Role, ...] = ()
    superuser: bool = False
    description: str = ""


DEMO_USERS = (
    DemoUser("admin", (Role.ADMIN,), superuser=True, description="admin"),
    DemoUser("rita", (Role.REVIEWER,), description="reviewer"),
    DemoUser("rob", (Role.REVIEWER,), description="reviewer"),
    DemoUser("otto", (Role.OPERATOR,), description="operator"),
    DemoUser("vera", (), description="read-only, no role"),
)


@dataclass
class SeedContext:
    """What the steps share: who acts, the demo users by name, where files go, and lines to print."""

    actor: Actor
    token_path: Path
    users: dict[str, User] = field(default_factory=dict)
    agent_actor: Actor | None = None
    notes: list[str] = field(default_factory=list)


def _ensure_groups(actor: Actor) -> dict[Role, Group]:
    groups = {}
    for role in Role:
        group, created = Group.objects.get_or_create(name=str(role))
        if created:
            audit_record(actor=actor, verb="role.create", target=("auth.group", str(group.pk)), after={"name": role})
        groups[role] = group
    return groups


def _create_demo_user(*, actor: Actor, spec: DemoUser, groups: dict[Role, Group]) -> User:
    user = User(
        username=spec.username,
        email=f"{spec.username}@demo.waymark.test",
        is_superuser=spec.superuser,
        is_staff=spec.superuser,
    )
    user.set_password(DEMO_PASSWORD)
    user.save()
    user.groups.set([groups[role] for role in spec.roles])
    audit_record(
        actor=actor,
        verb="user.create",
        target=user,
        after={"username": user.username, "roles": [str(r) for r in spec.roles], "superuser": spec.superuser},
    )
    return user


def seed_users(ctx: SeedContext) -> str:
    """Role groups and the demo users. Existing users are left as they are (password and roles included)."""
    created = []
    with transaction.atomic(durable=True):
        groups = _ensure_groups(ctx.actor)
        existing = {u.username: u for u in User.objects.filter(username__in=[d.username for d in DEMO_USERS])}
        for spec in DEMO_USERS:
            user = existing.get(spec.username)
            if user is None:
                user = _create_demo_user(actor=ctx.actor, spec=spec, groups=groups)
                created.append(spec.username)
            ctx.users[spec.username] = user
    kept = len(DEMO_USERS) - len(created)
    return f"users: {len(created)} created{' (' + ', '.join(created) + ')' if created else ''}, {kept} already there"


def _write_secret(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text + "\n")
    os.chmod(path, 0o600)


def seed_agent_token(ctx: SeedContext) -> str:
    """The `demo-agent` agent identity with one active `demo-agent` token; its plaintext is printed and saved only
    when it is created. A demo token of an older seed, owned by otto (a person), is revoked: its agent-only scopes
    no longer work."""
    owner = User.objects.filter(username=DEMO_AGENT, is_agent=True).first()
    if owner is None:
        owner = agent_create(actor=ctx.actor, name=DEMO_AGENT)
    for legacy in ApiToken.objects.filter(
        user__username=LEGACY_TOKEN_OWNER, name=DEMO_TOKEN_NAME, revoked_at__isnull=True
    ):
        api_token_revoke(actor=ctx.actor, token=legacy)
    token = ApiToken.objects.filter(user=owner, name=DEMO_TOKEN_NAME, revoked_at__isnull=True).first()
    if token is not None:
        ctx.agent_actor = Actor(user=owner, token=token)
        where = f"its plaintext is in {ctx.token_path}" if ctx.token_path.exists() else "its plaintext was shown once"
        return f'agent token "{DEMO_TOKEN_NAME}": already there ({where})'
    token, plaintext = api_token_create(actor=ctx.actor, user=owner, name=DEMO_TOKEN_NAME, scopes=DEMO_TOKEN_SCOPES)
    _write_secret(ctx.token_path, plaintext)
    ctx.agent_actor = Actor(user=owner, token=token)
    ctx.notes.append(f"Demo agent token created; its plaintext is saved to {ctx.token_path} (mode 600), not printed")
    return f'agent token "{DEMO_TOKEN_NAME}": created for agent {owner.username}, scopes {", ".join(token.scopes)}'


def seed_runs(ctx: SeedContext) -> str:
    """A few dozen runs of a customer-support agent, pushed as the demo agent."""
    result = seed_demo_runs(actor=ctx.agent_actor or ctx.actor)
    return f"runs: {len(result.created_ids)} created, {len(result.existing_ids)} already there"


SeedStep = Callable[[SeedContext], str]
SEED_STEPS: list[SeedStep] = [seed_users, seed_agent_token, seed_runs, seed_demo_graphs_step]
SEED_STEPS.append(seed_demo_procedures_step)
SEED_STEPS.append(seed_demo_reviews_step)
SEED_STEPS.append(seed_demo_intents_step)
SEED_STEPS.append(seed_demo_rubrics_step)


class Command(BaseCommand):
    help = "Create the demo users (password 'waymark-demo'), an agent token and demo runs. Idempotent."

    def handle(self, *args, **options) -> None:
        ctx = SeedContext(actor=Actor.system(), token_path=Path(settings.VAR_DIR) / DEMO_TOKEN_FILENAME)
        self.stdout.write("Seeding the demo data:")
        for step in SEED_STEPS:
            self.stdout.write(f"  {step(ctx)}")
        for note in ctx.notes:
            self.stdout.write(note)
        logins = ", ".join(f"{u.username} ({u.description})" for u in DEMO_USERS)
        self.stdout.write(f'Demo logins, password "{DEMO_PASSWORD}": {logins}')
