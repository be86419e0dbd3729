"""The certification page: policies set by operators (audited), refused for others with 403, bad values re-rendered
with the message and nothing written; critical tasks tagged and untagged; a certificate's page lists every pair and
its split's ledger; re-certification from the page says what was started or why not."""

import pytest
from django.urls import reverse
from django.utils import timezone

from accounts.models import AuditEvent
from accounts.services import Actor
from tests.conftest import logged_in
from uplift import services
from uplift.core.certificate import ArmOutcome, PairedTask
from uplift.models import CertificationPolicy, CriticalTask

pytestmark = pytest.mark.django_db
KIND = "procedure_version"
P, F = ArmOutcome(passed=True, run_id=11), ArmOutcome(passed=False, run_id=12)


def post(user, name, data):
    client = logged_in(user)
    client.get(reverse("uplift:policies"))
    return client.post(reverse(name), {"csrfmiddlewaretoken": client.cookies["csrftoken"].value, **data})


def test_an_operator_sets_a_policy_and_it_is_audited(operator):
    response = post(
        operator, "uplift:policies", {"kind": KIND, "parent_key": "3", "mode": "superiority", "min_n": "25"}
    )
    assert response.status_code == 302
    row = CertificationPolicy.objects.get(kind=KIND, parent_key="3")
    assert (row.mode, row.min_n, row.margin) == ("superiority", 25, 0.02)
    assert AuditEvent.objects.filter(verb="certification_policy.set").count() == 1
    page = logged_in(operator).get(reverse("uplift:policies")).content.decode()
    assert "superiority" in page and "non-inferiority: the lower bound" in page  # the row and the default's sentence


def test_a_bad_policy_is_refused_with_the_reason_and_writes_nothing(operator):
    for data in ({"kind": KIND, "margin": "2"}, {"kind": KIND, "min_n": "many"}, {"kind": "nothing", "min_n": "3"}):
        response = post(operator, "uplift:policies", data)
        assert response.status_code == 400 and "The policy was not set" in response.content.decode()
    assert not CertificationPolicy.objects.exists()


def test_reviewers_and_readers_may_not_set_policies_or_tag(reviewer, viewer):
    for user in (reviewer, viewer):
        assert post(user, "uplift:policies", {"kind": KIND, "min_n": "3"}).status_code == 403
        assert post(user, "uplift:critical", {"kind": KIND, "parent_key": "3", "task_key": "41"}).status_code == 403
        assert post(user, "uplift:recertify", {"kind": KIND, "candidate_id": "1"}).status_code == 403
    assert not CertificationPolicy.objects.exists() and not CriticalTask.objects.exists()


def test_an_operator_tags_and_untags_a_critical_task(operator):
    assert post(operator, "uplift:critical", {"kind": KIND, "parent_key": "3", "task_key": "41"}).status_code == 302
    assert CriticalTask.objects.get().task_key == "41"
    assert "<code>41</code>" in logged_in(operator).get(reverse("uplift:policies")).content.decode()
    data = {"kind": KIND, "parent_key": "3", "task_key": "41", "untag": "1"}
    assert post(operator, "uplift:critical", data).status_code == 302
    assert not CriticalTask.objects.exists()
    refused = post(operator, "uplift:critical", {"kind": KIND, "parent_key": "3", "task_key": ""})
    assert refused.status_code == 400


def test_a_recertification_that_cannot_start_says_why(operator):
    client = logged_in(operator)
    client.get(reverse("uplift:policies"))
    data = {"csrfmiddlewaretoken": client.cookies["csrftoken"].value, "kind": KIND, "candidate_id": "987654"}
    response = client.post(reverse("uplift:recertify"), data)
    assert response.status_code == 302
    page = client.get(response["Location"]).content.decode()
    assert "Not started" in page and "987654" in page


def test_the_certificate_page_lists_every_pair_and_the_splits_ledger(viewer, django_assert_max_num_queries):
    tasks = [PairedTask("1", F, P), PairedTask("2", P, F, critical=True), PairedTask("3", P, P)]
    certificate = services.certificate_issue(
        actor=Actor.system(), kind=KIND, parent_key="3", candidate_id="9", replaces_id="8", tasks=tasks,
        drawn_at=timezone.now(),
    )  # fmt: skip
    client = logged_in(viewer)
    with django_assert_max_num_queries(8):
        page = client.get(reverse("uplift:certificate", args=[certificate.pk])).content.decode()
    assert certificate.sentence in page and "Compare #11 with #12" in page and "Compare #12 with #11" in page
    assert "critical" in page and "decision 1 on split" in page and "procedure_version:9" in page
    assert client.get(reverse("uplift:certificate", args=[987654])).status_code == 404
