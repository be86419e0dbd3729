"""Pure algorithms of trajectories: no Django import, no I/O."""

from .steps import DEFAULT_FAMILY_MAP, TrajectoryRun, TrajectoryStep, normalize_steps

__all__ = ["DEFAULT_FAMILY_MAP", "TrajectoryRun", "TrajectoryStep", "normalize_steps"]
