"""The reviewed intent taxonomy: judgments of intent candidates, drafts of the next version and the versions
themselves (a promotable kind, intents.promotable). models (kept in the intents app: intents/models.py imports
them), services (every write), selectors, api (/api/v1/intents/taxonomy), schemas, views (the taxonomy page and the
intent review queue)."""
