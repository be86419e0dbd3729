"""selectors of intents."""
