"""selectors of procedures."""
