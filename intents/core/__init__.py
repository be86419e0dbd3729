"""Pure algorithms of intents: no Django import, no I/O."""
