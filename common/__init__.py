"""Shared helpers every app imports: the API's Error shape, cursors, strict JSON bodies, text checks, rate limits,
ingest admission, chart specs, number formats, per-process copies, the demo seeders' registry, the reaper's and the
liveness check's registries, the transient errors tasks retry on.

This package imports no app and not config (an import-linter contract): an app registers with it (a demo seeder, a
reaper, leased work), it never reaches into an app. It is not a Django app: no models, no templates.
"""
