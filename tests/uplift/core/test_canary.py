"""Canary assignment: a pure function of parent, run key and share; pinned runs keep their arm; bad keys are absent."""

import subprocess
import sys

from uplift.core.canary import CANARY, CONTROL, MAX_KEY, arm_for, clean_key, position, serve


def test_the_share_of_canary_runs_is_the_share_asked_for():
    arms = [arm_for("ws", f"run-{n}", 0.1) for n in range(20000)]
    assert 0.09 < arms.count(CANARY) / len(arms) < 0.11


def test_assignment_is_the_same_in_another_process():
    keys = [f"run-{n}" for n in range(50)]
    here = [arm_for("support", key, 0.3) for key in keys]
    code = (
        "from uplift.core.canary import arm_for;"
        f"print(','.join(arm_for('support', f'run-{{n}}', 0.3) for n in range({len(keys)})))"
    )
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert there.split(",") == here


def test_a_growing_share_keeps_every_canary_run_in_the_canary():
    keys = [f"k{n}" for n in range(2000)]
    small = {key for key in keys if arm_for("p", key, 0.1) == CANARY}
    large = {key for key in keys if arm_for("p", key, 0.3) == CANARY}
    assert small <= large and len(large) > len(small)


def test_a_pin_keeps_its_arm_whatever_the_share_and_a_stale_pin_is_ignored():
    key = next(f"k{n}" for n in range(1000) if arm_for("p", f"k{n}", 0.5) == CANARY)
    assert serve("p", run_key=key, pin="rev-new", share=0.0, canary_ref="rev-new", control_ref="rev-old") == CANARY
    assert serve("p", run_key=key, pin="rev-old", share=1.0, canary_ref="rev-new", control_ref="rev-old") == CONTROL
    assert serve("p", run_key=key, pin="rev-gone", share=0.5, canary_ref="rev-new", control_ref="rev-old") == CANARY


def test_no_key_or_a_garbage_key_gets_the_control():
    for key in (None, "", "   ", "x" * (MAX_KEY + 1), "run\x00one", "rün", "\u202erun"):
        assert clean_key(key) == ""
        assert arm_for("p", key, 0.99) == CONTROL


def test_positions_are_independent_across_parents():
    same = sum((position("a", f"k{n}") < 0.5) == (position("b", f"k{n}") < 0.5) for n in range(4000))
    assert 1800 < same < 2200
