"""tasks of reviews."""
