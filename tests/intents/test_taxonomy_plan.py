"""The draft plan (pure): which judged candidates enter the next version, and intent ids that never change."""

import pytest

from intents.taxonomy.services import CandidateSummary, Decided, mint_intent_id, plan_draft, run_index
from reviews.errors import Invalid


def decided(cid: str, label: str, *, valid=2, invalid=0, merge=0, target="") -> Decided:
    total = valid + invalid + merge
    agreement = max(valid + merge, invalid) / total if total else 0.0
    summary = CandidateSummary(
        candidate_id=cid, valid=valid, invalid=invalid, merge=merge, agreement=agreement, merge_target=target
    )
    return Decided(candidate_id=cid, label=label, summary=summary)


def by_label(plan):
    return {row["label"]: row for row in plan.intents}


def test_a_valid_candidate_founds_a_new_intent_with_a_minted_id():
    plan = plan_draft([], [decided("c1", "Reset password")])
    (intent,) = plan.intents
    assert intent["intent_id"] == mint_intent_id("c1", [])
    assert intent["intent_id"].startswith("intent:") and len(intent["intent_id"]) == len("intent:") + 12
    assert intent["normalized"] == "reset password" and intent["candidate_ids"] == ["c1"]
    assert [c["change"] for c in plan.changes] == ["added"]


def test_a_valid_candidate_joins_the_intent_with_its_normalized_label():
    first = plan_draft([], [decided("c1", "Reset password")]).intents
    plan = plan_draft(first, [decided("c2", "reset_password!!")])
    (intent,) = plan.intents
    assert intent["intent_id"] == first[0]["intent_id"]
    assert intent["candidate_ids"] == ["c1", "c2"] and intent["aliases"] == []
    assert plan.changes[0]["change"] == "merged" and plan.changes[0]["reason"] == "same normalized label"


def test_two_new_candidates_with_one_label_found_one_intent():
    plan = plan_draft([], [decided("c2", "Book flight"), decided("c1", "book  flight")])
    (intent,) = plan.intents
    assert intent["candidate_ids"] == ["c1", "c2"] and intent["intent_id"] == mint_intent_id("c1", [])
    assert len(plan.changes) == 1 and plan.changes[0]["candidate_ids"] == ["c1", "c2"]


def test_a_merge_adds_an_alias_and_keeps_the_target_id():
    active = plan_draft([], [decided("c1", "Reset password")]).intents
    target = active[0]["intent_id"]
    plan = plan_draft(active, [decided("c2", "Recover account access", valid=0, merge=2, target=target)])
    (intent,) = plan.intents
    assert intent["intent_id"] == target
    assert intent["aliases"] == ["Recover account access"] and intent["candidate_ids"] == ["c1", "c2"]
    assert plan.changes[0]["change"] == "merged" and plan.changes[0]["alias_added"] == "Recover account access"


def test_a_merge_into_an_unknown_intent_is_skipped():
    plan = plan_draft([], [decided("c1", "x", valid=0, merge=2, target="intent:nope")])
    assert plan.intents == [] and plan.skipped == [{"candidate_id": "c1", "reason": "unknown merge target"}]


def test_valid_and_merge_tied_goes_to_the_merge():
    active = plan_draft([], [decided("c1", "Reset password")]).intents
    plan = plan_draft(active, [decided("c2", "Unlock account", valid=1, merge=1, target=active[0]["intent_id"])])
    assert len(plan.intents) == 1 and plan.intents[0]["aliases"] == ["Unlock account"]


def test_invalid_and_undecided_candidates_are_left_out():
    plan = plan_draft(
        [],
        [
            decided("c1", "Nonsense", valid=0, invalid=2),
            decided("c2", "Disputed", valid=1, invalid=1),
            decided("c3", "Lonely", valid=1),
        ],
    )
    assert plan.intents == [] and plan.left_out == ["c1"] and plan.changes == []


def test_a_label_edit_keeps_the_id_and_the_old_label_becomes_an_alias():
    active = plan_draft([], [decided("c1", "Reset pw")]).intents
    intent_id = active[0]["intent_id"]
    plan = plan_draft(active, [], {intent_id: "Reset password"})
    (intent,) = plan.intents
    assert intent["intent_id"] == intent_id and intent["label"] == "Reset password"
    assert intent["aliases"] == ["Reset pw"]
    assert plan.changes == [
        {"change": "relabelled", "intent_id": intent_id, "before": "Reset pw", "after": "Reset password"}
    ]


def test_ids_survive_a_label_edit_then_a_merge_then_a_join():
    v1 = plan_draft([], [decided("c1", "Reset pw"), decided("c9", "Book flight")]).intents
    ids = {row["label"]: row["intent_id"] for row in v1}
    v2 = plan_draft(v1, [], {ids["Reset pw"]: "Reset password"}).intents
    v3 = plan_draft(v2, [decided("c2", "Unlock account", valid=0, merge=3, target=ids["Reset pw"])]).intents
    v4 = plan_draft(v3, [decided("c3", "reset PW")]).intents  # an alias's label joins too
    assert {row["intent_id"] for row in v4} == set(ids.values())
    reset = by_label(plan_draft(v4, [])).get("Reset password")
    assert reset["intent_id"] == ids["Reset pw"] and reset["candidate_ids"] == ["c1", "c2", "c3"]


def test_a_label_edit_may_not_take_another_intents_name():
    active = plan_draft([], [decided("c1", "Reset password"), decided("c2", "Book flight")]).intents
    book = next(row for row in active if row["label"] == "Book flight")
    with pytest.raises(Invalid, match="already names"):
        plan_draft(active, [], {book["intent_id"]: "reset  password"})
    with pytest.raises(Invalid):
        plan_draft(active, [], {"intent:unknown": "x"})
    with pytest.raises(Invalid):
        plan_draft(active, [], {book["intent_id"]: "___"})


def test_candidates_already_placed_change_nothing():
    active = plan_draft([], [decided("c1", "Reset password")]).intents
    plan = plan_draft(active, [decided("c1", "Reset password")])
    assert plan.changes == [] and plan.intents == active


def test_minting_is_deterministic_and_avoids_collisions():
    first = mint_intent_id("c1", [])
    assert mint_intent_id("c1", []) == first
    assert mint_intent_id("c1", [first]) != first and mint_intent_id("c1", [first]).startswith(first)


def test_a_runs_reviewed_intent_is_the_one_most_candidates_give_it():
    intents = [
        {"intent_id": "intent:b", "candidate_ids": ["c1", "c2"]},
        {"intent_id": "intent:a", "candidate_ids": ["c3"]},
    ]
    index = run_index(intents, {"c1": [1, 2], "c2": [1], "c3": [1, 2, 3]})
    assert index == {1: "intent:b", 2: "intent:a", 3: "intent:a"}  # run 2: a tie, the smaller id
