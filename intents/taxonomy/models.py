"""Persistence of the reviewed intent taxonomy: judgments of intent candidates, the taxonomy and its versions.

Rows are written only by intents.taxonomy.services. A judgment is one reviewer's verdict on one stored candidate
(the database allows one per pair). A taxonomy version is an immutable document identified by its content digest;
the taxonomy row holds the single active pointer, moved only by an applied promotion (intents.promotable). Each
activation writes one `TaxonomyActivation` row in its transaction (rollback targets read it). `TaxonomyRunIntent` is
the version's run → reviewed intent index, written with the version, read by procedure mining.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

__all__ = ["IntentJudgment", "IntentTaxonomy", "TaxonomyActivation", "TaxonomyRunIntent", "TaxonomyVersion"]


class IntentJudgment(models.Model):
    """One reviewer's verdict on one intent candidate: valid, invalid, or merge into an existing taxonomy intent."""

    class Verdict(models.TextChoices):
        VALID = "valid"
        INVALID = "invalid"
        MERGE = "merge"

    candidate = models.ForeignKey("intents.IntentCandidateRecord", on_delete=models.PROTECT, related_name="judgments")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    verdict = models.CharField(max_length=8, choices=Verdict.choices)
    merge_target = models.CharField(max_length=40, blank=True, help_text="the taxonomy intent id (merge only)")
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["candidate", "reviewer"], name="intents_one_judgment_per_reviewer"),
            models.CheckConstraint(
                condition=(Q(verdict="merge") & ~Q(merge_target="")) | (~Q(verdict="merge") & Q(merge_target="")),
                name="intents_judgment_merge_has_a_target",
            ),
        ]
        indexes = [models.Index(fields=["reviewer", "candidate"], name="intents_judgment_by_reviewer")]

    def __str__(self) -> str:
        target = f" → {self.merge_target}" if self.merge_target else ""
        return f"{self.verdict}{target} on candidate {self.candidate_id}"


class IntentTaxonomy(models.Model):
    """The reviewed taxonomy of one site (slug "default"): the single active version pointer and its revision."""

    DEFAULT_SLUG = "default"

    slug = models.SlugField(max_length=60, unique=True)
    title = models.CharField(max_length=200, blank=True)
    active_version = models.ForeignKey(
        "intents.TaxonomyVersion", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    revision = models.PositiveIntegerField(default=0, help_text="counts pointer moves")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["slug"]
        verbose_name_plural = "intent taxonomies"

    def __str__(self) -> str:
        return self.title or f"{self.slug} taxonomy"


class TaxonomyVersion(models.Model):
    """An immutable taxonomy document: {"intents": [{intent_id, label, normalized, aliases, candidate_ids,
    support}]} sorted by intent_id; `changes` lists what it adds to its parent, each with the judgment summaries
    that back it."""

    taxonomy = models.ForeignKey(IntentTaxonomy, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField()
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    document = models.JSONField(default=dict)
    changes = models.JSONField(default=list)
    digest = models.CharField(max_length=80, help_text="sha256: over the canonical JSON of the document")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["taxonomy", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["taxonomy", "number"], name="intents_taxonomy_version_number"),
            models.UniqueConstraint(fields=["taxonomy", "digest"], name="intents_taxonomy_version_digest"),
        ]

    def __str__(self) -> str:
        return f"taxonomy v{self.number} {self.short_digest}"

    @property
    def short_digest(self) -> str:
        return self.digest.removeprefix("sha256:")[:10]

    @property
    def intents(self) -> list[dict]:
        return list((self.document or {}).get("intents", []))


class TaxonomyRunIntent(models.Model):
    """Within one version: the reviewed intent of one run (from its accepted candidates' evidence)."""

    version = models.ForeignKey(TaxonomyVersion, on_delete=models.CASCADE, related_name="run_intents")
    run = models.ForeignKey("trajectories.Run", on_delete=models.CASCADE, related_name="+")
    intent_id = models.CharField(max_length=40)
    label = models.CharField(max_length=300)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["version", "run"], name="intents_taxonomy_run_once")]
        indexes = [models.Index(fields=["version", "intent_id"], name="intents_taxonomy_run_intent")]

    def __str__(self) -> str:
        return f"run {self.run_id} → {self.intent_id} in version {self.version_id}"


class TaxonomyActivation(models.Model):
    """Activation history: what became active, what it replaced, when, by whom and through which request."""

    taxonomy = models.ForeignKey(IntentTaxonomy, on_delete=models.PROTECT, related_name="activations")
    version = models.ForeignKey(TaxonomyVersion, on_delete=models.PROTECT, related_name="+")
    replaced = models.ForeignKey(TaxonomyVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    request_id = models.PositiveIntegerField(null=True, blank=True, help_text="the promotion request applied")
    is_rollback = models.BooleanField(default=False)
    activated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    activated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-activated_at", "-id"]

    def __str__(self) -> str:
        return f"taxonomy version {self.version_id} active from {self.activated_at:%Y-%m-%d %H:%M}"
