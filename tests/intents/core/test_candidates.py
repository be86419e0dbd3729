import dataclasses
import hashlib

import pytest

from intents.core import (
    INTENT_MINING_VERSION,
    IntentCandidate,
    IntentEvidence,
    IntentKind,
    parse_intent_candidates,
    parse_intent_reply,
)
from llm.core import MalformedModelOutput

from .conftest import make_run


def expected_id(kind: str, label: str, *spans: str) -> str:
    material = "\0".join([kind, label, *spans])
    return "intent:" + hashlib.sha256(material.encode("utf-8")).hexdigest()[:20]


def row(**overrides):
    base = {
        "intent": "Reset a password",
        "kind": "declared",
        "evidence": [{"trajectory_id": "t1", "start": 0, "end": 1}],
    }
    base.update(overrides)
    return base


def parse(runs, *rows):
    return parse_intent_candidates(runs, {"intents": list(rows)})


def test_a_well_formed_row_becomes_a_candidate(runs):
    (candidate,) = parse(
        runs,
        row(
            intent="  Reset_Password!! ",
            actual_outcome="password reset",
            limitations=["  only email ", "", "   "],
        ),
    )
    assert candidate.intent == "Reset_Password!!"
    assert candidate.kind is IntentKind.DECLARED
    assert candidate.evidence == (IntentEvidence(trajectory_id="t1", start=0, end=1),)
    assert candidate.actual_outcome == "password reset"
    assert candidate.limitations == ("only email",)
    assert candidate.schema_version == INTENT_MINING_VERSION == "trajectory-intents-v1"
    assert candidate.candidate_id == expected_id("declared", "reset password", "t1:0:1")
    assert len(candidate.candidate_id) == len("intent:") + 20


def test_evidence_is_deduplicated_and_sorted_by_triple(runs):
    evidence = [
        {"trajectory_id": "t2", "start": 1, "end": 4},
        {"trajectory_id": "t1", "start": 2, "end": 2},
        {"trajectory_id": "t2", "start": 1, "end": 2},
        {"trajectory_id": "t1", "start": 2, "end": 2},
        {"trajectory_id": "t1", "start": 0, "end": 2},
    ]
    (candidate,) = parse(runs, row(evidence=evidence))
    assert [item.key for item in candidate.evidence] == [("t1", 0, 2), ("t1", 2, 2), ("t2", 1, 2), ("t2", 1, 4)]
    assert candidate.candidate_id == expected_id("declared", "reset a password", "t1:0:2", "t1:2:2", "t2:1:2", "t2:1:4")
    assert candidate.trajectory_ids == ("t1", "t2")


def test_the_id_ignores_outcome_and_limitations_and_evidence_order(runs):
    a = [{"trajectory_id": "t1", "start": 0, "end": 1}, {"trajectory_id": "t2", "start": 0, "end": 0}]
    (first,) = parse(runs, row(evidence=a, actual_outcome="x", limitations=["y"]))
    (second,) = parse(runs, row(evidence=a[::-1], intent="RESET — a password"))
    assert first.candidate_id == second.candidate_id


def test_the_id_depends_on_kind(runs):
    declared, inferred = parse(runs, row(kind="declared"), row(kind="inferred"))
    assert declared.candidate_id != inferred.candidate_id


@pytest.mark.parametrize("kind", [None, "", 0, False])
def test_a_missing_or_empty_kind_means_inferred(runs, kind):
    data = row(kind=kind)
    (candidate,) = parse(runs, data)
    assert candidate.kind is IntentKind.INFERRED
    del data["kind"]
    (again,) = parse(runs, data)
    assert again.candidate_id == candidate.candidate_id


@pytest.mark.parametrize("kind", ["declared", "inferred", "hindsight"])
def test_every_kind_is_accepted(runs, kind):
    (candidate,) = parse(runs, row(kind=kind))
    assert candidate.kind.value == kind


@pytest.mark.parametrize("kind", ["Declared", "HINDSIGHT", "guess", " declared", 1, ["declared"]])
def test_kinds_are_case_sensitive_and_closed(runs, kind):
    with pytest.raises(MalformedModelOutput, match=r"^trajectory intent kind is invalid$"):
        parse(runs, row(kind=kind))


