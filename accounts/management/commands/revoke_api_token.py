"""`manage.py revoke_api_token PREFIX`: revoke any user's token by its prefix (or its full `wm_…` text).

For operators cleaning up after a leak or a departed agent. Prints one line; unknown prefixes exit 2.
"""

from django.core.management.base import BaseCommand, CommandError

from accounts.models import ApiToken
from accounts.services import Actor, api_token_revoke
from accounts.tokens import TOKEN_PREFIX

USAGE_ERROR = 2


def _prefix_of(text: str) -> str:
    text = text.strip()
    if text.startswith(TOKEN_PREFIX):
        text = text[len(TOKEN_PREFIX) :].partition("_")[0]
    return text


class Command(BaseCommand):
    help = "Revoke an API token by its prefix (as shown on the settings page: wm_<prefix>_…)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("token", help="the prefix, wm_<prefix>_…, or the whole token")

    def handle(self, *args, token: str, **options) -> None:
        prefix = _prefix_of(token)
        found = ApiToken.objects.select_related("user").filter(prefix=prefix).first() if prefix else None
        if found is None:
            raise CommandError(f"no token with prefix {prefix!r}", returncode=USAGE_ERROR)
        was_revoked = found.revoked_at is not None
        revoked = api_token_revoke(actor=Actor.system(), token=found)
        state = "was already revoked" if was_revoked else "revoked"
        self.stdout.write(f"{revoked} of {revoked.user.username} {state} at {revoked.revoked_at:%Y-%m-%d %H:%M:%S} UTC")
