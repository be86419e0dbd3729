"""selectors of reviews."""