@pytest.mark.parametrize("intent", [None, "", "   ", "___", "!!", "—", 0, False])
def test_an_intent_without_word_characters_is_rejected(runs, intent):
    with pytest.raises(MalformedModelOutput, match=r"^trajectory intent is required$"):
        parse(runs, row(intent=intent))


def test_a_non_string_intent_is_stringified(runs):
    (candidate,) = parse(runs, row(intent=42))
    assert candidate.intent == "42"


@pytest.mark.parametrize("evidence", [None, [], {}, "t1", {"trajectory_id": "t1", "start": 0, "end": 0}, 3])
def test_evidence_must_be_a_non_empty_list(runs, evidence):
    with pytest.raises(MalformedModelOutput, match=r"^trajectory intent evidence must be a non-empty list$"):
        parse(runs, row(evidence=evidence))


@pytest.mark.parametrize("item", ["t1:0:1", 1, None, ["t1", 0, 1]])
def test_evidence_items_must_be_objects(runs, item):
    with pytest.raises(MalformedModelOutput, match=r"^trajectory intent evidence must be objects$"):
        parse(runs, row(evidence=[item]))


@pytest.mark.parametrize("trajectory_id", ["t9", "", None, "T1", " t1", 1])
def test_evidence_must_name_a_known_trajectory(runs, trajectory_id):
    with pytest.raises(MalformedModelOutput, match=r"^trajectory intent evidence references an unknown trajectory$"):
        parse(runs, row(evidence=[{"trajectory_id": trajectory_id, "start": 0, "end": 0}]))


def test_a_numeric_trajectory_id_is_stringified(runs):
    numbered = (*runs, make_run("7", 2))
    (candidate,) = parse(numbered, row(evidence=[{"trajectory_id": 7, "start": 0, "end": 1}]))
    assert candidate.evidence[0].trajectory_id == "7"


@pytest.mark.parametrize(
    "bounds",
    [{"end": 1}, {"start": 0}, {"start": None, "end": 1}, {"start": "one", "end": 1}, {"start": 0, "end": [1]}],
)
def test_bounds_must_be_integers(runs, bounds):
    with pytest.raises(MalformedModelOutput, match=r"^trajectory intent evidence bounds must be integers$"):
        parse(runs, row(evidence=[{"trajectory_id": "t2", **bounds}]))


@pytest.mark.parametrize(("start", "end"), [(float("nan"), 1), (0, float("inf")), ("1.5", 2), (0, {"v": 1})])
def test_unconvertible_numbers_are_not_integers(runs, start, end):
    with pytest.raises(MalformedModelOutput, match="bounds must be integers"):
        parse(runs, row(evidence=[{"trajectory_id": "t2", "start": start, "end": end}]))


def test_bounds_go_through_int(runs):
    (candidate,) = parse(runs, row(evidence=[{"trajectory_id": "t2", "start": "2", "end": 3.9}]))
    assert candidate.evidence[0].key == ("t2", 2, 3)
    (flagged,) = parse(runs, row(evidence=[{"trajectory_id": "t2", "start": True, "end": True}]))
    assert flagged.evidence[0].key == ("t2", 1, 1)
    (truncated,) = parse(runs, row(evidence=[{"trajectory_id": "t2", "start": -0.5, "end": 0}]))
    assert truncated.evidence[0].key == ("t2", 0, 0)


@pytest.mark.parametrize(("start", "end"), [(0, 2), (2, 2), (0, 0)])
def test_the_range_is_inclusive_within_the_run(runs, start, end):
    (candidate,) = parse(runs, row(evidence=[{"trajectory_id": "t1", "start": start, "end": end}]))
    assert candidate.evidence[0].key == ("t1", start, end)


@pytest.mark.parametrize(("trajectory_id", "start", "end"), [("t1", 0, 3), ("t1", -1, 0), ("t1", 2, 1), ("t3", 1, 1)])
def test_evidence_outside_the_run_is_rejected(runs, trajectory_id, start, end):
    with pytest.raises(MalformedModelOutput, match=r"^trajectory intent evidence is outside the trajectory$"):
        parse(runs, row(evidence=[{"trajectory_id": trajectory_id, "start": start, "end": end}]))


