"""Pure algorithms of llm: no Django import, no I/O."""
