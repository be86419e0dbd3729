"""tasks of trajectories."""
