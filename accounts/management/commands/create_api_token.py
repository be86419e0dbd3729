"""`manage.py create_api_token --user NAME --name NAME --scope S [--scope S] [--expires-in DAYS]`: prints only the
plaintext token. Without --expires-in the token lasts until it is revoked.

Bad input exits 2 with a one-line reason on stderr and creates nothing.
"""

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from accounts.models import User
from accounts.services import Actor, api_token_create
from accounts.tokens import expiry_after, parse_expiry_days

from ._token_options import add_token_arguments

USAGE_ERROR = 2


class Command(BaseCommand):
    help = "Create an API token for a user and print its plaintext on stdout (shown once, never stored)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--user", default="", help="the username who owns the token")
        parser.add_argument("--name", default="", help="a name to recognise the token by")
        add_token_arguments(parser)

    def handle(self, *args, user: str, name: str, scopes: list[str], expires_in: str | None, **options) -> None:
        if not user:
            raise CommandError("--user is required", returncode=USAGE_ERROR)
        if not scopes:
            raise CommandError("at least one --scope is required", returncode=USAGE_ERROR)
        owner = User.objects.filter(username=user).first()
        if owner is None:
            raise CommandError(f"unknown user {user!r}", returncode=USAGE_ERROR)
        try:
            days = parse_expiry_days(expires_in) if expires_in is not None else None
            expires_at = expiry_after(days, timezone.now())
            _, plaintext = api_token_create(
                actor=Actor.system(), user=owner, name=name, scopes=scopes, expires_at=expires_at
            )
        except ValueError as exc:
            raise CommandError(str(exc), returncode=USAGE_ERROR)
        self.stdout.write(plaintext)
