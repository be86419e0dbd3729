"""`manage.py set_roles USERNAME [ROLE ...]`: give a user exactly these roles (none: read-only). Audited.

Roles: reviewer, operator, admin. Bad input exits 2 with a one-line reason and changes nothing.
"""

from django.core.management.base import BaseCommand, CommandError

from accounts.models import User
from accounts.roles import Role
from accounts.services import Actor, user_roles_set

USAGE_ERROR = 2


class Command(BaseCommand):
    help = "Give a user exactly the roles listed (reviewer, operator, admin); list none to make them read-only."

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument("roles", nargs="*", metavar="ROLE")

    def handle(self, *args, username: str, roles: list[str], **options) -> None:
        unknown = sorted(set(roles) - {role.value for role in Role})
        if unknown:
            raise CommandError(f"unknown role(s): {', '.join(unknown)}", returncode=USAGE_ERROR)
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"unknown user {username!r}", returncode=USAGE_ERROR)
        held = user_roles_set(actor=Actor.system(), user=user, roles=[Role(role) for role in roles])
        self.stdout.write(f"{user.username}: {', '.join(held) if held else 'no role (read-only)'}")
