"""Token format and hashing: `wm_<prefix>_<secret>`, stored as the prefix plus HMAC-SHA256(pepper, secret)."""

import functools
import hashlib
import hmac
import secrets

from config.settings_snapshot import SettingsSnapshot

# Read on every API call: kept as plain attributes (config/settings_snapshot.py).
_settings = SettingsSnapshot("WAYMARK_TOKEN_PEPPER")

TOKEN_PREFIX = "wm_"


def new_token() -> tuple[str, str, str]:
    """A fresh (plaintext, prefix, digest)."""
    prefix = secrets.token_hex(6)
    secret = secrets.token_urlsafe(30)
    return f"{TOKEN_PREFIX}{prefix}_{secret}", prefix, digest_secret(secret)


def digest_secret(secret: str) -> str:
    """HMAC-SHA256(pepper, secret) in hex: a copy of the MAC already keyed with the pepper, fed the secret (`copy()`
    as the hmac module documents it, for digests sharing a start). Measured against `hmac.digest`: 1.2 against
    1.9 µs in a loop, and about half on cold caches (each agent call in a worker waiting on the network), where the
    one-shot call looked the digest up in OpenSSL each time."""
    mac = _keyed(_settings.WAYMARK_TOKEN_PEPPER).copy()
    mac.update(secret.encode())
    return mac.hexdigest()


@functools.lru_cache(maxsize=4)  # one pepper in production; tests may change it
def _keyed(pepper: str) -> hmac.HMAC:
    return hmac.new(pepper.encode(), digestmod=hashlib.sha256)


def split_token(plaintext: str) -> tuple[str, str] | None:
    """(prefix, secret) of a well-formed token, else None."""
    if not plaintext.startswith(TOKEN_PREFIX):
        return None
    prefix, sep, secret = plaintext[len(TOKEN_PREFIX) :].partition("_")
    if not sep or len(prefix) != 12 or not secret:
        return None
    return prefix, secret
