"""seed_demo adds the two-hop question-answering workspace once: skeleton #0, the five-node graph #1, active."""

import io

import pytest
from django.core.management import call_command

from graphs.models import Revision, Workspace

pytestmark = pytest.mark.django_db


def test_seed_demo_adds_the_two_hop_workspace_once(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    call_command("seed_demo", stdout=out)
    text = out.getvalue()
    assert "graphs: workspace two-hop-qa created, active revision #1" in text
    assert "graphs: workspace two-hop-qa already there, active revision #1" in text
    workspace = Workspace.objects.get()
    assert workspace.task_description == "two-hop question answering over a small corpus"
    seqs = list(
        Revision.objects.filter(workspace=workspace, kind="graph").values_list("seq", flat=True).order_by("seq")
    )
    # #0 and #1 are the graphs demo; the reviews demo then appends a candidate (#2) for its open promotion request.
    assert seqs == [0, 1, 2]
    assert Revision.objects.get(workspace=workspace, kind="graph", seq=1).meta["origin"] == "accepted"
    assert workspace.active_revision.seq == 1
