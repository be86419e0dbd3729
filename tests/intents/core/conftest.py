import pytest

from trajectories.core import TrajectoryRun, TrajectoryStep


def make_run(trajectory_id: str, length: int, outcome: str = "success") -> TrajectoryRun:
    steps = tuple(TrajectoryStep(index, f"tool_{index}", "inspect", ok=True) for index in range(length))
    return TrajectoryRun(trajectory_id=trajectory_id, steps=steps, outcome=outcome)


@pytest.fixture
def runs() -> tuple[TrajectoryRun, ...]:
    """Three runs: t1 has 3 steps, t2 has 5 steps, t3 has 1 step."""
    return (make_run("t1", 3), make_run("t2", 5), make_run("t3", 1))
