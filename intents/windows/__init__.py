"""Window analyses of intent candidates: clusters and novelty against the active taxonomy (novel candidates become
alerts in the review queue), and drift reports between two analyses. models (kept in the intents app:
intents/models.py imports intents.windows.models), services (every write), selectors, api (/api/v1/intents/windows),
alerts_api (/api/v1/intents/alerts), schemas, forms, views (the windows, drift and alerts pages)."""
