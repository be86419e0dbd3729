"""Helpers shared by test modules: a test module imports what it shares from here, never from another test module
(tests/test_architecture.py checks it).

- concurrency: `run_at_once`, calls released together on their own threads and connections.
- reviews: a review form post, a proposal of the fake kind, and graph workspaces with a candidate to review.
- rubrics: a refund run, a rubric version proposed through the real service, a form post, and `committed` (a fixture).
"""
