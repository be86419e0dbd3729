"""Token format and hashing: `wm_<prefix>_<secret>`, stored as the prefix plus HMAC-SHA256(pepper, secret)."""

import hashlib
import hmac
import secrets

from config.settings_snapshot import SettingsSnapshot

# Read on every API call: kept as plain attributes (config/settings_snapshot.py).
_settings = SettingsSnapshot(
    "WAYMARK_TOKEN_PEPPER",
)

TOKEN_PREFIX = "wm_"


def new_token() -> tuple[str, str, str]:
    """A fresh (plaintext, prefix, digest)."""
    prefix = secrets.token_hex(6)
    secret = secrets.token_urlsafe(30)
    return f"{TOKEN_PREFIX}{prefix}_{secret}", prefix, digest_secret(secret)


def digest_secret(secret: str) -> str:
    return hmac.digest(_settings.WAYMARK_TOKEN_PEPPER.encode(), secret.encode(), hashlib.sha256).hex()  # one C call


def split_token(plaintext: str) -> tuple[str, str] | None:
    """(prefix, secret) of a well-formed token, else None."""
    if not plaintext.startswith(TOKEN_PREFIX):
        return None
    prefix, sep, secret = plaintext[len(TOKEN_PREFIX) :].partition("_")
    if not sep or len(prefix) != 12 or not secret:
        return None
    return prefix, secret
