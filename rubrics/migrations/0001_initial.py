"""Rubrics' models, moved from reviews (issue 28, item 1) in state only: the tables reviews created (migrations 0002
and 0004 of reviews) keep their names (`db_table`), their rows, constraints and indexes. Reviews' migration 0006 then
removes the models from its own state. The content types of the five models follow them to this app, so what names
them by content type (permissions, the admin's log) still finds them.
"""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


MODELS = ("rubric", "rubricversion", "rubricassessmentrow", "rubricscorerow", "rubricjob")


def content_types_follow(apps, schema_editor):
    """reviews.<model> → rubrics.<model>, unless a content type of the new name exists already (left as they are)."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    taken = set(ContentType.objects.filter(app_label="rubrics", model__in=MODELS).values_list("model", flat=True))
    ContentType.objects.filter(app_label="reviews", model__in=[m for m in MODELS if m not in taken]).update(
        app_label="rubrics"
    )


def content_types_return(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    taken = set(ContentType.objects.filter(app_label="reviews", model__in=MODELS).values_list("model", flat=True))
    ContentType.objects.filter(app_label="rubrics", model__in=[m for m in MODELS if m not in taken]).update(
        app_label="reviews"
    )


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("reviews", "0005_rollout"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("llm", "0002_model_call_diagnostics"),
        ("trajectories", "0012_run_procedure_revision"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="Rubric",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("key", models.CharField(max_length=200, unique=True)),
                        ("label", models.CharField(blank=True, max_length=200)),
                        ("revision", models.PositiveIntegerField(default=0)),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        ("updated_at", models.DateTimeField(default=django.utils.timezone.now)),
                    ],
                    options={
                        "db_table": "reviews_rubric",
                        "ordering": ["key"],
                    },
                ),
                migrations.CreateModel(
                    name="RubricVersion",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("number", models.PositiveIntegerField()),
                        ("document", models.JSONField()),
                        ("digest", models.CharField(max_length=64)),
                        (
                            "status",
                            models.CharField(
                                choices=[("candidate", "Candidate"), ("active", "Active"), ("retired", "Retired")],
                                default="candidate",
                                max_length=10,
                            ),
                        ),
                        ("source_run_ids", models.JSONField(blank=True, default=list)),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        (
                            "model_call",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to="llm.modelcall",
                            ),
                        ),
                        (
                            "proposed_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "rubric",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="versions",
                                to="rubrics.rubric",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "reviews_rubricversion",
                        "ordering": ["rubric_id", "-number"],
                    },
                ),
                migrations.CreateModel(
                    name="RubricScoreRow",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("overall", models.FloatField()),
                        ("dimension_scores", models.JSONField(default=dict)),
                        ("dimension_confidence", models.JSONField(default=dict)),
                        ("missing_dimensions", models.JSONField(default=list)),
                        ("required_failures", models.JSONField(default=list)),
                        ("assessment_count", models.PositiveIntegerField(default=0)),
                        ("rater_count", models.PositiveIntegerField(default=0)),
                        ("updated_at", models.DateTimeField(default=django.utils.timezone.now)),
                        (
                            "run",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE, related_name="+", to="trajectories.run"
                            ),
                        ),
                        (
                            "version",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="scores",
                                to="rubrics.rubricversion",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "reviews_rubricscorerow",
                        "ordering": ["-updated_at", "-id"],
                    },
                ),
                migrations.CreateModel(
                    name="RubricJob",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("kind", models.CharField(choices=[("propose", "Propose"), ("judge", "Judge")], max_length=10)),
                        ("example_run_ids", models.JSONField(blank=True, default=list)),
                        ("judges", models.PositiveSmallIntegerField(default=0)),
                        (
                            "status",
                            models.CharField(
                                choices=[
                                    ("queued", "Queued"),
                                    ("running", "Running"),
                                    ("succeeded", "Succeeded"),
                                    ("failed", "Failed"),
                                ],
                                default="queued",
                                max_length=10,
                            ),
                        ),
                        ("attempts", models.PositiveSmallIntegerField(default=0)),
                        ("lease_owner", models.CharField(blank=True, max_length=200)),
                        ("lease_expires_at", models.DateTimeField(blank=True, null=True)),
                        ("attempts_log", models.JSONField(blank=True, default=list)),
                        ("error", models.TextField(blank=True)),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        ("started_at", models.DateTimeField(blank=True, null=True)),
                        ("finished_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "requested_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "rubric",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT, related_name="jobs", to="rubrics.rubric"
                            ),
                        ),
                        (
                            "run",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="trajectories.run",
                            ),
                        ),
                        (
                            "result_version",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to="rubrics.rubricversion",
                            ),
                        ),
                        (
                            "version",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to="rubrics.rubricversion",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "reviews_rubricjob",
                        "ordering": ["-id"],
                    },
                ),
                migrations.CreateModel(
                    name="RubricAssessmentRow",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("dimension_id", models.CharField(max_length=80)),
                        ("score", models.FloatField()),
                        ("confidence", models.FloatField(default=1.0)),
                        ("evidence_steps", models.JSONField(blank=True, default=list)),
                        ("explanation", models.TextField(blank=True)),
                        ("rater", models.CharField(max_length=120)),
                        (
                            "rater_kind",
                            models.CharField(choices=[("person", "Person"), ("model", "Model")], max_length=10),
                        ),
                        ("judge_name", models.CharField(blank=True, max_length=120)),
                        ("blind", models.BooleanField(null=True)),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        (
                            "model_call",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to="llm.modelcall",
                            ),
                        ),
                        (
                            "run",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE, related_name="+", to="trajectories.run"
                            ),
                        ),
                        (
                            "user",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "version",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="assessments",
                                to="rubrics.rubricversion",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "reviews_rubricassessmentrow",
                        "ordering": ["run_id", "version_id", "rater", "dimension_id"],
                    },
                ),
                migrations.AddField(
                    model_name="rubric",
                    name="active_version",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="rubrics.rubricversion",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="rubricversion",
                    constraint=models.UniqueConstraint(
                        fields=("rubric", "number"), name="reviews_rubric_version_number"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="rubricversion",
                    constraint=models.UniqueConstraint(
                        fields=("rubric", "digest"), name="reviews_rubric_version_digest"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="rubricscorerow",
                    constraint=models.UniqueConstraint(
                        fields=("run", "version"), name="reviews_one_score_per_run_version"
                    ),
                ),
                migrations.AddIndex(
                    model_name="rubricjob",
                    index=models.Index(fields=["status", "lease_expires_at"], name="reviews_rubric_job_lease"),
                ),
                migrations.AddIndex(
                    model_name="rubricjob",
                    index=models.Index(fields=["run", "-id"], name="reviews_rubric_job_run"),
                ),
                migrations.AddIndex(
                    model_name="rubricassessmentrow",
                    index=models.Index(fields=["version", "dimension_id"], name="reviews_assessment_version_dim"),
                ),
                migrations.AddConstraint(
                    model_name="rubricassessmentrow",
                    constraint=models.UniqueConstraint(
                        fields=("run", "version", "rater", "dimension_id"),
                        name="reviews_one_assessment_per_rater_dimension",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="rubricassessmentrow",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("score__gte", 0), ("score__lte", 1)), name="reviews_assessment_score_0_1"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="rubricassessmentrow",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("confidence__gte", 0), ("confidence__lte", 1)),
                        name="reviews_assessment_confidence_0_1",
                    ),
                ),
            ],
        ),
        migrations.RunPython(content_types_follow, content_types_return),
    ]
