"""`manage.py create_agent NAME [--token NAME --scope S [--scope S]]`: create an agent identity (audited
`agent.create`); with --scope, also one token for it, whose plaintext alone is printed on stdout.

Bad input exits 2 with a one-line reason on stderr; nothing is created then (an agent that exists already is an
error unless --scope asks only for a new token of it).
"""

from django.core.management.base import BaseCommand, CommandError

from accounts.models import User
from accounts.roles import SCOPES, agent_scopes_allowed
from accounts.services import Actor, AgentRefused, agent_create, api_token_create

USAGE_ERROR = 2


class Command(BaseCommand):
    help = "Create an agent identity (a service account whose tokens may push runs and answer evaluation jobs)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("name", help="the agent's name (a username; agents cannot log in)")
        parser.add_argument("--token", default="", dest="token_name", help="the name of a token to create for it")
        parser.add_argument(
            "--scope",
            action="append",
            default=[],
            dest="scopes",
            metavar="SCOPE",
            help=f"scopes of the token, repeat for several; one of: {', '.join(SCOPES)}",
        )

    def handle(self, *args, name: str, token_name: str, scopes: list[str], **options) -> None:
        if token_name and not scopes:
            raise CommandError("--token needs at least one --scope", returncode=USAGE_ERROR)
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
                actor=Actor.system(), user=agent, name=token_name or agent.username, scopes=scopes
            )
        except ValueError as exc:
            raise CommandError(str(exc), returncode=USAGE_ERROR)
        self.stdout.write(plaintext)
