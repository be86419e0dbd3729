"""`manage.py create_api_token --user NAME --name NAME --scope S [--scope S]`: prints only the plaintext token.

Bad input exits 2 with a one-line reason on stderr and creates nothing.
"""

from django.core.management.base import BaseCommand, CommandError

from accounts.models import User
from accounts.roles import SCOPES
from accounts.services import Actor, api_token_create

USAGE_ERROR = 2


class Command(BaseCommand):
    help = "Create an API token for a user and print its plaintext on stdout (shown once, never stored)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--user", default="", help="the username who owns the token")
        parser.add_argument("--name", default="", help="a name to recognise the token by")
        parser.add_argument(
            "--scope",
            action="append",
            default=[],
            dest="scopes",
            metavar="SCOPE",
            help=f"repeat for several; one of: {', '.join(SCOPES)}",
        )

    def handle(self, *args, user: str, name: str, scopes: list[str], **options) -> None:
        if not user:
            raise CommandError("--user is required", returncode=USAGE_ERROR)
        if not scopes:
            raise CommandError("at least one --scope is required", returncode=USAGE_ERROR)
        owner = User.objects.filter(username=user).first()
        if owner is None:
            raise CommandError(f"unknown user {user!r}", returncode=USAGE_ERROR)
        try:
            _, plaintext = api_token_create(actor=Actor.system(), user=owner, name=name, scopes=scopes)
        except ValueError as exc:
            raise CommandError(str(exc), returncode=USAGE_ERROR)
        self.stdout.write(plaintext)
