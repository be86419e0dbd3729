"""The certificate computed from columns (uplift.core.certificate, issue 26's benchmark) against the plain
per-task definition: the same counts, lists and intervals, and the stored columns' canonical JSON byte for byte
json.dumps's (ids that need escapes, graded and ungraded arms, unanswered arms, critical tasks)."""

import json
import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from uplift.core.betting import difference_interval
from uplift.core.certificate import ArmOutcome, PairedTask, canonical_columns, certify, task_columns

ids = st.one_of(
    st.integers(0, 10**6).map(str),
    st.text(min_size=1, max_size=6),
    st.sampled_from(['a"b', "c\\d", "e\nf", "\x00", "é", "\u2028", "t\x7f"]),
)
arms = st.builds(
    ArmOutcome,
    passed=st.booleans(),
    score=st.one_of(st.none(), st.floats(0, 1), st.sampled_from([0.0, 1.0, 1.5, -0.25])),
    answered=st.booleans(),
    run_id=st.one_of(st.none(), st.integers(1, 10**9)),
)
ungraded_arms = st.builds(ArmOutcome, passed=st.booleans(), answered=st.booleans(), run_id=st.integers(1, 99))


def paired(draw_arms):
    return st.lists(
        st.tuples(ids, draw_arms, draw_arms, st.booleans(), st.sampled_from(["", "m-1", "m\u00e9", 'q"'])),
        max_size=40,
        unique_by=lambda row: row[0],
    ).map(
        lambda rows: [
            PairedTask(i, control, candidate, critical, model) for i, control, candidate, critical, model in rows
        ]
    )


def reference(tasks, alpha):
    """The certificate's definition task by task (the betting order a sort by betting_order's key)."""
    compared = sorted(
        (t for t in tasks if t.control.answered), key=lambda t: (zlib.crc32(t.task_id.encode()), t.task_id)
    )
    success = [int(t.candidate.success) - int(t.control.success) for t in compared]
    score = [t.candidate.value - t.control.value for t in compared]
    return {
        "n": len(compared),
        "repairs": sum(1 for d in success if d > 0),
        "breakages": sum(1 for d in success if d < 0),
        "both_passed": sum(1 for t in compared if t.control.success and t.candidate.success),
        "critical_breakages": tuple(t.task_id for t in compared if t.critical and t.outcome == "breakage"),
        "excluded": tuple(t.task_id for t in tasks if not t.control.answered),
        "candidate_unanswered": tuple(t.task_id for t in compared if not t.candidate.answered),
        "models": tuple(sorted({t.model for t in compared if t.model})),
        "success": difference_interval(success, alpha),
        "score": difference_interval(score, alpha),
    }


def reference_columns(tasks):
    def arm(a):
        return {
            "passed": a.passed and a.answered,
            "score": a.value if a.answered else None,
            "answered": a.answered,
            "run_id": a.run_id,
        }

    def outcome(t):
        return t.outcome if t.control.answered else "excluded"

    rows = [
        {"task_id": t.task_id, "critical": t.critical, "model": t.model, "outcome": outcome(t)}
        | {f"control_{k}": v for k, v in arm(t.control).items()}
        | {f"candidate_{k}": v for k, v in arm(t.candidate).items()}
        for t in tasks
    ]
    names = ["task_id", "critical", "model", "outcome"] + [
        f"{side}_{k}" for side in ("control", "candidate") for k in ("passed", "score", "answered", "run_id")
    ]
    return {"schema": 1, "columns": {name: [row[name] for row in rows] for name in names}}


def check(tasks):
    certificate = certify(tasks, alpha=0.05)
    expected = reference(tasks, 0.05)
    for name in ("n", "repairs", "breakages", "both_passed", "critical_breakages", "excluded"):
        assert getattr(certificate, name) == expected[name], name
    assert certificate.candidate_unanswered == expected["candidate_unanswered"]
    assert certificate.models == expected["models"]
    for metric in ("success", "score"):
        got, want = certificate.difference(metric), expected[metric]
        assert (got.low, got.high) == (want.low, want.high)
    columns = reference_columns(tasks)
    canonical = json.dumps(columns, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    assert certificate.task_columns() == columns == task_columns(tasks)
    assert certificate.canonical_columns() == (columns, canonical) == canonical_columns(tasks)


@settings(max_examples=150, deadline=None)
@given(paired(arms))
def test_graded_tasks_give_the_definitions_certificate_and_json(tasks):
    check(tasks)


@settings(max_examples=150, deadline=None)
@given(paired(ungraded_arms))
def test_ungraded_tasks_give_the_definitions_certificate_and_json(tasks):
    check(tasks)


def test_ids_sharing_a_crc_are_ordered_by_id():
    # "plumless" and "buckeroo" share a CRC-32 (a known collision): the tie is broken by the id.
    assert zlib.crc32(b"plumless") == zlib.crc32(b"buckeroo")
    tasks = [
        PairedTask(i, ArmOutcome(passed=k % 2 == 0), ArmOutcome(passed=k % 3 == 0))
        for k, i in enumerate(["plumless", "x", "buckeroo", "y", "z"])
    ]
    check(tasks)
    check(list(reversed(tasks)))
