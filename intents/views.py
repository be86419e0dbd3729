"""views of intents."""
