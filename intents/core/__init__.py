"""Pure algorithms of intents: no Django import, no I/O."""

from .normalize import normalize_intent

__all__ = ["normalize_intent"]
