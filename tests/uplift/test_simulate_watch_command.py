"""manage.py simulate_watch with tiny arguments: every figure is printed with its aim, the same for a seed, and bad
arguments are refused cleanly."""

import csv
import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

TINY = ["--artifacts", "10", "--seed", "3", "--max-canary-runs", "200", "--held-out", "40", "--look-every", "20"]


def run(*args) -> list[str]:
    out = io.StringIO()
    call_command("simulate_watch", *args, stdout=out)
    return out.getvalue().splitlines()


def test_it_prints_every_figure_with_its_aim(tmp_path):
    path = tmp_path / "artifacts.csv"
    lines = run(*TINY, "--csv", str(path))
    assert lines[0] == "simulate_watch: 10 artifacts (3 helpful, 3 neutral, 2 harmful, 2 regression), seed 3"
    assert lines[2].startswith("watch: canary share 0.1, alpha 0.05, a look every 20 canary runs, at most 200")
    assert lines[3].startswith("realized live uplift: the canary's mean minus the control's over the first 200 canary")
    text = "\n".join(lines)
    for metric in ("success", "score"):
        live = "realized live uplift over the first 200 canary runs"
        assert f"\ncoverage, {metric}, every artifact, {live}: " in text
        assert f"\ncoverage, {metric}, every artifact, true effect: " in text
        assert f"\ncoverage, {metric}, certified, {live}: " in text
        secondary = f"secondary: coverage, {metric}, every artifact, live uplift at the watch's stop (biased by"
        assert f"\n{secondary} optional stopping" in text
    headline = next(line for line in lines if line.startswith("coverage, success, every artifact, realized live"))
    assert headline.endswith(("aim ≥ 0.90: met", "aim ≥ 0.90: NOT MET"))
    secondary = next(line for line in lines if line.startswith("secondary: coverage, success"))
    assert secondary.endswith("no aim (reported)")
    coverage = next(line for line in lines if line.startswith("coverage, success, every artifact, true effect"))
    assert coverage.endswith(("aim ≥ 0.90: met", "aim ≥ 0.90: NOT MET"))
    assert any(line.startswith("false rollback rate (true effect ≥ 0): ") and "aim ≤ 0.05" in line for line in lines)
    assert any(line.startswith("missed regressions of −10 points within 200 canary runs: ") for line in lines)
    assert any(line.startswith("median canary runs to roll back a −10-point regression: ") for line in lines)
    assert sum(line.startswith("class ") and "promoted" in line for line in lines) == 4
    assert lines[-2].startswith(("all aims met", "aims not met: "))
    assert lines[-1].startswith("elapsed: ")
    rows = list(csv.DictReader(path.open()))
    assert len(rows) == 10 and {row["class"] for row in rows} == {"helpful", "neutral", "harmful", "regression"}
    columns = {"horizon_control_runs", "success_horizon", "success_at_stop", "score_horizon", "score_at_stop"}
    assert columns <= set(rows[0])


def test_a_seed_prints_the_same_figures():
    assert run(*TINY)[:-1] == run(*TINY)[:-1]  # all but the elapsed time


def test_bad_arguments_are_refused_cleanly():
    with pytest.raises(CommandError, match="canary share"):
        run("--artifacts", "2", "--canary-share", "1.5")
