"""Pure algorithms of reviews: no Django import, no I/O."""
