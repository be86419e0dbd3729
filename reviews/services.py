"""services of reviews."""
