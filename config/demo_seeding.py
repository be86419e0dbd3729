"""The demo seeders `manage.py seed_demo` runs, registered by the apps that own the data (issue 14): the command
imports no app's demo module, and no app's demo data is written by another app.

An app's `demo.py` registers each step it adds, naming the steps it must follow:

    @demo_seeder("graphs", after=("users",))
    def seed_demo_graphs_step(ctx: SeedContext) -> str: ...

`demo_seeders()` imports the `demo` module of every installed app (the admin's autodiscovery) and returns the steps
in dependency order: a step runs after every step it names, otherwise in the order the apps are installed. A step
takes the shared `SeedContext` and returns one summary line; it must be safe to run again and again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.utils.module_loading import autodiscover_modules

if TYPE_CHECKING:  # annotations only
    from accounts.services import Actor


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
    name: str
    step: SeedStep
    after: tuple[str, ...] = ()


_registry: dict[str, DemoSeeder] = {}


def demo_seeder(name: str, *, after: tuple[str, ...] = ()) -> Callable[[SeedStep], SeedStep]:
    """Register the decorated step as the demo seeder `name`, run after the seeders named in `after`. Registering a
    name again replaces it (a module imported twice)."""

    def register(step: SeedStep) -> SeedStep:
        _registry[name] = DemoSeeder(name, step, tuple(after))
        return step

    return register


class SeederOrderError(RuntimeError):
    """A seeder names one that is not registered, or the seeders wait for each other."""


def in_dependency_order(seeders: list[DemoSeeder]) -> list[DemoSeeder]:
    """Each seeder after those it names; among the ones free to run, the earliest registered first."""
    names = {seeder.name for seeder in seeders}
    for seeder in seeders:
        if missing := [name for name in seeder.after if name not in names]:
            raise SeederOrderError(f"demo seeder {seeder.name!r} runs after unknown seeders {missing}")
    ordered: list[DemoSeeder] = []
    done: set[str] = set()
    waiting = list(seeders)
    while waiting:
        ready = next((seeder for seeder in waiting if set(seeder.after) <= done), None)
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
