"""Login throttling that a third party cannot turn on others (issue 30): OWASP's "device cookies", with failures
counted per (username, address) and per address. State lives in the cache (Redis in production, the shared file
cache in the embedded default): counters and locks expire by themselves.

- **Device cookie.** Every successful login sets a cookie for that username, signed with the secret key (its own
  salt), holding the casefolded username and a random nonce, valid WAYMARK_LOGIN_DEVICE_COOKIE_DAYS, HttpOnly,
  SameSite=Lax, Secure like the session cookie, sent only to the login page. Its name is a digest of the username.
- **A known device** — an attempt carrying a valid device cookie for the username typed — is limited by that cookie
  alone: WAYMARK_LOGIN_MAX_FAILURES failures lock that cookie, and no other lock applies to it.
- **Any other attempt** is limited three ways, each counted in a window of WAYMARK_LOGIN_LOCKOUT_SECONDS from its
  first failure and locked for that long when it reaches its limit:
  - the (username, address) pair: WAYMARK_LOGIN_MAX_FAILURES — an address guessing one account;
  - the address: WAYMARK_LOGIN_MAX_FAILURES_PER_ADDRESS, whatever the usernames — an address spraying accounts;
  - the username from browsers without its cookie: WAYMARK_LOGIN_MAX_FAILURES_PER_ACCOUNT, from any addresses — a
    distributed guess at one account. It is larger than the pair limit, so one address alone never reaches it.

So a third party hammering the admin's username locks only their own address out of it; an attack from many
addresses locks out browsers that never logged in as the admin, while the admin's own browsers still get in.
While a lock stands, attempts are refused before any password is checked. A success clears the pair's and the
cookie's failures (never the address's or the account's: one right password must not reset a spraying address).
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass

from django.conf import settings
from django.core import checks, signing
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.urls import reverse

from common.settings_snapshot import SettingsSnapshot

# Read on every API call: kept as plain attributes (common/settings_snapshot.py).
_settings = SettingsSnapshot("WAYMARK_TRUSTED_PROXY_COUNT")

DEVICE_COOKIE_PREFIX = "waymark_device_"
DEVICE_COOKIE_SALT = "waymark.accounts.login-device"

# The kinds of lock, as the audit event names them (auth.locked_out, `locked`), with what the refused page says.
PAIR, ADDRESS, ACCOUNT, DEVICE = "username_at_address", "address", "username_on_new_devices", "device"
_MESSAGES = {
    PAIR: "Too many failed login attempts for this username from your network address. Try again in {wait}.",
    ADDRESS: "Too many failed login attempts from your network address. Try again in {wait}.",
    ACCOUNT: (
        "Too many failed login attempts for this username from browsers it has not logged in from before. "
        "Log in from a browser you have used before, or try again in {wait}."
    ),
    DEVICE: "Too many failed login attempts from this browser. Try again in {wait}.",
}


@dataclass(frozen=True)
class Attempt:
    """One login attempt: the username typed, the client's address, and the nonce of a valid device cookie for that
    username (None: a browser that has not logged in as that user before, or whose cookie is forged or expired)."""

    username: str
    ip: str
    device: str | None = None

    @property
    def known_device(self) -> bool:
        return self.device is not None

    def subjects(self) -> list[tuple[str, str, int]]:
        """(kind, counted value, limit) of every count this attempt is held to."""
        if self.device is not None:
            return [(DEVICE, self.device, settings.WAYMARK_LOGIN_MAX_FAILURES)]
        user = _username_key(self.username)
        subjects = [(PAIR, _pair(user, self.ip), settings.WAYMARK_LOGIN_MAX_FAILURES)]
        if self.ip:
            subjects.append((ADDRESS, self.ip, settings.WAYMARK_LOGIN_MAX_FAILURES_PER_ADDRESS))
        subjects.append((ACCOUNT, user, settings.WAYMARK_LOGIN_MAX_FAILURES_PER_ACCOUNT))
        return subjects


@dataclass(frozen=True)
class Lockout:
    kind: str  # PAIR, ADDRESS, ACCOUNT or DEVICE
    retry_after: int  # seconds until attempts are accepted again

    @property
    def message(self) -> str:
        minutes = max(1, -(-self.retry_after // 60))
        return _MESSAGES[self.kind].format(wait=f"{minutes} minute" if minutes == 1 else f"{minutes} minutes")


def _username_key(username: str) -> str:
    return username.casefold()


def _pair(username_key: str, ip: str) -> str:
    return f"{username_key}\n{ip}"


def _key(purpose: str, kind: str, value: str) -> str:
    digest = hashlib.sha256(value.encode()).hexdigest()[:32]
    return f"waymark:login:{purpose}:{kind}:{digest}"


# --- the attempt ----------------------------------------------------------------------------------------------------


def attempt_of(request: HttpRequest, username: str) -> Attempt:
    return Attempt(username=username, ip=client_ip(request), device=_device_of(request, username))


def lockout_for(attempt: Attempt) -> Lockout | None:
    """The lock standing against this attempt, if any (in the order of Attempt.subjects)."""
    keys = {_key("lock", kind, value): kind for kind, value, _ in attempt.subjects()}
    found = cache.get_many(list(keys))
    now = time.time()
    for key, kind in keys.items():
        until = found.get(key)
        if until is not None and until > now:
            return Lockout(kind=kind, retry_after=max(1, int(until - now + 0.999)))
    return None


def count_failure(attempt: Attempt) -> list[str]:
    """Count one failed attempt; the kinds of lock this failure has just set."""
    window = settings.WAYMARK_LOGIN_LOCKOUT_SECONDS
    locked = []
    for kind, value, limit in attempt.subjects():
        key = _key("failures", kind, value)
        cache.add(key, 0, timeout=window)
        try:
            failures = cache.incr(key)
        except ValueError:  # the window expired between add and incr
            cache.set(key, 1, timeout=window)
            failures = 1
        if failures >= limit:
            cache.set(_key("lock", kind, value), time.time() + window, timeout=window)
            cache.delete(key)
            locked.append(kind)
    return locked


def clear_after_success(attempt: Attempt) -> None:
    """A successful login clears what this browser alone counted: the pair's failures, or its cookie's."""
    if attempt.device is not None:
        kind, value = DEVICE, attempt.device
    else:
        kind, value = PAIR, _pair(_username_key(attempt.username), attempt.ip)
    cache.delete_many([_key("failures", kind, value), _key("lock", kind, value)])


# --- device cookies -------------------------------------------------------------------------------------------------


def device_cookie_name(username: str) -> str:
    return DEVICE_COOKIE_PREFIX + hashlib.sha256(_username_key(username).encode()).hexdigest()[:16]


def _device_of(request: HttpRequest, username: str) -> str | None:
    """The nonce of the request's valid device cookie for `username`, or None."""
    value = request.COOKIES.get(device_cookie_name(username)) if username else None
    if not value:
        return None
    max_age = settings.WAYMARK_LOGIN_DEVICE_COOKIE_DAYS * 86400
    try:
        payload = signing.loads(value, salt=DEVICE_COOKIE_SALT, max_age=max_age)
    except signing.BadSignature:  # forged, tampered or expired (SignatureExpired is a BadSignature)
        return None
    if not isinstance(payload, dict) or payload.get("u") != _username_key(username):
        return None
    nonce = payload.get("n")
    return nonce if isinstance(nonce, str) and nonce else None