def test_a_run_without_steps_admits_no_evidence():
    with pytest.raises(MalformedModelOutput, match="outside the trajectory"):
        parse([make_run("empty", 0)], row(evidence=[{"trajectory_id": "empty", "start": 0, "end": 0}]))


def test_the_last_run_with_a_repeated_id_wins():
    short, long = make_run("t", 1), make_run("t", 4)
    (candidate,) = parse([short, long], row(evidence=[{"trajectory_id": "t", "start": 0, "end": 3}]))
    assert candidate.evidence[0].end == 3
    with pytest.raises(MalformedModelOutput, match="outside"):
        parse([long, short], row(evidence=[{"trajectory_id": "t", "start": 0, "end": 3}]))


def test_runs_may_be_any_iterable(runs):
    (candidate,) = parse_intent_candidates(iter(runs), {"intents": [row()]})
    assert candidate.kind is IntentKind.DECLARED


@pytest.mark.parametrize("limitations", ["only email", [1], ["ok", None], {"a": "b"}, 3, True])
def test_limitations_must_be_a_list_of_strings(runs, limitations):
    with pytest.raises(MalformedModelOutput, match=r"^trajectory intent limitations must be strings$"):
        parse(runs, row(limitations=limitations))


def test_missing_or_null_limitations_are_empty(runs):
    (missing,) = parse(runs, row())
    (null,) = parse(runs, row(intent="other", limitations=None))
    assert missing.limitations == null.limitations == ()


def test_limitations_are_stripped_truncated_and_blank_ones_dropped(runs):
    (candidate,) = parse(runs, row(limitations=["  " + "x" * 400 + "  ", " a ", "\t\n"]))
    assert candidate.limitations == ("x" * 300, "a")


def test_a_duplicate_row_is_skipped_silently_before_its_limitations_are_checked(runs):
    first = row(limitations=["kept"])
    duplicate = row(intent="reset A PASSWORD", limitations="not a list", actual_outcome="ignored")
    (candidate,) = parse(runs, first, duplicate)
    assert candidate.limitations == ("kept",)
    assert candidate.intent == "Reset a password"


def test_a_duplicate_row_still_has_its_evidence_checked(runs):
    bad = row(evidence=[{"trajectory_id": "t1", "start": 0, "end": 1}, {"trajectory_id": "nope", "start": 0, "end": 0}])
    with pytest.raises(MalformedModelOutput, match="unknown trajectory"):
        parse(runs, row(), bad)


def test_rows_keep_their_order(runs):
    candidates = parse(runs, row(intent="zeta"), row(intent="alpha"), row(intent="mid"))
    assert [candidate.intent for candidate in candidates] == ["zeta", "alpha", "mid"]


def test_the_first_bad_row_raises_even_after_good_ones(runs):
    with pytest.raises(MalformedModelOutput, match="intent is required"):
        parse(runs, row(), row(intent=""))


def test_the_intent_is_truncated_but_the_id_uses_the_whole_label(runs):
    label = "word " * 100
    (candidate,) = parse(runs, row(intent=label))
    assert candidate.intent == label.strip()[:300]
    assert candidate.candidate_id == expected_id("declared", " ".join(["word"] * 100), "t1:0:1")


def test_a_long_label_whose_first_300_characters_hold_no_word_is_malformed(runs):
    with pytest.raises(MalformedModelOutput, match="intent is required"):
        parse(runs, row(intent="!" * 300 + "word"))


def test_the_outcome_is_stringified_and_truncated(runs):
    (candidate,) = parse(runs, row(actual_outcome="y" * 1500))
    assert candidate.actual_outcome == "y" * 1000
    (numeric,) = parse(runs, row(intent="other", actual_outcome=3.5))
    assert numeric.actual_outcome == "3.5"
    (null,) = parse(runs, row(intent="third", actual_outcome=None))
    assert null.actual_outcome == ""


