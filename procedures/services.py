"""services of procedures."""
