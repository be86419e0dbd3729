"""tasks of graphs."""
