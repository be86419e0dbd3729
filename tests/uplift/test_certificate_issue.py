"""Issuing a certificate in few statements (issue 26's benchmark): the split created, counted and locked by one
upsert, a refusal on an exhausted split rolled back inside the caller's transaction, the split's key and the
stored tasks' digest as defined (sha256 of the sorted distinct ids; sha256 of the columns' canonical JSON)."""

import hashlib
import json
import zlib

import pytest
from django.db import transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.services import Actor
from uplift import services
from uplift.core.certificate import ArmOutcome, PairedTask
from uplift.models import Certificate, HeldOutSplit, SplitDecision

pytestmark = pytest.mark.django_db
P, F = ArmOutcome(passed=True), ArmOutcome(passed=False)


def tasks(n=30):
    return [PairedTask(str(i), F if i % 7 == 0 else P, P, model="m") for i in range(n)]


def issue(candidate, paired=None):
    return services.certificate_issue(
        actor=Actor.system(),
        kind="procedure_version",
        parent_key="refund request",
        candidate_id=candidate,
        replaces_id="6",
        tasks=paired if paired is not None else tasks(),
        drawn_at=timezone.now(),
    )


def test_the_split_key_is_the_digest_of_the_sorted_distinct_ids_whatever_their_order():
    ids = ["10", "9", "b", "a", "9", "100"]
    expected = hashlib.sha256("\n".join(sorted(set(ids))).encode()).hexdigest()
    assert services.split_key(ids) == services.split_key(reversed(ids)) == expected


def test_one_statement_creates_counts_and_locks_the_split_and_the_stored_tasks_keep_their_digest():
    from django.db import connection

    with CaptureQueriesContext(connection) as queries:
        first = issue("7")
    split_statements = [q["sql"] for q in queries.captured_queries if "uplift_heldoutsplit" in q["sql"]]
    assert len(split_statements) == 1 and "ON CONFLICT" in split_statements[0]
    second = issue("8")
    split = HeldOutSplit.objects.get()
    assert (first.decision_number, second.decision_number, split.decisions, split.task_count) == (1, 2, 2, 30)
    assert split.key == services.split_key(str(i) for i in range(30))
    canonical = json.dumps(
        json.loads(zlib.decompress(bytes(first.tasks_packed))),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode()
    assert canonical == zlib.decompress(bytes(first.tasks_packed))
    document = {
        "kind": "procedure_version",
        "candidate_id": "7",
        "replaces_id": "6",
        "split": split.key,
        "decision_number": 1,
        "policy": first.policy,
        "passed": first.passed,
        "totals": first.totals,
        "tasks": "sha256:" + hashlib.sha256(canonical).hexdigest(),
    }
    assert first.digest == services._digest(document)
    assert [row["outcome"] for row in first.rows][:2] == ["repair", "both_passed"]


def test_an_exhausted_split_refuses_inside_the_callers_transaction_and_leaves_its_count():
    services.policy_set(actor=Actor.system(), kind="procedure_version", max_decisions=1)
    issue("7")
    with transaction.atomic():
        with pytest.raises(services.SplitExhausted, match="has had 1 decisions"):
            issue("8")
        assert HeldOutSplit.objects.get().decisions == 1  # the caller's transaction goes on
    assert HeldOutSplit.objects.get().decisions == 1 and SplitDecision.objects.count() == 1
    assert list(Certificate.objects.values_list("candidate_id", flat=True)) == ["7"]
