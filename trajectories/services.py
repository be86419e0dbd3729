"""services of trajectories."""
