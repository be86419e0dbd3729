"""Settings read on every API call, kept as plain attributes.

`django.conf.settings` costs about 0.3 µs a read (its LazyObject runs Python code on every attribute access), and
the token check of an agent's per-step call read a dozen settings: a few percent of a 304. A `SettingsSnapshot` reads
each of its names from settings once, then serves it from its own attributes; a change to one of them (Django's
`setting_changed`, sent by `override_settings` and pytest-django's `settings` fixture) drops it, so the next read
takes the new value.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.signals import setting_changed


class SettingsSnapshot:
    def __init__(self, *names: str) -> None:
        self._names = frozenset(names)
        setting_changed.connect(self._changed, weak=False)

    def __getattr__(self, name: str) -> Any:  # only on a miss: the first read, or the first after a change
        if name.startswith("_") or name not in self._names:
            raise AttributeError(name)
        value = self.__dict__[name] = getattr(settings, name)
        return value

    def _changed(self, *, setting: str, **_kwargs: Any) -> None:
        self.__dict__.pop(setting, None)
