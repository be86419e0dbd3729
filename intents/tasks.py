"""tasks of intents."""
