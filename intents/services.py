"""services of intents."""
