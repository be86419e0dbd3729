"""`manage.py graph <verb> --workspace WS`: each verb's happy path and its refusals (exit 2, one line, no write)."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from graphs.models import Revision, Workspace
from tests.graphs.factories import make_demo_workspace, make_empty_workspace, make_workspace

pytestmark = pytest.mark.django_db

QA = ["--workspace", "two-hop-qa"]


def run(*args):
    out = StringIO()
    call_command("graph", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def refused(*args) -> str:
    with pytest.raises(CommandError) as caught:
        run(*args)
    assert caught.value.returncode == 2
    message = str(caught.value)
    assert message.startswith("graph: ") and "\n" not in message
    return message


def test_init_seeds_the_skeleton():
    out = run("init", "--workspace", "fresh", "--task", "file tickets")
    digest = Revision.objects.get(workspace__slug="fresh").short_digest
    assert out == f"fresh: seeded graph {digest} (skeleton) with 2 node(s), 1 edge(s)\n"
    assert Workspace.objects.get(slug="fresh").task_description == "file tickets"


def test_init_onboards_a_hand_written_graph_and_prints_its_warnings(tmp_path):
    path = tmp_path / "graph.json"
    graph = {
        "nodes": [{"id": "lookup", "type": "ACTION", "description": "look it up"}],
        "edges": [
            {"source": "Start", "target": "lookup", "relation": "LEADS_TO", "guidance": "begin"},
            {"source": "lookup", "target": "End", "relation": "LEADS_TO", "guidance": "finish"},
        ],
    }
    path.write_text(json.dumps(graph))
    out = run("init", "--workspace", "hand", "--graph", str(path))
    lines = out.splitlines()
    assert lines[0].startswith("warning:skeleton_completed [Start]")
    assert lines[-1].endswith("(onboarded) with 3 node(s), 2 edge(s)")


def test_init_seeds_an_existing_empty_workspace():
    make_empty_workspace("bare")
    assert "bare: seeded graph" in run("init", "--workspace", "bare")


def test_init_refuses_a_populated_workspace_a_broken_file_and_a_bad_slug(tmp_path):
    make_workspace("full")
    assert refused("init", "--workspace", "full") == "graph: full already has a graph"
    broken = tmp_path / "broken.json"
    broken.write_text('{"nodes": [{"id": "a", "type": "ACTION"}], "edges": [{"source": "a", "target": "b"}]}')
    message = refused("init", "--workspace", "new", "--graph", str(broken))
    assert message.startswith(f"graph: cannot load {broken}: error:")
    assert refused("init", "--workspace", "new", "--graph", str(tmp_path / "missing.json")).endswith("no such file")
    not_json = tmp_path / "bad.json"
    not_json.write_text("{oops")
    assert "is not valid JSON" in refused("init", "--workspace", "new", "--graph", str(not_json))
    assert "valid workspace slug" in refused("init", "--workspace", "no spaces")
    assert not Workspace.objects.filter(slug="new").exists()


def test_show_prints_the_graph_nodes_and_edges():
    make_demo_workspace()
    out = run("show", *QA)
    assert "workspace: two-hop-qa (Two-hop question answering)" in out
    assert "graph: #1 " in out and "5 node(s), 5 edge(s), origin accepted, validation score 1.0" in out
    assert "  search -LEADS_TO-> read [search returned at least one document]" in out
    assert "  read -PROVIDES_INPUT_FOR-> search" in out
    assert "rejection memory: empty" in out


def test_show_refuses_an_unknown_or_empty_workspace():
    assert refused("show", "--workspace", "nope") == "graph: no workspace named 'nope'"
    make_empty_workspace("bare")
    assert refused("show", "--workspace", "bare").startswith("graph: bare has no graph yet")


def test_export_writes_the_four_files(tmp_path):
    make_demo_workspace()
    out = run("export", str(tmp_path / "out"), *QA)
    assert out.startswith("two-hop-qa: exported #1 ")
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["graph.json", "graph.md", "graph.mmd", "rejections.md"]
    mermaid = (tmp_path / "out" / "graph.mmd").read_text()
    assert "n3 -->|PROVIDES_INPUT_FOR| n4" in mermaid  # read=n3, search=n4
    assert json.loads((tmp_path / "out" / "graph.json").read_text())["nodes"][0]["id"] == "End"


def test_export_refuses_a_file_as_directory(tmp_path):
    make_demo_workspace()
    target = tmp_path / "file"
    target.write_text("x")
    assert "is not a directory" in refused("export", str(target), *QA)


def test_history_prints_one_line_per_revision_newest_first():
    make_demo_workspace()
    lines = run("history", *QA).splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("graph #1 ") and '"origin": "accepted"' in lines[0]
    assert lines[1].startswith("graph #0 ") and '"origin": "skeleton"' in lines[1]
    assert run("history", *QA, "--limit", "1").count("\n") == 1
    assert run("history", *QA, "--kind", "rejections") == ""
    assert "--limit must be 1 or more" in refused("history", *QA, "--limit", "0")


def test_diff_defaults_to_previous_head_against_head():
    make_demo_workspace()
    out = run("diff", *QA)
    first, second = (r.short_digest for r in Revision.objects.order_by("seq"))
    assert out.startswith(f"--- #0 {first}\n+++ #1 {second}\n")
    assert "+- `search` (ACTION)" in out
    assert run("diff", *QA, "--from", "1", "--to", "1").endswith("(no change)\n")


def test_diff_of_one_revision_starts_from_the_skeleton_and_refuses_bad_refs():
    make_workspace("one")
    assert run("diff", "--workspace", "one").startswith("--- skeleton\n")
    assert "(no change)" in run("diff", "--workspace", "one")
    make_demo_workspace()
    assert "no graph revision 9999" in refused("diff", *QA, "--from", "9999")
    assert "neither a revision number" in refused("diff", *QA, "--to", "xyz!")


def test_transfer_seeds_an_empty_workspace_and_refuses_when_nothing_moves():
    make_demo_workspace()
    out = run("transfer", *QA, "--to", "copy")
    assert out.startswith("copy: seeded graph ") and "(transfer:two-hop-qa)" in out
    assert (
        refused("transfer", *QA, "--to", "copy")
        == "graph: nothing transferred from two-hop-qa to copy: copy already has a graph"
    )
    make_empty_workspace("bare")
    assert refused("transfer", "--workspace", "bare", "--to", "x").endswith("it has no graph")


def test_guide_prints_the_localized_context_or_the_full_graph():
    make_demo_workspace()
    out = run("guide", *QA, "--query", "Which country?", "--step", "search", "--step", "read")
    assert out.startswith("localized at: read\nActive Cognitive Node: [read] (Type: ACTION)")
    paper = run("guide", *QA, "--query", "q", "--step", "search", "--hops", "1", "--paper-layout")
    assert "[search] → [read] (Condition: search returned at least one document)" in paper
    assert "Subsequent Horizon" not in paper
    unknown = run("guide", *QA, "--query", "q", "--step", "browse")
    assert unknown.startswith("(no match: full graph)\nComplete Procedural Graph: 5 nodes, 5 transitions")
    full = run("guide", *QA, "--query", "q", "--full")
    assert full.startswith("localized at: Start [full graph]\nComplete Procedural Graph")
    pinned = run("guide", *QA, "--query", "q", "--revision", "0")
    assert "[Start] → [End]" in pinned


def test_guide_refuses_bad_input():
    make_demo_workspace()
    with pytest.raises(CommandError):
        run("guide", *QA, "--query", "q", "--hops", "0")
    assert "no graph revision" in refused("guide", *QA, "--query", "q", "--revision", "42")
    assert refused("guide", "--workspace", "nope", "--query", "q") == "graph: no workspace named 'nope'"


def test_a_missing_workspace_option_is_a_usage_error():
    with pytest.raises(CommandError):
        run("show")
