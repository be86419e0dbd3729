"""Rubrics leave reviews for their own app (issue 28, item 1): their five models are removed from reviews' state only.

The tables stay as they are, rows and all: rubrics' migration 0001 adopts them under their names (`db_table`), in
state only too, and runs before this one. Nothing is created, copied or dropped in the database.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("reviews", "0005_rollout"),
        ("rubrics", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.RemoveField(
                    model_name="rubric",
                    name="active_version",
                ),
                migrations.RemoveIndex(
                    model_name="rubricassessmentrow",
                    name="reviews_assessment_version_dim",
                ),
                migrations.RemoveConstraint(
                    model_name="rubricassessmentrow",
                    name="reviews_one_assessment_per_rater_dimension",
                ),
                migrations.RemoveConstraint(
                    model_name="rubricassessmentrow",
                    name="reviews_assessment_score_0_1",
                ),
                migrations.RemoveConstraint(
                    model_name="rubricassessmentrow",
                    name="reviews_assessment_confidence_0_1",
                ),
                migrations.RemoveIndex(
                    model_name="rubricjob",
                    name="reviews_rubric_job_lease",
                ),
                migrations.RemoveIndex(
                    model_name="rubricjob",
                    name="reviews_rubric_job_run",
                ),
                migrations.RemoveConstraint(
                    model_name="rubricscorerow",
                    name="reviews_one_score_per_run_version",
                ),
                migrations.RemoveConstraint(
                    model_name="rubricversion",
                    name="reviews_rubric_version_number",
                ),
                migrations.RemoveConstraint(
                    model_name="rubricversion",
                    name="reviews_rubric_version_digest",
                ),
                migrations.RemoveField(
                    model_name="rubricjob",
                    name="requested_by",
                ),
                migrations.RemoveField(
                    model_name="rubricjob",
                    name="result_version",
                ),
                migrations.RemoveField(
                    model_name="rubricjob",
                    name="rubric",
                ),
                migrations.RemoveField(
                    model_name="rubricjob",
                    name="run",
                ),
                migrations.RemoveField(
                    model_name="rubricjob",
                    name="version",
                ),
                migrations.RemoveField(
                    model_name="rubricscorerow",
                    name="run",
                ),
                migrations.RemoveField(
                    model_name="rubricscorerow",
                    name="version",
                ),
                migrations.RemoveField(
                    model_name="rubricversion",
                    name="model_call",
                ),
                migrations.RemoveField(
                    model_name="rubricversion",
                    name="proposed_by",
                ),
                migrations.RemoveField(
                    model_name="rubricversion",
                    name="rubric",
                ),
                migrations.DeleteModel(
                    name="RubricAssessmentRow",
                ),
                migrations.DeleteModel(
                    name="RubricJob",
                ),
                migrations.DeleteModel(
                    name="RubricScoreRow",
                ),
                migrations.DeleteModel(
                    name="Rubric",
                ),
                migrations.DeleteModel(
                    name="RubricVersion",
                ),
            ],
        ),
    ]
