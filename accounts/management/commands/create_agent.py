"""`manage.py create_agent NAME [--token NAME --scope S [--scope S] [--expires-in DAYS]]`: create an agent identity
(audited `agent.create`); with --scope, also one token for it (lasting DAYS, or until revoked), whose plaintext alone
is printed on stdout.

Bad input exits 2 with a one-line reason on stderr; nothing is created then (an agent that exists already is an
error unless --scope asks only for a new token of it).
"""

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from accounts.models import User
from accounts.roles import agent_scopes_allowed
from accounts.services import Actor, AgentRefused, agent_create, api_token_create
from accounts.tokens import expiry_after, parse_expiry_days

from ._token_options import add_token_arguments

USAGE_ERROR = 2


class Command(BaseCommand):
    help = "Create an agent identity (a service account whose tokens may push runs and answer evaluation jobs)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("name", help="the agent's name (a username; agents cannot log in)")
        parser.add_argument("--token", default="", dest="token_name", help="the name of a token to create for it")
        add_token_arguments(parser)

    def handle(self, *args, name: str, token_name: str, scopes: list[str], expires_in: str | None, **options) -> None:
        if (token_name or expires_in is not None) and not scopes:
            raise CommandError("--token and --expires-in need at least one --scope", returncode=USAGE_ERROR)
        try:  # checked before anything is created
            days = parse_expiry_days(expires_in) if expires_in is not None else None
        except ValueError as exc:
            raise CommandError(str(exc), returncode=USAGE_ERROR)
        refused = sorted(set(scopes) - set(agent_scopes_allowed()))
        if refused:
            raise CommandError(f"scope(s) an agent cannot hold: {', '.join(refused)}", returncode=USAGE_ERROR)
        agent = User.objects.filter(username=name, is_agent=True).first()
        if agent is None or not scopes:
            try:
                agent = agent_create(actor=Actor.system(), name=name)
            except AgentRefused as exc:
                raise CommandError(str(exc), returncode=USAGE_ERROR)
        if not scopes:
            self.stdout.write(f"agent {agent.username} created")
            return
        try:
            _, plaintext = api_token_create(
                actor=Actor.system(),
                user=agent,
                name=token_name or agent.username,
                scopes=scopes,
                expires_at=expiry_after(days, timezone.now()),
            )
        except ValueError as exc:
            raise CommandError(str(exc), returncode=USAGE_ERROR)
        self.stdout.write(plaintext)
