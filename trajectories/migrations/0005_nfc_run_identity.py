"""Runs stored before run identity was compared in NFC get their identity normalized, so a resend in either
spelling finds them. A run whose NFC identity another run already holds keeps its stored spelling (two stored runs
are never merged); docs/decisions.md."""

import unicodedata

from django.db import migrations


def _nfc(value: str) -> str:
    return unicodedata.normalize("NFC", value).strip()


def normalize_identities(apps, schema_editor):
    Run = apps.get_model("trajectories", "Run")
    rows = Run.objects.order_by("pk").values_list("pk", "source", "external_id").iterator(chunk_size=2000)
    changes = [
        (pk, _nfc(source), _nfc(external_id))
        for pk, source, external_id in rows
        if (_nfc(source), _nfc(external_id)) != (source, external_id)
    ]
    for pk, source, external_id in changes:
        if not source or not external_id:
            continue
        if Run.objects.filter(source=source, external_id=external_id).exists():
            continue  # the NFC spelling is another stored run: keep both as they are
        Run.objects.filter(pk=pk).update(source=source, external_id=external_id)


class Migration(migrations.Migration):
    dependencies = [("trajectories", "0004_explorer")]

    operations = [migrations.RunPython(normalize_identities, migrations.RunPython.noop, elidable=True)]
