"""The topbar's links for a logged-in user, built in Python (every page renders them; through the template engine
they cost about as much as the whole login page).

The links depend only on whether the user administers and on which section the path is in, so each combination is
built once per process and script prefix; `aria-current` marks the section, as the template did (the dashboard on
its own path only, every other link on any path under it).
"""

from __future__ import annotations

from html import escape

from django.urls import get_script_prefix, reverse
from django.utils.safestring import SafeString, mark_safe

# (URL name, label, title); the dashboard is current on its exact path only
LINKS = (
    ("dashboard", "Dashboard", ""),
    ("trajectories:list", "Trajectories", ""),
    ("graphs:list", "Graphs", ""),
    ("procedures:list", "Procedures", ""),
    ("intents:list", "Intents", ""),
    ("reviews:queue", "Reviews", ""),
    ("llm:calls", "Models", ""),
)
ADMIN_LINKS = (("accounts:audit", "Audit", ""),)
# The admin site is never marked current: it has its own pages and navigation.
ADMIN_SITE = ("admin:accounts_user_changelist", "Admin", "Django admin: users and their roles")

_links: dict[tuple[str, bool], list[tuple[str, str, str]]] = {}
_built: dict[tuple[str, bool, int | None], SafeString] = {}


def main_nav(path: str, *, administers: bool) -> SafeString:
    """The `<a>` links of the main navigation for a request to `path`."""
    prefix = get_script_prefix()
    links = _links.get((prefix, administers))
    if links is None:
        names = LINKS + ADMIN_LINKS + (ADMIN_SITE,) if administers else LINKS
        links = _links[(prefix, administers)] = [(reverse(name), label, title) for name, label, title in names]
    sections = links[: len(LINKS) + (len(ADMIN_LINKS) if administers else 0)]
    current = next(
        (position for position, (url, _, _) in enumerate(sections) if (path == url if position == 0 else url in path)),
        None,
    )
    built = _built.get((prefix, administers, current))
    if built is None:
        markup = "".join(_link(*link, current=position == current) for position, link in enumerate(links))
        built = _built[(prefix, administers, current)] = mark_safe(markup)  # every value escaped in _link
    return built


def _link(url: str, label: str, title: str, *, current: bool) -> str:
    extra = (f' title="{escape(title)}"' if title else "") + (' aria-current="page"' if current else "")
    return f'<a href="{escape(url)}"{extra}>{escape(label)}</a>'
