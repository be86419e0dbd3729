"""The rubric score a list of runs shows (rubrics.selectors.scores_for_runs): each run's newest score, under
whichever version scored it last, its required failures decoded, in one plain query."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from rubrics import selectors as rubric_selectors
from rubrics.models import Rubric, RubricScoreRow, RubricVersion
from tests.trajectories.factories import ingest, run_item
from trajectories.models import Run

pytestmark = pytest.mark.django_db


def version(rubric: Rubric, number: int) -> RubricVersion:
    return RubricVersion.objects.create(rubric=rubric, number=number, document={}, digest=f"{number:064d}")


def test_each_run_gets_its_newest_score_in_one_query():
    ids = ingest(run_item(), run_item(), run_item()).created_ids
    first, second, unscored = Run.objects.filter(pk__in=ids).order_by("id")
    rubric = Rubric.objects.create(key="refunds")
    old, new = version(rubric, 1), version(rubric, 2)
    now = timezone.now()
    RubricScoreRow.objects.create(run=first, version=old, overall=0.25, updated_at=now - timedelta(hours=1))
    RubricScoreRow.objects.create(
        run=first, version=new, overall=0.75, required_failures=["cites <evidence>"], updated_at=now
    )
    RubricScoreRow.objects.create(run=second, version=new, overall=0.5, updated_at=now - timedelta(days=1))
    RubricScoreRow.objects.create(run=second, version=old, overall=1.0, updated_at=now)  # rescored under v1 later

    with CaptureQueriesContext(connection) as captured:
        scores = rubric_selectors.scores_for_runs([first, second, unscored])

    assert len(captured) == 1
    assert scores[first.pk] == rubric_selectors.ListedScore(
        overall=0.75, required_failures=["cites <evidence>"], version_number=2
    )
    assert scores[second.pk] == rubric_selectors.ListedScore(overall=1.0, required_failures=[], version_number=1)
    assert unscored.pk not in scores
    assert rubric_selectors.scores_for_runs([]) == {}
