"""services of llm."""
