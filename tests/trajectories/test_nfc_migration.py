"""Migration 0005: runs stored before identity was compared in NFC are renamed to their NFC spelling, unless that
spelling is another stored run (never merged); a resend in either spelling then finds the renamed run."""

import importlib
import unicodedata

from django.apps import apps

from trajectories.models import Run

migration = importlib.import_module("trajectories.migrations.0005_nfc_run_identity")
DECOMPOSED = unicodedata.normalize("NFD", "café-é")
COMPOSED = unicodedata.normalize("NFC", "café-é")


def test_old_decomposed_identities_are_normalized_unless_the_nfc_spelling_is_taken(db, api_client, make_agent_token):
    assert DECOMPOSED != COMPOSED
    renamed = Run.objects.create(source=DECOMPOSED, external_id=f"id-{DECOMPOSED}")
    kept = Run.objects.create(source="s", external_id=DECOMPOSED)
    holder = Run.objects.create(source="s", external_id=COMPOSED)
    untouched = Run.objects.create(source="plain", external_id="ascii")

    migration.normalize_identities(apps, None)

    renamed.refresh_from_db()
    kept.refresh_from_db()
    assert (renamed.source, renamed.external_id) == (COMPOSED, f"id-{COMPOSED}")
    assert kept.external_id == DECOMPOSED  # its NFC spelling is `holder`: both stay as they were
    assert Run.objects.get(pk=holder.pk).external_id == COMPOSED
    assert Run.objects.get(pk=untouched.pk).external_id == "ascii"

    token = make_agent_token("trajectories:write")
    run = {"source": DECOMPOSED, "external_id": f"id-{DECOMPOSED}", "outcome": "success", "steps": []}
    response = api_client.post("/api/v1/trajectories", {"runs": [run]}, token=token)
    assert response.status_code in (200, 201), response.content
    assert response.json()["existing_ids"] == [renamed.pk]
    assert Run.objects.count() == 4
