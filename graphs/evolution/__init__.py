"""Graph evolution in the product: runs as records, the reference loop on the revision chains, Celery steps.

* stores.py   — the reference RevisionStore over `graphs.models.Revision`, and the rejection store that writes each
                round's `EvolutionRound` row in the transaction of its rejection-memory revision.
* sources.py  — where traces and scores come from: stored runs, the built-in two-hop environment, Python evaluators
                named in settings, evaluation jobs answered by agents.
* services.py — start, step, cancel, reap: every write of a run.
* selectors.py — what the pages and the API read.
"""
