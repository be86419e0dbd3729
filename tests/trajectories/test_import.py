"""manage.py import_trajectories: the shared τ-bench file, JSONL items, idempotency and bad input."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from trajectories.models import Run, Step

from .factories import run_item

pytestmark = pytest.mark.django_db
TAU_BENCH = Path(settings.BASE_DIR).parent / "shared" / "data" / "tau-bench-airline" / "gpt-4o-airline.json"


def run_command(*args) -> str:
    out = StringIO()
    call_command("import_trajectories", *map(str, args), stdout=out)
    return out.getvalue()


@pytest.mark.skipif(not TAU_BENCH.exists(), reason=f"shared data not present at {TAU_BENCH}")
def test_it_imports_the_shared_tau_bench_file_completely_and_only_once():
    output = run_command(TAU_BENCH, "--format", "openai-chat", "--source", "tau-bench-airline")
    assert "200 runs read: 200 created (1164 steps), 0 already present" in output
    assert Run.objects.count() == 200 and Step.objects.count() == 1164
    assert Run.objects.filter(outcome="success").count() == 84
    assert Run.objects.filter(outcome="failure", score=0.0).count() == 116
    assert Run.objects.filter(intent="task-0").count() == 4
    first = Run.objects.get(source="tau-bench-airline", external_id="0:0")
    assert first.task.startswith("You are mia_li_3668.")
    assert (
        Step.objects.filter(ok=False, observation__startswith="Error:").count()
        == Step.objects.filter(ok=False).count()
        > 0
    )
    assert not Step.objects.filter(ok=None).exists()

    again = run_command(TAU_BENCH, "--format", "openai-chat", "--source", "tau-bench-airline")
    assert "0 created (0 steps), 200 already present" in again
    assert Run.objects.count() == 200 and Step.objects.count() == 1164


def test_it_imports_jsonl_run_items(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(json.dumps(run_item(external_id=f"j{n}")) for n in range(3)) + "\n\n")
    assert "3 runs read: 3 created" in run_command(path, "--format", "jsonl", "--source", "batch-file")
    assert set(Run.objects.values_list("source", flat=True)) == {"batch-file"}


def test_openai_chat_also_reads_jsonl_records(tmp_path):
    record = {"task_id": 5, "trial": 1, "reward": 1, "traj": [{"role": "user", "content": "Book a flight"}]}
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps(record) + "\n")
    run_command(path, "--format", "openai-chat")
    run = Run.objects.get()
    assert (run.source, run.external_id, run.task, run.outcome) == ("openai-chat", "5:1", "Book a flight", "success")


@pytest.mark.parametrize(
    ("content", "fmt", "reason"),
    [
        ("{broken\n", "jsonl", "line 1 is not valid JSON"),
        ('{"source": "s", "external_id": "x"}\n{"external_id": "y"}\n', "jsonl", "runs[1].source: Field required"),
        ("[1, 2", "openai-chat", "not a valid JSON array"),
        ('[{"task_id": 1, "traj": []}]', "openai-chat", "record 0: the record has no trial"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_imports_nothing(tmp_path, content, fmt, reason):
    path = tmp_path / "bad.txt"
    path.write_text(content)
    with pytest.raises(CommandError) as caught:
        run_command(path, "--format", fmt)
    assert caught.value.returncode == 2 and reason in str(caught.value) and "\n" not in str(caught.value)
    assert Run.objects.count() == 0


def test_a_missing_file_exits_2(tmp_path):
    with pytest.raises(CommandError) as caught:
        run_command(tmp_path / "absent.jsonl", "--format", "jsonl")
    assert caught.value.returncode == 2