@pytest.mark.parametrize(
    ("output", "message"),
    [
        (None, "trajectory-intents-v1 must return a JSON object"),
        ([], "trajectory-intents-v1 must return a JSON object"),
        ("{}", "trajectory-intents-v1 must return a JSON object"),
        ({}, "trajectory-intents-v1.intents must be a JSON array of objects"),
        ({"intents": {}}, "trajectory-intents-v1.intents must be a JSON array of objects"),
        ({"intents": [row(), "x"]}, "trajectory-intents-v1.intents must be a JSON array of objects"),
    ],
)
def test_the_envelope_is_checked_with_require_list(runs, output, message):
    with pytest.raises(MalformedModelOutput) as raised:
        parse_intent_candidates(runs, output)
    assert str(raised.value) == message


def test_an_empty_list_gives_no_candidates(runs):
    assert parse_intent_candidates(runs, {"intents": []}) == ()


def test_malformed_output_is_not_a_value_error(runs):
    with pytest.raises(MalformedModelOutput) as raised:
        parse(runs, row(kind="nope"))
    assert isinstance(raised.value, RuntimeError)
    assert not isinstance(raised.value, ValueError)


def test_parse_intent_reply_reads_the_first_json_object_in_prose(runs):
    body = '{"intents": [{"intent": "Reset", "evidence": [{"trajectory_id": "t3", "start": 0, "end": 0}]}]}'
    text = f"Here you go:\n```json\n{body}\n```\nDone."
    (candidate,) = parse_intent_reply(runs, text)
    assert candidate.kind is IntentKind.INFERRED
    assert candidate.evidence[0].key == ("t3", 0, 0)


@pytest.mark.parametrize("text", ["", "no json here", '{"intents": [', None, 12])
def test_parse_intent_reply_without_an_object_is_malformed(runs, text):
    with pytest.raises(MalformedModelOutput):
        parse_intent_reply(runs, text)


def test_parse_intent_reply_checks_the_object_it_found(runs):
    with pytest.raises(MalformedModelOutput, match=r"^trajectory-intents-v1\.intents must be a JSON array of objects$"):
        parse_intent_reply(runs, 'prose {"answer": 1} more')


class TestIntentEvidence:
    def test_it_is_keyword_only_and_frozen(self):
        with pytest.raises(TypeError):
            IntentEvidence("t1", 0, 1)  # type: ignore[misc]
        evidence = IntentEvidence(trajectory_id="t1", start=0, end=1)
        with pytest.raises(dataclasses.FrozenInstanceError):
            evidence.start = 2  # type: ignore[misc]

    @pytest.mark.parametrize(("trajectory_id", "start", "end"), [("", 0, 0), ("  ", 0, 0), ("t", -1, 0), ("t", 3, 2)])
    def test_it_rejects_blank_ids_and_bad_bounds(self, trajectory_id, start, end):
        with pytest.raises(ValueError):
            IntentEvidence(trajectory_id=trajectory_id, start=start, end=end)

    def test_it_does_not_check_the_upper_bound(self):
        assert IntentEvidence(trajectory_id="t", start=5, end=10_000).end == 10_000


class TestIntentCandidate:
    evidence = (IntentEvidence(trajectory_id="t1", start=0, end=0),)

    def test_defaults(self):
        candidate = IntentCandidate("intent:x", "Reset", IntentKind.HINDSIGHT, self.evidence)
        assert candidate.actual_outcome == ""
        assert candidate.limitations == ()
        assert candidate.schema_version == "trajectory-intents-v1"

    def test_a_kind_string_is_coerced(self):
        assert IntentCandidate("intent:x", "Reset", "declared", list(self.evidence)).kind is IntentKind.DECLARED

    @pytest.mark.parametrize(
        ("candidate_id", "intent", "evidence"),
        [("", "Reset", evidence), ("intent:x", "—", evidence), ("intent:x", "Reset", ())],
    )
    def test_it_rejects_an_empty_id_label_or_evidence(self, candidate_id, intent, evidence):
        with pytest.raises(ValueError):
            IntentCandidate(candidate_id, intent, IntentKind.INFERRED, evidence)

    def test_it_is_frozen(self):
        candidate = IntentCandidate("intent:x", "Reset", IntentKind.INFERRED, self.evidence)
        with pytest.raises(dataclasses.FrozenInstanceError):
            candidate.intent = "other"  # type: ignore[misc]


def test_intent_kind_values():
    assert [kind.value for kind in IntentKind] == ["declared", "inferred", "hindsight"]
    with pytest.raises(ValueError):
        IntentKind("Declared")
