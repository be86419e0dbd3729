"""`manage.py seed_demo`: the demo users, role groups, an agent token and demo data. Safe to run again and again.

The command runs the demo seeders the apps register (common.demo_seeding) in dependency order; each takes the shared
`SeedContext` and returns one summary line. It imports no app's demo module: an app adds its demo data by
registering a seeder in its own `demo.py`.

`make run` seeds on every start, so seeding never stops a start (issue 24): a seeder that fails is named on stdout
with its error and its traceback goes to stderr, the seeders that need it are skipped, the others run, and the
command still exits 0 after listing what failed. Running it again (or the next start) completes what is missing.
"""

from __future__ import annotations

import contextlib
import traceback
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from accounts.demo import DEMO_PASSWORD, DEMO_TOKEN_FILENAME, DEMO_USERS
from accounts.services import Actor
from common.demo_seeding import SeedContext, demo_seeders, run_seeders, scripted_seeding


class Command(BaseCommand):
    help = "Create the demo users (password 'waymark-demo'), an agent token and demo runs. Idempotent."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--with-model",
            action="store_true",
            help="let the configured model (ANTHROPIC_API_KEY) answer the demo's model calls; by default the "
            "scripted demo model does, key or not, so seeding never bills a provider",
        )

    def handle(self, *args, with_model: bool = False, **options) -> None:
        with contextlib.nullcontext() if with_model else scripted_seeding():
            self._seed()

    def _seed(self) -> None:
        ctx = SeedContext(actor=Actor.system(), token_path=Path(settings.VAR_DIR) / DEMO_TOKEN_FILENAME)
        self.stdout.write("Seeding the demo data:")
        try:
            seeders = demo_seeders()
        except Exception:  # a demo module that does not import, or seeders that wait for each other
            self.stderr.write(f"the demo seeders could not be listed:\n{traceback.format_exc()}")
            self.stdout.write("  nothing seeded: the demo seeders could not be listed (see the error above)")
            return
        failed, skipped = [], []
        for outcome in run_seeders(ctx, seeders):
            self.stdout.write(f"  {outcome.line}")
            if outcome.status == "failed":
                failed.append(outcome.name)
                self.stderr.write(f"demo seeder {outcome.name!r} failed:\n{outcome.traceback}")
            elif outcome.status == "skipped":
                skipped.append(outcome.name)
        for note in ctx.notes:
            self.stdout.write(note)
        if failed:
            also = f" (skipped: {', '.join(skipped)})" if skipped else ""
            self.stdout.write(
                f"Demo seeders that failed: {', '.join(failed)}{also}. Waymark starts without that part of the "
                "demo; `manage.py seed_demo` (or the next start) tries it again."
            )
        logins = ", ".join(f"{u.username} ({u.description})" for u in DEMO_USERS)
        self.stdout.write(f'Demo logins, password "{DEMO_PASSWORD}": {logins}')
