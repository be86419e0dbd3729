"""`manage.py seed_demo`: the demo users, role groups, an agent token and demo data. Safe to run again and again.

The command runs the demo seeders the apps register (config.demo_seeding) in dependency order; each takes the shared
`SeedContext` and returns one summary line. It imports no app's demo module: an app adds its demo data by
registering a seeder in its own `demo.py`.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from accounts.demo import DEMO_PASSWORD, DEMO_TOKEN_FILENAME, DEMO_USERS
from accounts.services import Actor
from config.demo_seeding import SeedContext, demo_seeders


class Command(BaseCommand):
    help = "Create the demo users (password 'waymark-demo'), an agent token and demo runs. Idempotent."

    def handle(self, *args, **options) -> None:
        ctx = SeedContext(actor=Actor.system(), token_path=Path(settings.VAR_DIR) / DEMO_TOKEN_FILENAME)
        self.stdout.write("Seeding the demo data:")
        for seeder in demo_seeders():
            self.stdout.write(f"  {seeder.step(ctx)}")
        for note in ctx.notes:
            self.stdout.write(note)
        logins = ", ".join(f"{u.username} ({u.description})" for u in DEMO_USERS)
        self.stdout.write(f'Demo logins, password "{DEMO_PASSWORD}": {logins}')
