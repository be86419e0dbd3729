"""Persistence of rubrics: rubrics per intent key, their immutable versions, assessments of runs, cached scores and
the background jobs (proposals, judging) that call the model. Written only by rubrics.services.

The tables keep the names they had while rubrics lived in reviews (`reviews_rubric…`, `db_table` below): the models
moved to this app in state only (migrations rubrics 0001 and reviews 0006), no row was copied. Runs are read through
trajectories' selectors; the foreign keys name "trajectories.Run" by string.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from common.leases.models import Leased


class Rubric(models.Model):
    """The rubric of one intent key (a normalized intent label or a task family). `active_version` is the single
    pointer agents' scores are computed against; only a promotion (kind "rubric_version") moves it."""

    key = models.CharField(max_length=200, unique=True)
    label = models.CharField(max_length=200, blank=True)
    active_version = models.ForeignKey(
        "rubrics.RubricVersion", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    revision = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "reviews_rubric"
        ordering = ["key"]

    def __str__(self) -> str:
        return self.label or self.key


class RubricVersionStatus(models.TextChoices):
    CANDIDATE = "candidate"
    ACTIVE = "active"
    RETIRED = "retired"


class RubricVersion(models.Model):
    """One immutable rubric document (`TrajectoryRubric.to_document()`) identified by its digest, `vN` per rubric."""

    rubric = models.ForeignKey(Rubric, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField()
    document = models.JSONField()
    digest = models.CharField(max_length=64)
    status = models.CharField(max_length=10, choices=RubricVersionStatus.choices, default=RubricVersionStatus.CANDIDATE)
    proposed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    model_call = models.ForeignKey("llm.ModelCall", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    source_run_ids = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "reviews_rubricversion"
        ordering = ["rubric_id", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["rubric", "number"], name="reviews_rubric_version_number"),
            models.UniqueConstraint(fields=["rubric", "digest"], name="reviews_rubric_version_digest"),
        ]

    def __str__(self) -> str:
        return f"{self.rubric_id} v{self.number}"

    @property
    def short_digest(self) -> str:
        return self.digest[:10]

    @property
    def dimensions(self) -> list[dict]:
        return list(self.document.get("dimensions", []))


class RaterKind(models.TextChoices):
    PERSON = "person"
    MODEL = "model"


class RubricAssessmentRow(models.Model):
    """One rater's assessment of one dimension of one run under one rubric version. A rater is a person (`rater`
    = "user:<id>") or a model judge ("judge:<name>"); the database keeps one row per rater and dimension."""

    run = models.ForeignKey("trajectories.Run", on_delete=models.CASCADE, related_name="+")
    version = models.ForeignKey(RubricVersion, on_delete=models.PROTECT, related_name="assessments")
    dimension_id = models.CharField(max_length=80)
    score = models.FloatField()
    confidence = models.FloatField(default=1.0)
    evidence_steps = models.JSONField(default=list, blank=True)
    explanation = models.TextField(blank=True)
    rater = models.CharField(max_length=120)
    rater_kind = models.CharField(max_length=10, choices=RaterKind.choices)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    judge_name = models.CharField(max_length=120, blank=True)
    model_call = models.ForeignKey("llm.ModelCall", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    # Made without sight of anyone else's scores: true for a model judge (its prompt holds the run and the rubric
    # only) and for a person's first assessment of the run (nothing of others' is shown to them before it); false
    # once they could have seen them; null for people's assessments made before this was recorded. Agreement counts
    # only blind ratings.
    blind = models.BooleanField(null=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "reviews_rubricassessmentrow"
        ordering = ["run_id", "version_id", "rater", "dimension_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "version", "rater", "dimension_id"], name="reviews_one_assessment_per_rater_dimension"
            ),
            models.CheckConstraint(condition=Q(score__gte=0) & Q(score__lte=1), name="reviews_assessment_score_0_1"),
            models.CheckConstraint(
                condition=Q(confidence__gte=0) & Q(confidence__lte=1), name="reviews_assessment_confidence_0_1"
            ),
        ]
        indexes = [models.Index(fields=["version", "dimension_id"], name="reviews_assessment_version_dim")]

    def __str__(self) -> str:
        return f"{self.rater} on run {self.run_id} {self.dimension_id}={self.score}"

    @property
    def rater_label(self) -> str:
        if self.rater_kind == RaterKind.MODEL:
            return f"model judge {self.judge_name}"
        return self.user.username if self.user_id and self.user else self.rater


class RubricScoreRow(models.Model):
    """The cached `score_trajectory_rubric` of a run under a rubric version, recomputed whenever its assessments
    change (in the same transaction)."""

    run = models.ForeignKey("trajectories.Run", on_delete=models.CASCADE, related_name="+")
    version = models.ForeignKey(RubricVersion, on_delete=models.PROTECT, related_name="scores")
    overall = models.FloatField()
    dimension_scores = models.JSONField(default=dict)
    dimension_confidence = models.JSONField(default=dict)
    missing_dimensions = models.JSONField(default=list)
    required_failures = models.JSONField(default=list)
    assessment_count = models.PositiveIntegerField(default=0)
    rater_count = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "reviews_rubricscorerow"
        ordering = ["-updated_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["run", "version"], name="reviews_one_score_per_run_version")]

    def __str__(self) -> str:
        return f"run {self.run_id} under {self.version_id}: {self.overall:.2f}"

    @property
    def passed(self) -> bool:
        return not self.required_failures


class RubricJobKind(models.TextChoices):
    PROPOSE = "propose"
    JUDGE = "judge"


class RubricJobStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


RUBRIC_JOB_OPEN = (RubricJobStatus.QUEUED, RubricJobStatus.RUNNING)


class RubricJob(Leased):
    """Background model work on rubrics, claimed by a Celery task with a lease: proposing a rubric version from
    example runs, or judging one run with K model judges. `attempts_log` keeps each model call and its rejection."""

    kind = models.CharField(max_length=10, choices=RubricJobKind.choices)
    rubric = models.ForeignKey(Rubric, on_delete=models.PROTECT, related_name="jobs")
    version = models.ForeignKey(RubricVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    run = models.ForeignKey("trajectories.Run", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    example_run_ids = models.JSONField(default=list, blank=True)
    judges = models.PositiveSmallIntegerField(default=0)
    status = models.CharField(max_length=10, choices=RubricJobStatus.choices, default=RubricJobStatus.QUEUED)
    attempts = models.PositiveSmallIntegerField(default=0)
    attempts_log = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    result_version = models.ForeignKey(RubricVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "reviews_rubricjob"
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["status", "lease_expires_at"], name="reviews_rubric_job_lease"),
            models.Index(fields=["run", "-id"], name="reviews_rubric_job_run"),
        ]

    def __str__(self) -> str:
        return f"rubric {self.kind} job {self.pk} ({self.status})"

    @property
    def is_open(self) -> bool:
        return self.status in RUBRIC_JOB_OPEN
