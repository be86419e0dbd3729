"""A certificate's digest is common.canonical's (issue 28, item 6), and the digests of certificates stored before still
verify: for every shape of document certificate_issue writes (tasks graded or not, none comparable, unanswered,
critical breakages, text beyond ASCII, each policy mode), the document rebuilt from the stored row has the same bytes
under the shared canonical form as under the form the digest was taken over before (`json.dumps(..., default=str)`,
NaN allowed), and its digest is the stored one. No value in it needs `default=str` or NaN."""

import hashlib
import json
import math
import zlib

import pytest
from django.utils import timezone

from accounts.services import Actor
from common.canonical import canonical_json, digest
from uplift import services
from uplift.core.certificate import ArmOutcome, PairedTask
from uplift.models import Certificate

pytestmark = pytest.mark.django_db
P, F, SILENT = ArmOutcome(passed=True), ArmOutcome(passed=False), ArmOutcome(answered=False)


def legacy_bytes(document) -> bytes:
    """The form certificates' digests were taken over before the shared one."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode()


def stored_document(row: Certificate) -> dict:
    """The document a stored certificate's digest stands on, rebuilt from its row as read back from the database."""
    tasks = zlib.decompress(bytes(row.tasks_packed))
    return {
        "kind": row.kind,
        "candidate_id": row.candidate_id,
        "replaces_id": row.replaces_id,
        "split": row.split.key,
        "decision_number": row.decision_number,
        "policy": row.policy,
        "passed": row.passed,
        "totals": row.totals,
        "tasks": "sha256:" + hashlib.sha256(tasks).hexdigest(),
    }


def plain_json_values(value) -> bool:
    """Only what JSON holds as itself: no value `default=str` would have written, no NaN or infinity."""
    if isinstance(value, dict):
        return all(isinstance(key, str) and plain_json_values(item) for key, item in value.items())
    if isinstance(value, list):
        return all(map(plain_json_values, value))
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, str | int | bool)


SHAPES = {
    "passes and failures, ungraded": [PairedTask(str(i), F if i % 7 == 0 else P, P, model="m") for i in range(30)],
    "graded scores": [
        PairedTask(f"t{i}", ArmOutcome(passed=True, score=i / 31), ArmOutcome(passed=i % 3 > 0, score=1 / (i + 3)))
        for i in range(25)
    ],
    "nothing comparable": [PairedTask(f"t{i}", SILENT, P) for i in range(12)],
    "unanswered and critical breakages": [
        *(PairedTask(f"t{i}", P, P, model="gpt-x") for i in range(15)),
        PairedTask("lost", P, SILENT, model="gpt-x"),
        PairedTask("broken", P, F, critical=True, model="gpt-y"),
    ],
    "text beyond ASCII and quotes": [
        PairedTask(f'tâche "{i}" \\ 模型', P if i % 2 else F, P, model="modèle-é") for i in range(12)
    ],
}


def issue(candidate: str, tasks, *, replaces_id: str | None = "6") -> Certificate:
    row = services.certificate_issue(
        actor=Actor.system(),
        kind="procedure_version",
        parent_key="refund request",
        candidate_id=candidate,
        replaces_id=replaces_id,
        tasks=tasks,
        drawn_at=timezone.now(),
    )
    return Certificate.objects.select_related("split").get(pk=row.pk)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mode", ["non_inferiority", "superiority"])
def test_every_stored_certificate_shape_has_the_same_bytes_and_its_digest_verifies(shape, mode):
    services.policy_set(actor=Actor.system(), kind="procedure_version", mode=mode, margin=0.035, alpha=0.1, min_n=3)
    replaced = issue("7", SHAPES[shape])
    first = issue("8", SHAPES[shape], replaces_id=None)  # against no artifact: replaces_id ""

    for row in (replaced, first):
        document = stored_document(row)
        assert plain_json_values(document), document
        assert canonical_json(document).encode("utf-8") == legacy_bytes(document)
        assert row.digest == digest(document) == "sha256:" + hashlib.sha256(legacy_bytes(document)).hexdigest()
    assert replaced.digest != first.digest


def test_a_certificate_with_nothing_comparable_holds_no_nan():
    row = issue("7", SHAPES["nothing comparable"])
    assert row.totals["n"] == 0
    assert row.totals["success"]["mean"] is None and row.totals["score"]["mean"] is None
    assert all(math.isfinite(row.totals[metric][bound]) for metric in ("success", "score") for bound in ("low", "high"))


def test_the_shared_form_refuses_what_the_old_one_wrote_silently():
    """A value no certificate holds today would now fail the issue instead of being digested as a string or NaN."""
    with pytest.raises(ValueError):
        services._digest({"mean": float("nan")})
    with pytest.raises(TypeError):
        services._digest({"at": timezone.now()})
