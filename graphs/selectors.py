"""selectors of graphs."""
