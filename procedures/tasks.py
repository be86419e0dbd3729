"""tasks of procedures."""
