"""Persistence of window analyses: the clusters and novelty of one time window's intent candidates, the drift
between two windows, and the novelty alerts raised for reviewers.

Imported at the end of intents/models.py so that Django discovers the models. Rows are written only by
intents.windows.services. An analysis and a drift report are immutable once written and carry the SHA-256 of their
canonical JSON document; an alert changes status once (open → dismissed or promoted to review).
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

__all__ = ["DriftReport", "NoveltyAlert", "WindowAnalysis"]


class WindowAnalysis(models.Model):
    """The candidates stored in [window_start, window_end) clustered (spec §2.6) and checked for novelty against
    the active taxonomy's centroids (spec §2.7).

    `clusters` is the clustering as the core computed it, in its order: [{cluster_id, medoid_id, medoid_label,
    candidate_ids, labels, cohesion, ambiguous_candidate_ids, support, member_labels: {candidate_id: label}}].
    `novelty` is one row per candidate, in input order: [{candidate_id, label, nearest_intent_id, nearest_label,
    similarity, novel}]; empty with `novelty_checked` false when no taxonomy was active (`novelty_note` says so)."""

    window_start = models.DateTimeField(help_text="candidates stored at or after this time")
    window_end = models.DateTimeField(help_text="candidates stored before this time")
    embedder = models.CharField(max_length=200, help_text="the embedder whose vectors were clustered")
    dimensions = models.PositiveIntegerField(default=0)
    similarity_threshold = models.FloatField()
    ambiguity_margin = models.FloatField()
    novelty_threshold = models.FloatField()
    candidates_count = models.PositiveIntegerField(default=0)
    clusters_count = models.PositiveIntegerField(default=0)
    ambiguous_count = models.PositiveIntegerField(default=0)
    clusters = models.JSONField(default=list)
    novelty_checked = models.BooleanField(default=False)
    novelty_note = models.CharField(max_length=300, blank=True)
    taxonomy_ref = models.CharField(
        max_length=200, blank=True, help_text="the taxonomy version whose centroids novelty was measured against"
    )
    centroids_count = models.PositiveIntegerField(default=0)
    novelty = models.JSONField(default=list)
    novel_count = models.PositiveIntegerField(default=0)
    digest = models.CharField(max_length=64, help_text="SHA-256 of the canonical JSON of the result")
    created_by = models.ForeignKey(
        "accounts.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="intent_window_analyses"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["window_start", "window_end"], name="intents_window_bounds")]

    def __str__(self) -> str:
        return f"window analysis {self.pk} ({self.window_start:%Y-%m-%d %H:%M} → {self.window_end:%Y-%m-%d %H:%M})"

    @property
    def short_digest(self) -> str:
        return self.digest[:12]

    @property
    def name(self) -> str:
        return f"window #{self.pk}"


class DriftReport(models.Model):
    """Drift of cluster mass from `before` to `after` (spec §2.8), stored with how clusters were matched.

    `changes`: [{before_cluster_id, after_cluster_id, before_label, after_label, before_mass, after_mass,
    mass_delta, similarity}] sorted by before id; `retired` / `new`: [{cluster_id, label, support, mass}];
    `biggest`: the rows of all three with the largest |mass delta| (retired as −mass, new as +mass)."""

    class Matching(models.TextChoices):
        IDENTITY = "identity", "shared medoid ids (the spec's default)"
        MEDOID = "medoid", "nearest medoid above the threshold"
        EXPLICIT = "explicit", "matches given by the caller"

    before = models.ForeignKey(WindowAnalysis, on_delete=models.PROTECT, related_name="drift_as_before")
    after = models.ForeignKey(WindowAnalysis, on_delete=models.PROTECT, related_name="drift_as_after")
    matching = models.CharField(max_length=20, choices=Matching.choices, default=Matching.IDENTITY)
    match_threshold = models.FloatField(null=True, blank=True, help_text="medoid matching: the least cosine")
    cluster_matches = models.JSONField(default=dict, help_text="before cluster id → after cluster id, as used")
    jsd = models.FloatField(help_text="Jensen–Shannon divergence in bits, in [0, 1]")
    before_total = models.PositiveIntegerField(default=0)
    after_total = models.PositiveIntegerField(default=0)
    changes = models.JSONField(default=list)
    retired = models.JSONField(default=list)
    new = models.JSONField(default=list)
    biggest = models.JSONField(default=list)
    digest = models.CharField(max_length=64, help_text="SHA-256 of the canonical JSON of the report")
    created_by = models.ForeignKey(
        "accounts.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="intent_drift_reports"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["before", "after"], name="intents_drift_pair")]

    def __str__(self) -> str:
        return f"drift report {self.pk} (window #{self.before_id} → #{self.after_id})"

    @property
    def short_digest(self) -> str:
        return self.digest[:12]


class NoveltyAlert(models.Model):
    """A candidate far from every reviewed intent (spec §2.7 `novel`), raised once per candidate id: a later
    analysis that finds it novel again does not raise a second alert."""

    class Status(models.TextChoices):
        OPEN = "open"
        DISMISSED = "dismissed"
        PROMOTED = "promoted", "promoted to review"

    analysis = models.ForeignKey(WindowAnalysis, on_delete=models.PROTECT, related_name="alerts")
    candidate_id = models.CharField(max_length=40, unique=True)
    label = models.CharField(max_length=300)
    nearest_intent_id = models.CharField(max_length=200)
    nearest_label = models.CharField(max_length=300, blank=True)
    similarity = models.FloatField()
    threshold = models.FloatField()
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.OPEN)
    note = models.TextField(blank=True)
    decided_by = models.ForeignKey(
        "accounts.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="intent_novelty_decisions"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["status", "-id"], name="intents_alert_status")]

    def __str__(self) -> str:
        return f"novel intent {self.candidate_id} ({self.status})"