def set_device_cookie(response: HttpResponse, username: str) -> None:
    """Mark this browser as one that has logged in as `username`: a fresh cookie (new nonce) at every login."""
    value = signing.dumps({"u": _username_key(username), "n": secrets.token_urlsafe(16)}, salt=DEVICE_COOKIE_SALT)
    response.set_cookie(
        device_cookie_name(username),
        value,
        max_age=settings.WAYMARK_LOGIN_DEVICE_COOKIE_DAYS * 86400,
        path=reverse("accounts:login"),
        secure=settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite="Lax",
    )


# --- settings --------------------------------------------------------------------------------------------------------


def check_limits(**_kwargs) -> list[checks.CheckMessage]:
    """A system check (accounts.apps): limits of at least 1, and the account's above the pair's — else one address
    alone could lock an account for every browser without its device cookie, which is what this design prevents."""
    names = (
        "WAYMARK_LOGIN_MAX_FAILURES",
        "WAYMARK_LOGIN_MAX_FAILURES_PER_ADDRESS",
        "WAYMARK_LOGIN_MAX_FAILURES_PER_ACCOUNT",
        "WAYMARK_LOGIN_LOCKOUT_SECONDS",
        "WAYMARK_LOGIN_DEVICE_COOKIE_DAYS",
    )
    found = [
        checks.Error(f"{name} must be at least 1, not {getattr(settings, name)}", id="accounts.E001")
        for name in names
        if getattr(settings, name) < 1
    ]
    if settings.WAYMARK_LOGIN_MAX_FAILURES_PER_ACCOUNT <= settings.WAYMARK_LOGIN_MAX_FAILURES:
        found.append(
            checks.Warning(
                "WAYMARK_LOGIN_MAX_FAILURES_PER_ACCOUNT is not above WAYMARK_LOGIN_MAX_FAILURES: one address alone "
                "can lock a username for every browser without its device cookie",
                id="accounts.W001",
            )
        )
    return found


# --- the client's address -------------------------------------------------------------------------------------------


def client_ip(request: HttpRequest) -> str:
    """The client's address: REMOTE_ADDR, or with WAYMARK_TRUSTED_PROXY_COUNT=n the n-th X-Forwarded-For entry from
    the right (each trusted proxy appends the address it received the request from)."""
    proxies = _settings.WAYMARK_TRUSTED_PROXY_COUNT
    if proxies > 0:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
        if len(forwarded) >= proxies:
            return forwarded[-proxies][:64]
    return request.META.get("REMOTE_ADDR", "")[:64]
