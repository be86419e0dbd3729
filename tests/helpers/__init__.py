"""Helpers shared by test modules: a test module imports what it shares from here, never from another test module
(tests/test_architecture.py checks it).

- browser: axe-core's serious and critical violations on a page or a path, and their report.
- celery_workers: `redis_app` (a fixture: a real Celery worker on the test Redis), `wait_for`, `replay_done`.
- concurrency: `run_at_once`, calls released together on their own threads and connections.
- evolution_crashes: an evolution worker's death in process (`die_once`, `run_through_one_crash`) and the scenario's
  ledger.
- graphs: `big_graph` (a long chain, for query counts) and `csrf` (the CSRF header of a client's cookie).
- otlp_spans: hand-made OpenTelemetry spans (`span`, OpenInference's `llm_out`, span events) and `micros`.
- procedure_runs: `run` and the Hypothesis strategies of runs (`tool_runs`, `repeated_runs`) for procedure learning.
- refiner_fakes: the refiner's scripted replies (`BUILD`, `EMPTY`, `BROKEN`) and `ExplodingModel`.
- reviews: a review form post, a proposal of the fake kind, and graph workspaces with a candidate to review.
- rubrics: a refund run, a rubric version proposed through the real service, a form post, and `committed` (a fixture).
- watch: runs that followed a procedure version and one look of the watch.
"""
