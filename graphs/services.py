"""services of graphs."""
