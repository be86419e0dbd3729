"""selectors of trajectories."""
