"""selectors of llm."""
