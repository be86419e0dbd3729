"""Pure algorithms of graphs: no Django import, no I/O."""
