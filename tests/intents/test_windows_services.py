"""Window analyses, novelty alerts and drift reports through the real services."""

from __future__ import annotations

import numpy as np
import pytest

from accounts.models import AuditEvent
from accounts.services import Actor
from intents.core.candidates import IntentCandidate, IntentEvidence
from intents.core.clustering import cluster_intents
from intents.models import DriftReport, Embedding, NoveltyAlert, WindowAnalysis
from intents.windows.services import (
    NO_TAXONOMY,
    WindowRefused,
    drift_compare,
    medoid_matches,
    novelty_alert_decide,
    window_analyze,
)
from tests.intents.windows_helpers import (
    DAY,
    EMBEDDER,
    T0,
    VECTORS,
    activate_taxonomy,
    candidate,
    chosen_embedder,  # noqa: F401 (fixture)
    window_of,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("chosen_embedder")]


def analyze(operator, start=T0, end=T0 + DAY, **kwargs) -> WindowAnalysis:
    return window_analyze(actor=Actor(user=operator), start=start, end=end, **kwargs)


def test_clusters_are_stored_as_the_core_computed_them(operator):
    records = window_of("refund an order", "refund my order", "change a flight", "change my flight", "book a hotel")
    candidate("refund an order", at=T0 + 2 * DAY, run="demo:later")  # outside the window
    analysis = analyze(operator)

    core = cluster_intents(
        [
            IntentCandidate(
                candidate_id=r.candidate_id,
                intent=r.intent,
                kind="inferred",
                evidence=(IntentEvidence(trajectory_id=r.evidence[0]["trajectory_id"], start=0, end=0),),
            )
            for r in records
        ],
        {r.candidate_id: np.array(VECTORS[r.intent]) for r in records},
    )
    stored = analysis.clusters
    assert [c["cluster_id"] for c in stored] == [c.cluster_id for c in core.clusters]
    for mine, theirs in zip(stored, core.clusters, strict=True):
        assert mine["medoid_id"] == theirs.medoid_id
        assert mine["candidate_ids"] == list(theirs.candidate_ids)
        assert mine["labels"] == list(theirs.labels)
        assert mine["cohesion"] == pytest.approx(theirs.cohesion, abs=1e-6)
        assert mine["ambiguous_candidate_ids"] == list(theirs.ambiguous_candidate_ids)
        assert mine["support"] == theirs.support
        assert mine["medoid_label"] in mine["labels"]
    assert analysis.candidates_count == 5
    assert analysis.clusters_count == 3
    assert len(analysis.digest) == 64
    assert analysis.embedder == "window-test-embedder"
    assert AuditEvent.objects.filter(verb="intent_window.analyze", target_id=str(analysis.pk)).exists()


def test_missing_vectors_are_computed_once_and_stored(operator):
    window_of("refund an order", "book a hotel")
    analyze(operator)
    assert Embedding.objects.filter(embedder="window-test-embedder").count() == 2
    calls = EMBEDDER.calls
    analyze(operator)
    assert EMBEDDER.calls == calls  # stored vectors are reused


def test_without_a_taxonomy_novelty_is_skipped_and_said_so(operator):
    window_of("refund an order", "cancel a subscription")
    analysis = analyze(operator)
    assert analysis.novelty_checked is False
    assert analysis.novelty == []
    assert analysis.novelty_note == NO_TAXONOMY
    assert not NoveltyAlert.objects.exists()


