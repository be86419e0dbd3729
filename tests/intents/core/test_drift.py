import math
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from intents.core import IntentClusterChange, IntentDriftReport, compare_intent_windows


@dataclass(frozen=True)
class Cluster:
    cluster_id: str
    support: int


@dataclass(frozen=True)
class Clustering:
    clusters: tuple[Cluster, ...]
    threshold: float = 0.82


def window(**supports):
    return Clustering(tuple(Cluster(f"intent-cluster:{name}", support) for name, support in supports.items()))


def cid(name):
    return f"intent-cluster:{name}"


def jsd_reference(p, q):
    total = 0.0
    for x, y in zip(p, q, strict=True):
        m = (x + y) / 2
        if x > 0 and m > 0:
            total += 0.5 * x * math.log2(x / m)
        if y > 0 and m > 0:
            total += 0.5 * y * math.log2(y / m)
    return total


def test_by_default_windows_match_on_shared_cluster_ids():
    report = compare_intent_windows(window(a=2, b=2, c=4), window(b=1, a=3, d=4))
    assert report == IntentDriftReport(
        changes=(
            IntentClusterChange(
                before_cluster_id=cid("a"),
                after_cluster_id=cid("a"),
                before_mass=0.25,
                after_mass=0.375,
                mass_delta=0.125,
            ),
            IntentClusterChange(
                before_cluster_id=cid("b"),
                after_cluster_id=cid("b"),
                before_mass=0.25,
                after_mass=0.125,
                mass_delta=-0.125,
            ),
        ),
        retired_cluster_ids=(cid("c"),),
        new_cluster_ids=(cid("d"),),
        jsd=pytest.approx(jsd_reference([0.25, 0.25, 0.5, 0.0], [0.375, 0.125, 0.0, 0.5])),
        before_total=8,
        after_total=8,
    )


def test_the_jsd_aligns_matches_then_retired_then_new():
    report = compare_intent_windows(window(a=1, b=3), window(x=2, y=2), cluster_matches={cid("b"): cid("x")})
    assert [(c.before_cluster_id, c.after_cluster_id) for c in report.changes] == [(cid("b"), cid("x"))]
    assert report.retired_cluster_ids == (cid("a"),)
    assert report.new_cluster_ids == (cid("y"),)
    assert report.jsd == pytest.approx(jsd_reference([0.75, 0.25, 0.0], [0.5, 0.0, 0.5]))


def test_identical_windows_have_zero_drift():
    report = compare_intent_windows(window(a=1, b=2, c=3), window(a=1, b=2, c=3))
    assert report.jsd == 0.0
    assert all(change.mass_delta == 0.0 for change in report.changes)
    assert report.retired_cluster_ids == report.new_cluster_ids == ()


def test_disjoint_windows_have_drift_one():
    report = compare_intent_windows(window(a=1, b=2), window(c=5))
    assert report.changes == ()
    assert report.retired_cluster_ids == (cid("a"), cid("b"))
    assert report.new_cluster_ids == (cid("c"),)
    assert report.jsd == 1.0


def test_proportional_windows_have_zero_drift():
    assert compare_intent_windows(window(a=1, b=3), window(a=10, b=30)).jsd == 0.0


def test_explicit_matches_replace_the_identity():
    report = compare_intent_windows(window(a=1, b=1), window(a=1, b=1), cluster_matches={cid("a"): cid("b")})
    assert [(c.before_cluster_id, c.after_cluster_id) for c in report.changes] == [(cid("a"), cid("b"))]
    assert report.retired_cluster_ids == (cid("b"),)
    assert report.new_cluster_ids == (cid("a"),)
    assert report.jsd == pytest.approx(0.5)


def test_an_empty_match_mapping_means_the_identity():
    report = compare_intent_windows(window(a=1), window(a=1), cluster_matches={})
    assert [change.after_cluster_id for change in report.changes] == [cid("a")]


def test_changes_are_sorted_by_before_id():
    matches = {cid("c"): cid("x"), cid("a"): cid("z"), cid("b"): cid("y")}
    report = compare_intent_windows(window(b=1, c=1, a=1), window(z=1, x=1, y=1), cluster_matches=matches)
    assert [change.before_cluster_id for change in report.changes] == [cid("a"), cid("b"), cid("c")]


@pytest.mark.parametrize(
    "matches",
    [{cid("zz"): cid("a")}, {cid("a"): cid("zz")}, {cid("a"): cid("a"), cid("b"): cid("nope")}],
)
def test_unknown_matched_clusters_raise(matches):
    with pytest.raises(ValueError, match=r"^cluster matches reference unknown clusters$"):
        compare_intent_windows(window(a=1, b=1), window(a=1, b=1), cluster_matches=matches)


def test_an_after_cluster_matched_twice_raises():
    with pytest.raises(ValueError, match=r"^after clusters may be matched at most once$"):
        compare_intent_windows(window(a=1, b=1), window(a=2), cluster_matches={cid("a"): cid("a"), cid("b"): cid("a")})


def test_empty_windows():
    empty = compare_intent_windows(window(), window())
    assert (empty.changes, empty.retired_cluster_ids, empty.new_cluster_ids, empty.jsd) == ((), (), (), 0.0)
    assert (empty.before_total, empty.after_total) == (0, 0)
    growing = compare_intent_windows(window(), window(a=3))
    assert growing.new_cluster_ids == (cid("a"),)
    assert growing.jsd == pytest.approx(0.5)


def test_zero_support_gives_zero_mass():
    report = compare_intent_windows(window(a=0), window(a=0))
    assert report.changes[0].before_mass == report.changes[0].after_mass == 0.0
    assert report.jsd == 0.0


def test_repeated_cluster_ids_in_a_window_raise():
    doubled = Clustering((Cluster("k", 1), Cluster("k", 2)))
    with pytest.raises(ValueError, match="unique within a window"):
        compare_intent_windows(doubled, window(a=1))


supports = st.dictionaries(st.sampled_from("abcdefgh"), st.integers(min_value=0, max_value=50), max_size=8)


@given(supports)
def test_a_window_compared_with_itself_does_not_drift(counts):
    report = compare_intent_windows(window(**counts), window(**counts))
    assert report.jsd == 0.0
    assert report.retired_cluster_ids == report.new_cluster_ids == ()


@given(supports, supports, st.booleans())
def test_jsd_lies_in_the_unit_interval(before, after, permute):
    matches = None
    if permute:
        shared = sorted(set(before) & set(after))
        matches = {cid(b): cid(a) for b, a in zip(shared, reversed(shared), strict=True)}
    report = compare_intent_windows(window(**before), window(**after), cluster_matches=matches)
    assert 0.0 <= report.jsd <= 1.0
    assert report.before_total == sum(before.values())
    assert report.after_total == sum(after.values())
    matched = len(report.changes)
    assert matched + len(report.retired_cluster_ids) == len(before)
    assert matched + len(report.new_cluster_ids) == len(after)
    for change in report.changes:
        assert change.mass_delta == pytest.approx(change.after_mass - change.before_mass)


@given(supports, supports)
def test_jsd_is_symmetric_under_the_default_matching(before, after):
    forward = compare_intent_windows(window(**before), window(**after)).jsd
    backward = compare_intent_windows(window(**after), window(**before)).jsd
    assert forward == pytest.approx(backward, abs=1e-12)
