"""manage.py import_trajectories FILE --format jsonl|openai-chat [--source NAME]: idempotent import."""

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from accounts.services import Actor
from trajectories.importers import FORMATS, ImportFormatError, read_run_items
from trajectories.services import IngestInvalid, run_ingest_batch, validate_ingest_items


def _location(loc: list) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


class Command(BaseCommand):
    help = "Import runs from a file through the ingest service (same validation as the API; re-imports add nothing)."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--format", dest="fmt", choices=FORMATS, required=True)
        parser.add_argument("--source", default=None, help="source name for every run (default for openai-chat)")

    def handle(self, *args, file: Path, fmt: str, source: str | None, **options):
        try:
            items = read_run_items(file, fmt=fmt, source=source)
            validate_ingest_items(items)
        except ImportFormatError as exc:
            raise CommandError(str(exc), returncode=2)
        except IngestInvalid as exc:
            first = exc.errors[0]
            raise CommandError(f"{_location(first['loc'])}: {first['msg']} (nothing imported)", returncode=2)
        chunk = settings.WAYMARK_INGEST_MAX_RUNS
        created = existing = steps = 0
        actor = Actor.system()
        for start in range(0, len(items), chunk):
            result = run_ingest_batch(actor=actor, items=items[start : start + chunk])
            created, existing, steps = created + result.created, existing + result.existing, steps + result.step_count
        self.stdout.write(f"{len(items)} runs read: {created} created ({steps} steps), {existing} already present")