def test_with_a_taxonomy_novel_candidates_raise_one_alert_each(operator):
    reviewed = window_of("refund an order", "change a flight", at=T0 - 3 * DAY, run_prefix="demo:rev")
    activate_taxonomy(
        [
            ("intent-refund", "refund an order", [reviewed[0].candidate_id]),
            ("intent-flight", "change a flight", [reviewed[1].candidate_id]),
        ]
    )
    window_of("refund my order", "cancel a subscription", "book a hotel")
    analysis = analyze(operator)

    assert analysis.novelty_checked and analysis.centroids_count == 2
    by_label = {row["label"]: row for row in analysis.novelty}
    assert by_label["refund my order"]["novel"] is False
    assert by_label["refund my order"]["nearest_intent_id"] == "intent-refund"
    assert by_label["cancel a subscription"]["novel"] is True
    assert by_label["book a hotel"]["novel"] is True
    assert analysis.novel_count == 2
    alerts = NoveltyAlert.objects.order_by("label")
    assert [a.label for a in alerts] == ["book a hotel", "cancel a subscription"]
    assert all(a.status == NoveltyAlert.Status.OPEN and a.analysis_id == analysis.pk for a in alerts)

    again = analyze(operator)  # the same candidates are novel again: no second alert
    assert again.novel_count == 2
    assert NoveltyAlert.objects.count() == 2


def test_the_centroid_is_the_mean_of_normalised_candidate_vectors(operator):
    reviewed = window_of("refund an order", "change a flight", at=T0 - 3 * DAY, run_prefix="demo:rev")
    activate_taxonomy([("intent-mixed", "mixed", [r.candidate_id for r in reviewed])])
    window_of("refund an order")
    analysis = analyze(operator)
    # mean of (1,0,0,0) and (0,1,0,0), normalised: cosine with (1,0,0,0) is 1/sqrt(2)
    assert analysis.novelty[0]["similarity"] == pytest.approx(2**-0.5, abs=1e-6)
    assert analysis.novelty[0]["novel"] is True  # < 0.75


def test_bad_bounds_and_parameters_are_refused_without_writing(operator):
    with pytest.raises(WindowRefused, match="end after it starts"):
        analyze(operator, start=T0, end=T0)
    with pytest.raises(WindowRefused, match="time zone"):
        analyze(operator, start=T0.replace(tzinfo=None), end=(T0 + DAY).replace(tzinfo=None))
    with pytest.raises(WindowRefused, match="similarity threshold"):
        analyze(operator, threshold=1.5)
    with pytest.raises(WindowRefused, match="ambiguity margin"):
        analyze(operator, margin=-0.1)
    assert not WindowAnalysis.objects.exists()
    assert not AuditEvent.objects.filter(verb="intent_window.analyze").exists()


def test_a_window_over_the_limit_is_refused(operator, settings):
    settings.WAYMARK_INTENT_WINDOW_MAX_CANDIDATES = 2
    window_of("refund an order", "change a flight", "book a hotel")
    with pytest.raises(WindowRefused) as refused:
        analyze(operator)
    assert refused.value.code == "window_too_large"
    assert not WindowAnalysis.objects.exists()


def test_one_candidate_id_under_two_sources_counts_once(operator):
    first = candidate("refund an order", at=T0, run="demo:x")
    candidate("refund an order", at=T0 + DAY / 2, run="demo:x", source="client:7")
    analysis = analyze(operator)
    assert analysis.candidates_count == 1
    assert analysis.clusters[0]["candidate_ids"] == [first.candidate_id]


def test_an_empty_window_has_no_clusters(operator):
    analysis = analyze(operator)
    assert analysis.clusters == [] and analysis.candidates_count == 0


# -- drift ------------------------------------------------------------------------------------------------------------


def test_drift_of_a_window_with_itself_is_zero(operator):
    window_of("refund an order", "refund my order", "change a flight", "book a hotel")
    analysis = analyze(operator)
    report = drift_compare(actor=Actor(user=operator), before=analysis, after=analysis)
    assert report.jsd == 0.0
    assert report.matching == DriftReport.Matching.IDENTITY
    assert report.retired == [] and report.new == []
    assert all(change["mass_delta"] == 0 for change in report.changes)
    assert len(report.changes) == analysis.clusters_count
    assert AuditEvent.objects.filter(verb="intent_drift.compare", target_id=str(report.pk)).exists()


