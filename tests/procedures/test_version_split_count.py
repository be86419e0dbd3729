"""The version page's "Re-run with another split" names how many runs it splits anew: the version's training and
held-out runs (issue 25, item 5: it said "Splits the 0 runs")."""

import re

import pytest
from django.urls import reverse

from accounts.services import Actor
from procedures.mining import services as mining_services
from tests.conftest import logged_in

from .factories import REFUND, refund_runs

pytestmark = pytest.mark.django_db


def test_the_rerun_panel_counts_the_runs_the_version_was_mined_from(operator, django_capture_on_commit_callbacks):
    refund_runs()
    with django_capture_on_commit_callbacks(execute=True):
        version = mining_services.procedure_mine(actor=Actor(user=operator), intent=REFUND).version
    mined_from = len({*version.training_run_ids, *version.held_out_run_ids})
    assert mined_from > 0
    html = logged_in(operator).get(reverse("procedures:version", args=[version.pk])).content.decode()
    said = re.search(r"Splits the (\d+) runs this version was mined from", html)
    assert said is not None, "the re-run panel is shown to operators"
    assert int(said.group(1)) == mined_from
