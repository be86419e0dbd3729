"""Rubrics moved from reviews to their own app in state only (rubrics 0001, reviews 0006): a database that holds rubric
rows written under reviews' models reads every one of them through rubrics' models after migrating, with the same
ids, and the tables keep their names. Run with the migration executor itself: migrate back to before the move, write
rows through the historical models, migrate forward."""

from __future__ import annotations

import pytest
from django.contrib.contenttypes.models import ContentType

from rubrics.models import Rubric, RubricAssessmentRow, RubricJob, RubricScoreRow, RubricVersion
from tests.helpers.migrations import leaves, migrate

BEFORE = [("reviews", "0005_rollout"), ("rubrics", None)]


@pytest.fixture
def before_the_move(transactional_db):
    """The database as it was before the move (every other app at its newest), as its historical state; migrated
    forward again afterwards whatever the test did."""
    executor = migrate(BEFORE)
    try:
        others = [node for node in executor.loader.graph.leaf_nodes() if node[0] not in ("reviews", "rubrics")]
        yield executor.loader.project_state([*others, ("reviews", "0005_rollout")])
    finally:
        migrate(leaves())
        ContentType.objects.clear_cache()


def test_rubric_rows_written_under_reviews_read_through_rubrics_after_the_move(before_the_move):
    assert ("reviews", "rubric") in before_the_move.models and ("rubrics", "rubric") not in before_the_move.models
    old = before_the_move.apps
    OldContentType = old.get_model("contenttypes", "ContentType")
    OldContentType.objects.filter(app_label="rubrics", model="rubricjob").delete()  # as on a database made before
    OldContentType.objects.get_or_create(app_label="reviews", model="rubricjob")
    Run = old.get_model("trajectories", "Run")
    run = Run.objects.create(source="before-the-move", external_id="r1", outcome="success", intent="refund request")
    OldRubric = old.get_model("reviews", "Rubric")
    OldVersion = old.get_model("reviews", "RubricVersion")
    rubric = OldRubric.objects.create(key="refund request", label="Refunds")
    document = {"task": "refunds", "dimensions": [{"dimension_id": "done", "description": "Done.", "weight": 1.0}]}
    version = OldVersion.objects.create(rubric=rubric, number=1, document=document, digest="d" * 64, status="active")
    OldRubric.objects.filter(pk=rubric.pk).update(active_version=version, revision=1)
    assessment = old.get_model("reviews", "RubricAssessmentRow").objects.create(
        run=run, version=version, dimension_id="done", score=0.75, rater="judge:m#1", rater_kind="model", blind=True
    )
    score = old.get_model("reviews", "RubricScoreRow").objects.create(
        run=run, version=version, overall=0.75, dimension_scores={"done": 0.75}, assessment_count=1, rater_count=1
    )
    job = old.get_model("reviews", "RubricJob").objects.create(
        kind="judge", rubric=rubric, version=version, run=run, judges=1, status="succeeded"
    )

    migrate(leaves())

    moved = Rubric.objects.select_related("active_version").get(pk=rubric.pk)
    assert (moved.key, moved.label, moved.revision, moved.active_version_id) == (
        "refund request",
        "Refunds",
        1,
        version.pk,
    )
    assert RubricVersion.objects.get(pk=version.pk).dimensions == document["dimensions"]
    row = RubricAssessmentRow.objects.get(pk=assessment.pk)
    assert (row.run_id, row.version_id, row.score, row.blind) == (run.pk, version.pk, 0.75, True)
    assert RubricScoreRow.objects.get(pk=score.pk).dimension_scores == {"done": 0.75}
    assert RubricJob.objects.get(pk=job.pk).run_id == run.pk
    # the content type followed its model (permissions and the admin's log name it by content type)
    assert ContentType.objects.filter(app_label="rubrics", model="rubricjob").exists()
    assert not ContentType.objects.filter(app_label="reviews", model="rubricjob").exists()
    assert [m._meta.db_table for m in (Rubric, RubricVersion, RubricAssessmentRow, RubricScoreRow, RubricJob)] == [
        "reviews_rubric",
        "reviews_rubricversion",
        "reviews_rubricassessmentrow",
        "reviews_rubricscorerow",
        "reviews_rubricjob",
    ]
