"""The demo seeders `manage.py seed_demo` runs, registered by the apps that own the data (issue 14): the command
imports no app's demo module, and no app's demo data is written by another app.

An app's `demo.py` registers each step it adds, naming the steps it runs after and those whose output it needs:

    @demo_seeder("procedures", after=("runs",), needs=("runs",))
    def seed_demo_procedures_step(ctx: SeedContext) -> str: ...

`demo_seeders()` imports the `demo` module of every installed app (the admin's autodiscovery) and returns the steps
in dependency order: a step runs after every step it names (in `after` or `needs`), otherwise in the order the apps
are installed. A step takes the shared `SeedContext` and returns one summary line. It must be safe to run again and
again, write only what is missing, and read or change only the demo's own rows (the runs of the demo source,
trajectories.demo), whatever else the database holds (issue 24).

`run_seeders()` runs them so that one failing never stops the others (issue 24): a step that raises is reported
with its traceback, and a step that needs it is skipped with a message; the rest go on.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.utils.module_loading import autodiscover_modules

if TYPE_CHECKING:  # annotations only
    from accounts.services import Actor

_scripted = ContextVar("waymark_scripted_seeding", default=False)


def seeding_the_demo() -> bool:
    """True inside `scripted_seeding()`: llm.factory then answers with the scripted demo model, key or not."""
    return _scripted.get()


@contextlib.contextmanager
def scripted_seeding() -> Iterator[None]:
    """seed_demo's seeders run inside: the demo is the scripted one and never bills a provider."""
    token = _scripted.set(True)
    try:
        yield
    finally:
        _scripted.reset(token)


@dataclass
class SeedContext:
    """What the steps share: who acts, the demo users by name (accounts' step fills them), where files go, the demo
    agent once its token exists, and lines to print at the end."""

    actor: Actor
    token_path: Path
    users: dict[str, Any] = field(default_factory=dict)
    agent_actor: Actor | None = None
    notes: list[str] = field(default_factory=list)


SeedStep = Callable[[SeedContext], str]


@dataclass(frozen=True)
class DemoSeeder:
    """`after`: the seeders this one runs after; `needs`: those whose output it uses (it runs after them too, and is
    skipped when one of them did not finish)."""

    name: str
    step: SeedStep
    after: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()

    @property
    def waits_for(self) -> tuple[str, ...]:
        return (*self.after, *(name for name in self.needs if name not in self.after))


_registry: dict[str, DemoSeeder] = {}


def demo_seeder(
    name: str, *, after: tuple[str, ...] = (), needs: tuple[str, ...] = ()
) -> Callable[[SeedStep], SeedStep]:
    """Register the decorated step as the demo seeder `name`, run after the seeders named in `after` and `needs`
    (skipped when one it needs did not finish). Registering a name again replaces it (a module imported twice)."""

    def register(step: SeedStep) -> SeedStep:
        _registry[name] = DemoSeeder(name, step, tuple(after), tuple(needs))
        return step

    return register


class SeederOrderError(RuntimeError):
    """A seeder names one that is not registered, or the seeders wait for each other."""


def in_dependency_order(seeders: list[DemoSeeder]) -> list[DemoSeeder]:
    """Each seeder after those it names; among the ones free to run, the earliest registered first."""
    names = {seeder.name for seeder in seeders}
    for seeder in seeders:
        if missing := [name for name in seeder.waits_for if name not in names]:
            raise SeederOrderError(f"demo seeder {seeder.name!r} runs after unknown seeders {missing}")
    ordered: list[DemoSeeder] = []
    done: set[str] = set()
    waiting = list(seeders)
    while waiting:
        ready = next((seeder for seeder in waiting if set(seeder.waits_for) <= done), None)
        if ready is None:
            raise SeederOrderError(f"demo seeders wait for each other: {[seeder.name for seeder in waiting]}")
        ordered.append(ready)
        done.add(ready.name)
        waiting.remove(ready)
    return ordered


def demo_seeders() -> list[DemoSeeder]:
    """Every installed app's registered seeders, in dependency order (ties in the order the apps are installed,
    whichever module was imported first)."""
    autodiscover_modules("demo")
    installed = [config.name for config in apps.get_app_configs()]

    def app_position(seeder: DemoSeeder) -> int:
        owner = apps.get_containing_app_config(seeder.step.__module__)
        return installed.index(owner.name) if owner is not None else len(installed)

    return in_dependency_order(sorted(_registry.values(), key=app_position))


@dataclass(frozen=True)
class SeedOutcome:
    """What became of one seeder: `done` with its summary line, `failed` with the error (and its traceback), or
    `skipped` because a seeder it needs did not finish."""

    name: str
    status: str  # "done" | "failed" | "skipped"
    line: str
    traceback: str = ""


def run_seeders(ctx: SeedContext, seeders: list[DemoSeeder]) -> Iterator[SeedOutcome]:
    """Run `seeders` in their order, one outcome each, as each ends. An exception in a step is caught and reported
    (nothing above Exception: an interrupt still stops the command); whatever the step wrote through the services
    stays (each service is its own transaction), and the next seeding completes it."""
    unfinished: set[str] = set()
    for seeder in seeders:
        if waiting := [name for name in seeder.needs if name in unfinished]:
            unfinished.add(seeder.name)
            line = f"{seeder.name}: skipped (needs {', '.join(waiting)}, which did not finish)"
            yield SeedOutcome(seeder.name, "skipped", line)
            continue
        try:
            line = seeder.step(ctx)
        except Exception as exc:
            unfinished.add(seeder.name)
            first_line = next(iter(str(exc).splitlines()), "")
            error = f"{type(exc).__name__}: {first_line}" if first_line else type(exc).__name__
            yield SeedOutcome(seeder.name, "failed", f"{seeder.name}: failed ({error})", traceback.format_exc())
            continue
        yield SeedOutcome(seeder.name, "done", line)
