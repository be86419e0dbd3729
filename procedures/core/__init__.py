"""Pure algorithms of procedures: no Django import, no I/O."""
