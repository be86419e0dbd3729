"""Demo data of accounts for `manage.py seed_demo`: the role groups, the demo users and the demo agent's token.

Registered as the first demo seeders (common.demo_seeding); safe to run again and again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from common.demo_seeding import SeedContext, demo_seeder

from .models import ApiToken, User
from .roles import Role
from .services import Actor, agent_create, api_token_create, api_token_revoke, ensure_roles, user_create

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


@demo_seeder("users")
def seed_users(ctx: SeedContext) -> str:
    """Role groups and the demo users. Existing users are left as they are (password and roles included)."""
    created = []
    ensure_roles()
    existing = {u.username: u for u in User.objects.filter(username__in=[d.username for d in DEMO_USERS])}
    for spec in DEMO_USERS:
        user = existing.get(spec.username)
        if user is None:
            user = user_create(
                actor=ctx.actor,
                username=spec.username,
                email=f"{spec.username}@demo.waymark.test",
                password=DEMO_PASSWORD,
                roles=list(spec.roles),
                superuser=spec.superuser,
            )
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


@demo_seeder("agent-token", after=("users",))
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
