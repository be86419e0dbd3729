"""The explorer's column choice, kept per user in a cookie of that user's own (docs/decisions.md, "The explorer's
columns").

The cookie `waymark_columns_<user id>` (path /trajectories/, a year, HttpOnly, SameSite=Lax) holds the shown
columns' keys. Read on the server, so the rows come with the chosen columns already (no flash of hidden columns, no
script needed: the chooser is a plain form); one cookie per user, so people sharing a browser keep their own choice,
and it outlives a logout. Nothing is written to the database. Anything unknown in it is ignored; no cookie is the
default: every column.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.http import HttpRequest, HttpResponse

from .run_rows import CHOOSABLE

COOKIE_PREFIX = "waymark_columns_"
COOKIE_PATH = "/trajectories/"
COOKIE_SECONDS = 365 * 24 * 3600
SEPARATOR = "."


def cookie_name(user) -> str:
    return f"{COOKIE_PREFIX}{user.pk}"


def shown_columns(request: HttpRequest) -> tuple[str, ...]:
    """The columns the signed-in user chose (every column when they never chose)."""
    raw = request.COOKIES.get(cookie_name(request.user))
    if raw is None:
        return CHOOSABLE
    chosen = set(raw.split(SEPARATOR))
    return tuple(key for key in CHOOSABLE if key in chosen)


def choose(values: Iterable[str]) -> tuple[str, ...]:
    """The known column keys among `values`, in the table's order."""
    chosen = set(values)
    return tuple(key for key in CHOOSABLE if key in chosen)


def keep(response: HttpResponse, request: HttpRequest, columns: tuple[str, ...]) -> None:
    response.set_cookie(
        cookie_name(request.user),
        SEPARATOR.join(columns) or "none",  # an empty value would read as "never chose": every column
        max_age=COOKIE_SECONDS,
        path=COOKIE_PATH,
        secure=request.is_secure(),
        httponly=True,
        samesite="Lax",
    )
