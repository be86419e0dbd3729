"""tasks of llm."""