def test_the_same_comparison_returns_the_stored_report(operator):
    window_of("refund an order")
    analysis = analyze(operator)
    first = drift_compare(actor=Actor(user=operator), before=analysis, after=analysis)
    second = drift_compare(actor=Actor(user=operator), before=analysis, after=analysis)
    assert first.created_now and not second.created_now
    assert first.pk == second.pk and DriftReport.objects.count() == 1


def two_windows(operator):
    """Before: refund ×2, flight ×1. After: different candidates (so different medoid ids) of similar labels, and a
    new hotel intent."""
    window_of("refund an order", "refund my order", "change a flight", run_prefix="demo:b")
    window_of(
        "refund my order", "change my flight", "change a flight", "book a hotel", at=T0 + DAY, run_prefix="demo:a"
    )
    return analyze(operator), analyze(operator, start=T0 + DAY, end=T0 + 2 * DAY)


def test_identity_matching_finds_no_shared_medoid_and_retires_everything(operator):
    before, after = two_windows(operator)
    report = drift_compare(actor=Actor(user=operator), before=before, after=after)
    assert report.changes == []
    assert len(report.retired) == 2 and len(report.new) == 3
    assert report.jsd == pytest.approx(1.0)
    assert report.cluster_matches == {}


def test_medoid_matching_pairs_similar_clusters_and_records_the_option(operator):
    before, after = two_windows(operator)
    report = drift_compare(actor=Actor(user=operator), before=before, after=after, matching="medoid")
    assert report.matching == DriftReport.Matching.MEDOID
    assert report.match_threshold == pytest.approx(after.similarity_threshold)
    assert len(report.changes) == 2
    masses = {c["before_label"].split()[0]: (c["before_mass"], c["after_mass"]) for c in report.changes}
    assert masses["refund"] == pytest.approx((2 / 3, 1 / 4))
    assert masses["change"] == pytest.approx((1 / 3, 2 / 4))
    assert [row["label"] for row in report.new] == ["book a hotel"]
    assert report.retired == []
    assert 0 < report.jsd < 1
    assert all(c["similarity"] >= 0.82 for c in report.changes)
    assert report.biggest[0]["mass_delta"] == pytest.approx(-(2 / 3 - 1 / 4))
    assert len(medoid_matches(before, after, 0.999999)) <= 2


def test_explicit_matches_are_checked_by_the_core(operator):
    before, after = two_windows(operator)
    with pytest.raises(WindowRefused, match="unknown clusters"):
        drift_compare(actor=Actor(user=operator), before=before, after=after, cluster_matches={"nope": "nada"})
    b = [c["cluster_id"] for c in before.clusters]
    a = after.clusters[0]["cluster_id"]
    with pytest.raises(WindowRefused, match="at most once"):
        drift_compare(actor=Actor(user=operator), before=before, after=after, cluster_matches={b[0]: a, b[1]: a})
    assert not DriftReport.objects.exists()
    report = drift_compare(actor=Actor(user=operator), before=before, after=after, cluster_matches={b[0]: a})
    assert report.matching == DriftReport.Matching.EXPLICIT and report.cluster_matches == {b[0]: a}


# -- alerts -----------------------------------------------------------------------------------------------------------


def test_an_alert_is_decided_once(operator, reviewer):
    reviewed = window_of("refund an order", at=T0 - 3 * DAY, run_prefix="demo:rev")
    activate_taxonomy([("intent-refund", "refund an order", [reviewed[0].candidate_id])])
    window_of("book a hotel")
    analyze(operator)
    alert = NoveltyAlert.objects.get()
    decided = novelty_alert_decide(actor=Actor(user=reviewer), alert=alert, status="promoted", note="new intent")
    assert decided.status == "promoted" and decided.decided_by == reviewer
    with pytest.raises(WindowRefused) as refused:
        novelty_alert_decide(actor=Actor(user=reviewer), alert=alert, status="dismissed")
    assert refused.value.status == 409
    assert AuditEvent.objects.filter(verb="intent_novelty_alert.promote").count() == 1
