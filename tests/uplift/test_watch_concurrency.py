"""Two workers looking at one watch at the same moment (PostgreSQL, own connections): the rollback happens once."""

import pytest
from django.db import transaction

from accounts.models import AuditEvent
from accounts.services import Actor
from procedures.mining import intent_key
from procedures.models import Procedure, VersionStatus
from procedures.promotable import KIND
from reviews import registry
from reviews.models import Activation
from tests.helpers.concurrency import run_at_once
from tests.procedures.factories import REFUND, stored_version
from tests.trajectories.factories import ingest, run_item
from uplift import watch_services
from uplift.models import Watch

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_two_workers_at_once_roll_the_canary_back_once(settings):
    settings.WAYMARK_WATCH_MIN_RUNS = 20
    procedure = Procedure.objects.create(intent=intent_key(REFUND), title="refund")
    v1 = stored_version(procedure, "lookup_policy", number=1, status=VersionStatus.ACTIVE)
    Procedure.objects.filter(pk=procedure.pk).update(active_version=v1)
    v2 = stored_version(procedure, "issue_refund", number=2)
    with transaction.atomic():
        registry.get_kind(KIND).start_canary(
            actor=Actor.system(), candidate_id=str(v2.pk), expected_active_id=str(v1.pk), share=0.5
        )
        watch = watch_services.watch_start(
            actor=Actor.system(), kind=KIND, parent_key=str(procedure.pk), candidate_id=str(v2.pk),
            control_id=str(v1.pk), mode="canary", share=0.5, request_id=None,
        )  # fmt: skip
    for version, good in ((v1, 180), (v2, 100)):
        revision = version.content_revision
        outcomes = ["success" if i < good else "failure" for i in range(200)]
        ingest(*[run_item(intent=REFUND, procedure_revision=revision, outcome=outcome) for outcome in outcomes])
    results = run_at_once(
        [lambda n=n: watch_services.watch_look(watch_id=watch.pk, worker=f"worker-{n}") for n in range(4)]
    )
    assert not [r for r in results if isinstance(r, Exception)], results
    assert Watch.objects.get(pk=watch.pk).status == Watch.Status.ROLLED_BACK
    assert AuditEvent.objects.filter(verb="promotion.rollback_automatic").count() == 1
    assert Activation.objects.filter(version_id=str(v1.pk)).count() == 1
    assert Procedure.objects.get(pk=procedure.pk).active_version_id == v1.pk
