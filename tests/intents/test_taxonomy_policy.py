# ruff: noqa: F811 (pytest fixtures imported from tests.intents.taxonomy_fixtures are test arguments)
"""Review policy of the intent taxonomy: independent judgments of candidates, drafts, and activation through the
promotion policy (two approvals from others, stale expected revision answered 409)."""

import pytest

from accounts.models import AuditEvent
from accounts.roles import RoleRequired
from intents.models import IntentJudgment, IntentTaxonomy, TaxonomyActivation, TaxonomyRunIntent, TaxonomyVersion
from intents.taxonomy import selectors as taxonomy_selectors
from intents.taxonomy.services import taxonomy_draft, taxonomy_propose
from reviews import activations
from reviews.errors import Conflict, Invalid, NotAllowed
from reviews.models import PromotionStatus
from reviews.registry import get_kind
from reviews.services import judgment_submit, promotion_propose
from tests.intents.taxonomy_fixtures import (  # noqa: F401 (fixtures)
    act,
    activate_draft,
    judge,
    make_candidate,
    make_run,
    oscar,
    otto,
    rita,
    rob,
    ruth,
    vera,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs(db):
    return [make_run(n, intent="reset_password") for n in range(1, 5)]


@pytest.fixture
def reset(runs):
    return make_candidate("Reset password", runs[:2])


# --- judgments -------------------------------------------------------------------------------------------------------
def test_the_person_who_posted_a_candidate_cannot_judge_it(runs, rita):
    mine = make_candidate("Reset password", runs[:1], source=f"client:{rita.pk}", by=rita)
    with pytest.raises(NotAllowed) as caught:
        judge(mine, "valid", rita)
    assert caught.value.code == "proposer_cannot_judge" and not IntentJudgment.objects.exists()


def test_the_same_candidate_from_another_source_is_still_the_posters(runs, rita, rob):
    model_copy = make_candidate("Reset password", runs[:1])
    client_copy = make_candidate("Reset password", runs[:1], source=f"client:{rita.pk}", by=rita)
    assert model_copy.candidate_id == client_copy.candidate_id
    with pytest.raises(NotAllowed):
        judge(model_copy, "valid", rita)
    judge(client_copy, "valid", rob)
    with pytest.raises(Conflict):  # one judgment per reviewer per candidate id, whichever copy
        judge(model_copy, "invalid", rob)


def test_one_judgment_per_reviewer(reset, rita):
    judge(reset, "valid", rita)
    with pytest.raises(Conflict) as caught:
        judge(reset, "invalid", rita)
    assert caught.value.status == 409 and IntentJudgment.objects.count() == 1


def test_judging_needs_the_reviewer_role(reset, vera):
    with pytest.raises(RoleRequired):
        judge(reset, "valid", vera)


def test_a_verdict_must_be_known_and_a_merge_must_name_an_active_intent(reset, rita):
    with pytest.raises(Invalid):
        judge(reset, "maybe", rita)
    with pytest.raises(Invalid) as caught:
        judge(reset, "merge", rita, target="")
    assert caught.value.code == "merge_target_required"
    with pytest.raises(Invalid) as caught:
        judge(reset, "merge", rita, target="intent:nothing")
    assert caught.value.code == "unknown_merge_target"


def test_judgments_are_hidden_until_ones_own_is_recorded(reset, rita, rob, vera):
    judge(reset, "valid", rita)
    seen_by_rob = taxonomy_selectors.judgments_for(rob, reset)
    assert seen_by_rob.count is None and seen_by_rob.visible is None and seen_by_rob.mine is None  # not even how many
    seen_by_vera = taxonomy_selectors.judgments_for(vera, reset)  # cannot judge: the count only
    assert seen_by_vera.visible is None and seen_by_vera.count == 1
    judge(reset, "invalid", rob)
    seen_by_rob = taxonomy_selectors.judgments_for(rob, reset)
    assert [j.verdict for j in seen_by_rob.visible] == ["valid", "invalid"]
    assert seen_by_rob.mine.verdict == "invalid"


def test_a_judgment_is_audited(reset, rita):
    judge(reset, "valid", rita)
    event = AuditEvent.objects.get(verb="intent_judgment.submit")
    assert event.after["verdict"] == "valid" and event.after["candidate_id"] == reset.candidate_id


def test_the_queue_lists_what_waits_for_the_reviewer(runs, reset, rita, rob):
    other = make_candidate("Book flight", runs[2:3])
    mine = make_candidate("Cancel trip", runs[3:], source=f"client:{rita.pk}", by=rita)
    copy = make_candidate("Reset password", runs[:2], source="client:99")  # the same candidate id: shown once
    assert copy.candidate_id == reset.candidate_id
    page = taxonomy_selectors.review_queue_for(rita)
    assert [row.pk for row in page.rows] == [reset.pk, other.pk] and mine.pk not in [r.pk for r in page.rows]
    judge(reset, "valid", rita)
    assert [row.pk for row in taxonomy_selectors.review_queue_for(rita).rows] == [other.pk]
    assert taxonomy_selectors.awaiting_count(rob) == 3


# --- drafts ----------------------------------------------------------------------------------------------------------
def test_a_draft_needs_two_judgments_with_two_thirds_agreement(runs, reset, rita, rob, ruth, otto):
    judge(reset, "valid", rita)
    with pytest.raises(Conflict) as caught:
        taxonomy_draft(actor=act(otto))
    assert caught.value.code == "no_changes"
    judge(reset, "invalid", rob)  # 1:1, agreement 0.5
    with pytest.raises(Conflict):
        taxonomy_draft(actor=act(otto))
    judge(reset, "valid", ruth)  # 2:1, agreement 2/3
    result = taxonomy_draft(actor=act(otto))
    (intent,) = result.version.intents
    assert intent["label"] == "Reset password" and intent["candidate_ids"] == [reset.candidate_id]
    assert intent["support"] == 2 and result.version.number == 1 and result.version.parent is None
    assert result.version.digest.startswith("sha256:")
    assert set(TaxonomyRunIntent.objects.values_list("run_id", flat=True)) == {runs[0].pk, runs[1].pk}


def test_drafting_needs_the_reviewer_or_operator_role(reset, rita, rob, vera):
    judge(reset, "valid", rita, rob)
    with pytest.raises(RoleRequired):
        taxonomy_draft(actor=act(vera))


def test_an_identical_draft_is_not_stored_twice(reset, rita, rob, otto):
    judge(reset, "valid", rita, rob)
    first = taxonomy_draft(actor=act(otto))
    again = taxonomy_draft(actor=act(otto))
    assert again.version.pk == first.version.pk and not again.created
    assert TaxonomyVersion.objects.count() == 1


# --- activation through the promotion policy -------------------------------------------------------------------------
def test_two_approvals_from_others_activate_a_version(reset, rita, rob, ruth, otto):
    judge(reset, "valid", rita, rob)
    version = taxonomy_draft(actor=act(otto)).version
    request = taxonomy_propose(actor=act(otto), version=version, rationale="first taxonomy")
    assert request.gate_passing is True and request.replaces_id is None
    with pytest.raises(NotAllowed):  # the proposer cannot approve
        judgment_submit(actor=act(otto), request=request, verdict="approve")
    request = judgment_submit(actor=act(rita), request=request, verdict="approve")
    assert request.status == PromotionStatus.OPEN
    assert taxonomy_selectors.active_version() is None
    request = judgment_submit(actor=act(ruth), request=request, verdict="approve")
    assert request.status == PromotionStatus.APPLIED
    taxonomy = IntentTaxonomy.objects.get()
    assert taxonomy.active_version_id == version.pk and taxonomy.revision == 1
    activation = TaxonomyActivation.objects.get()
    assert activation.version_id == version.pk and activation.replaced_id is None
    assert activation.request_id == request.pk and activation.activated_by == ruth
    assert AuditEvent.objects.filter(verb="intent_taxonomy.activate").count() == 1


def test_a_stale_expected_revision_is_answered_409(runs, reset, rita, rob, ruth, otto):
    judge(reset, "valid", rita, rob)
    v1, _ = activate_draft(otto, [rita, rob])
    book = make_candidate("Book flight", runs[2:3])
    judge(book, "valid", rita, rob)
    v2 = taxonomy_draft(actor=act(otto)).version
    request = taxonomy_propose(actor=act(otto), version=v2, rationale="add book flight")
    assert request.replaces_id == str(v1.pk)
    # meanwhile an admin-free path moves the pointer: a label edit version is approved first
    v3 = taxonomy_draft(actor=act(rob), relabels={v1.intents[0]["intent_id"]: "Reset a password"}).version
    other = taxonomy_propose(actor=act(rob), version=v3, rationale="relabel")
    judgment_submit(actor=act(rita), request=other, verdict="approve")
    judgment_submit(actor=act(ruth), request=other, verdict="approve")
    assert taxonomy_selectors.active_version().pk == v3.pk
    request.refresh_from_db()
    with pytest.raises(Conflict) as caught:
        judgment_submit(actor=act(rita), request=request, verdict="approve")
    assert caught.value.status == 409 and caught.value.code == "stale"
    request.refresh_from_db()
    assert request.status == PromotionStatus.SUPERSEDED
    assert taxonomy_selectors.active_version().pk == v3.pk


def test_activate_checks_the_expected_version_under_lock(reset, rita, rob, otto):
    from django.db import transaction

    from reviews.registry import StaleActivation

    judge(reset, "valid", rita, rob)
    v1, _ = activate_draft(otto, [rita, rob])
    with pytest.raises(StaleActivation), transaction.atomic():
        get_kind("intent_taxonomy").activate(actor=act(otto), candidate_id=str(v1.pk), expected_active_id=None)


def test_a_version_with_a_weak_candidate_has_a_failing_gate(reset, rita, rob, ruth, otto):
    judge(reset, "valid", rita, rob)
    version = taxonomy_draft(actor=act(otto)).version
    judge(reset, "invalid", ruth)  # a third judgment lowers agreement to 2/3: still passing
    assert get_kind("intent_taxonomy").gate_evidence(str(version.pk)).passing is True
    IntentJudgment.objects.filter(reviewer=ruth).delete()
    IntentJudgment.objects.filter(reviewer=rob).update(verdict="invalid")  # 1:1 now
    gate = get_kind("intent_taxonomy").gate_evidence(str(version.pk))
    assert gate.passing is False and "1 of 1" in gate.summary


def test_rollback_returns_to_the_previous_version(runs, reset, rita, rob, otto):
    judge(reset, "valid", rita, rob)
    v1, _ = activate_draft(otto, [rita, rob])
    book = make_candidate("Book flight", runs[2:3])
    judge(book, "valid", rita, rob)
    v2, _ = activate_draft(otto, [rita, rob])
    kind = get_kind("intent_taxonomy")
    assert activations.rollback_target("intent_taxonomy", "default", kind.current_active("default")) == str(v1.pk)
    request = promotion_propose(
        actor=act(otto), kind="intent_taxonomy", candidate_id=str(v1.pk), rationale="undo", is_rollback=True
    )
    judgment_submit(actor=act(rita), request=request, verdict="approve")
    judgment_submit(actor=act(rob), request=request, verdict="approve")
    assert taxonomy_selectors.active_version().pk == v1.pk
    assert TaxonomyActivation.objects.order_by("-id").first().is_rollback
    assert kind.current_active("default") == str(v1.pk) and v2.pk != v1.pk


def test_intent_ids_are_stable_across_label_edits_and_merges(runs, reset, rita, rob, ruth, otto):
    judge(reset, "valid", rita, rob)
    v1, _ = activate_draft(otto, [rita, ruth])
    intent_id = v1.intents[0]["intent_id"]
    v2, _ = activate_draft(otto, [rita, rob], relabels={intent_id: "Reset a password"})
    unlock = make_candidate("Unlock account", runs[2:3])
    judge(unlock, "merge", rita, rob, target=intent_id)
    v3, _ = activate_draft(otto, [rob, ruth])
    (intent,) = v3.intents
    assert intent["intent_id"] == intent_id and intent["label"] == "Reset a password"
    assert intent["aliases"] == ["Reset password", "Unlock account"]
    assert intent["candidate_ids"] == sorted([reset.candidate_id, unlock.candidate_id]) and intent["support"] == 3
    assert [c["change"] for c in v2.changes] == ["relabelled"] and [c["change"] for c in v3.changes] == ["merged"]
    run_intents = TaxonomyRunIntent.objects.filter(version=v3, run_id__in=[r.pk for r in runs])
    assert dict(run_intents.values_list("run_id", "intent_id")) == {r.pk: intent_id for r in runs[:3]}
