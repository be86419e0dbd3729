"""Issuing certificates: one decision on the split each, taken at the split's next level; an exhausted split
refuses and writes nothing; critical tags and the policy in force are applied; two gates deciding on one split at
once get consecutive decisions (PostgreSQL)."""

import pytest
from django.utils import timezone

from accounts.models import AuditEvent
from accounts.roles import Role
from accounts.services import Actor
from tests.factories import user_with
from tests.helpers.concurrency import run_at_once
from uplift import services
from uplift.core.certificate import ArmOutcome, PairedTask
from uplift.core.reuse import alpha_for
from uplift.models import Certificate, HeldOutSplit, SplitDecision

pytestmark = pytest.mark.django_db
P, F = ArmOutcome(passed=True), ArmOutcome(passed=False)


def tasks(repairs=12, breakages=1, ties=40):
    rows = [PairedTask(f"{i}", F, P) for i in range(repairs)]
    rows += [PairedTask(f"{100 + i}", P, F) for i in range(breakages)]
    rows += [PairedTask(f"{200 + i}", P, P) for i in range(ties)]
    return rows


def issue(candidate="7", paired=None, **options):
    return services.certificate_issue(
        actor=options.pop("actor", Actor.system()),
        kind="procedure_version",
        parent_key="refund request",
        candidate_id=candidate,
        replaces_id=options.pop("replaces_id", "6"),
        tasks=paired if paired is not None else tasks(),
        drawn_at=timezone.now(),
        **options,
    )


def test_a_certificate_is_one_decision_on_its_split_at_the_splits_next_level():
    first = issue("7")
    second = issue("8")
    assert (first.decision_number, second.decision_number) == (1, 2)
    assert first.split_id == second.split_id and HeldOutSplit.objects.get().decisions == 2
    assert first.alpha == pytest.approx(alpha_for(1, 0.05)) and second.alpha == pytest.approx(alpha_for(2, 0.05))
    assert first.passed and first.totals["repairs"] == 12 and first.totals["breakages"] == 1
    assert first.sentence.startswith("With 97% confidence the candidate is no worse than the version it replaces")
    assert first.digest.startswith("sha256:") and first.digest != second.digest
    assert list(SplitDecision.objects.values_list("number", "subject")) == [
        (1, "procedure_version:7"),
        (2, "procedure_version:8"),
    ]
    assert AuditEvent.objects.filter(verb="certificate.issue").count() == 2


def test_another_set_of_held_out_tasks_is_another_split():
    issue("7")
    other = issue("8", paired=tasks(repairs=11))
    assert other.decision_number == 1 and HeldOutSplit.objects.count() == 2


def test_an_exhausted_split_refuses_a_new_certificate_and_writes_nothing():
    services.policy_set(actor=Actor.system(), kind="procedure_version", max_decisions=2)
    issue("7")
    issue("8")
    with pytest.raises(services.SplitExhausted, match="fresh held-out runs"):
        issue("9")
    assert Certificate.objects.count() == 2 and HeldOutSplit.objects.get().decisions == 2
    assert not Certificate.objects.filter(candidate_id="9").exists()


def test_a_critical_breakage_blocks_and_a_parent_policy_wins_over_the_kinds():
    services.critical_task_tag(
        actor=Actor.system(), kind="procedure_version", parent_key="refund request", task_key="100", reason="VIP"
    )
    blocked = issue("7")
    assert not blocked.passed and blocked.totals["critical_breakages"] == ["100"]
    services.critical_task_untag(
        actor=Actor.system(), kind="procedure_version", parent_key="refund request", task_key="100"
    )
    services.policy_set(actor=Actor.system(), kind="procedure_version", mode="superiority")
    services.policy_set(actor=Actor.system(), kind="procedure_version", parent_key="refund request", min_n=500)
    small = issue("8")
    assert not small.passed and any("at least 500" in reason for reason in small.reasons)
    assert (small.policy["mode"], small.policy["min_n"]) == ("superiority", 500)  # started from the kind's policy
    other = services.certificate_issue(
        actor=Actor.system(),
        kind="procedure_version",
        parent_key="cancel order",
        candidate_id="9",
        replaces_id="6",
        tasks=tasks(),
        drawn_at=timezone.now(),
    )
    assert other.policy["min_n"] == 10 and other.policy["mode"] == "superiority"  # the kind's, for other parents


def test_a_first_version_is_certified_against_no_artifact():
    first = issue("7", replaces_id=None)
    assert first.replaces_id == "" and "than no artifact at all" in first.sentence


def test_a_certificate_cannot_be_changed_once_issued():
    certificate = issue("7")
    certificate.passed = not certificate.passed
    with pytest.raises(ValueError, match="immutable"):
        certificate.save()


def test_bad_policies_and_tags_are_refused_cleanly():
    with pytest.raises(services.UpliftInvalid, match="margin"):
        services.policy_set(actor=Actor.system(), kind="procedure_version", margin=-1)
    with pytest.raises(services.UpliftInvalid, match="unknown policy fields"):
        services.policy_set(actor=Actor.system(), kind="procedure_version", colour="blue")
    with pytest.raises(services.UpliftInvalid):
        services.critical_task_tag(actor=Actor.system(), kind="k", parent_key="p", task_key=" ")
    with pytest.raises(services.UpliftInvalid, match="at least one"):
        issue("7", paired=[])


def test_an_evolution_round_scored_on_a_split_counts_against_its_budget():
    operator = user_with(Role.OPERATOR)
    first = issue("7", actor=Actor(user=operator))
    services.split_decision_record(
        actor=Actor.system(),
        kind="procedure_version",
        parent_key="refund request",
        task_ids=[t.task_id for t in tasks()],
        drawn_at=timezone.now(),
        what="evolution_round",
        subject="graphs.evolutionround:3:1",
        alpha=0.05,
        passed=False,
    )
    assert issue("8").decision_number == 3 and first.created_by == operator


@pytest.mark.postgres
def test_two_gates_deciding_on_one_split_at_once_get_consecutive_decisions(transactional_db):
    results = run_at_once([lambda: issue("7"), lambda: issue("8")])
    assert all(isinstance(result, Certificate) for result in results), results
    assert sorted(result.decision_number for result in results) == [1, 2]
    assert HeldOutSplit.objects.get().decisions == 2
