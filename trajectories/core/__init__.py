"""Pure algorithms of trajectories: no Django import, no I/O."""
