"""The options of a token to create, shared by create_api_token and create_agent (a leading underscore: not a
command of its own)."""

from accounts.roles import SCOPES
from accounts.tokens import MAX_EXPIRY_DAYS


def add_token_arguments(parser) -> None:
    """--scope SCOPE (repeated, into `scopes`) and --expires-in DAYS (into `expires_in`, None when not given)."""
    parser.add_argument(
        "--scope",
        action="append",
        default=[],
        dest="scopes",
        metavar="SCOPE",
        help=f"the token's scopes, repeat for several; one of: {', '.join(SCOPES)}",
    )
    parser.add_argument(
        "--expires-in",
        default=None,
        dest="expires_in",
        metavar="DAYS",
        help=f"the token expires this many days from now (1 to {MAX_EXPIRY_DAYS}); default: never",
    )
