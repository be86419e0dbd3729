"""`manage.py run_demo_agent [--once] [--token T] [--url U]`: the demo environment's simulated support agent.

One loop serves both kinds of evaluation job, the demo's own only: through the Python client (waymark_client,
clients/python) it claims them (POST /api/v1/jobs/claim with kind procedure_replay matching the demo's intents, and
kind graph_evaluation matching the demo's workspaces: simulated answers never become evidence for anyone else's
procedure or graph), runs a replay job's procedure in
the simulated environment or follows a graph evaluation job's graph (procedures.demo_agent), and answers with the
run (POST /api/v1/jobs/{job}/result) — the client's job helper, `Waymark.work_jobs`. While the server is not up,
the token is not there yet, or there is no work, it waits with a growing pause (up to --max-wait seconds) instead
of failing; it never exits on an error unless --once is given. A job it cannot simulate is reported and left to
its lease (another agent may take it), and any other error is reported with its traceback and waited out like an
unreachable server: the demo agent is one of `make run`'s processes, and one of them ending stops the whole stack,
so nothing in a job's payload may end it (issue 24).

The token comes from --token, else WAYMARK_AGENT_TOKEN, else the file seed_demo writes (var/demo-agent-token).
"""

from __future__ import annotations

import logging
import os
import time
import traceback
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand
from waymark_client import (
    APIError,
    AuthenticationError,
    Job,
    PermissionDenied,
    RetryPolicy,
    Waymark,
    WaymarkConnectionError,
)

from graphs.demo import DEMO_SLUG, LAB_SLUG
from procedures.demo import DEMO_INTENTS
from procedures.demo_agent import simulate_job
from procedures.mining import intent_key

DEFAULT_URL = "http://127.0.0.1:8000"
TOKEN_FILENAME = "demo-agent-token"
LEASE_SECONDS = 120
# What the demo agent claims: (kinds, payload match) — the jobs of the demo's procedures and workspaces only.
DEMO_CLAIMS = (
    (("procedure_replay",), {"intent": sorted({intent_key(label) for label in DEMO_INTENTS})}),
    (("graph_evaluation",), {"workspace": [DEMO_SLUG, LAB_SLUG]}),
)
# The command waits between polls itself (growing up to --max-wait): the client only retries a request briefly.
RETRY = RetryPolicy(max_attempts=2, backoff=0.2)


class Unavailable(Exception):
    """The server cannot be reached or refuses us for now (down, no token yet, token refused)."""


def _token(explicit: str | None) -> str:
    if explicit:
        return explicit.strip()
    if os.environ.get("WAYMARK_AGENT_TOKEN"):
        return os.environ["WAYMARK_AGENT_TOKEN"].strip()
    path = Path(settings.VAR_DIR) / TOKEN_FILENAME
    return path.read_text().strip() if path.exists() else ""


def _simulate(job: Job) -> dict:
    return simulate_job(job.kind, job.payload)


class Command(BaseCommand):
    help = "Run the demo agent: claim replay and graph evaluation jobs over the API and answer them."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--once", action="store_true", help="answer the open jobs, then exit")
        parser.add_argument("--token", help="bearer token with the evaluations:run scope")
        parser.add_argument("--url", default=os.environ.get("WAYMARK_URL", DEFAULT_URL))
        parser.add_argument("--worker", default=f"demo-agent-{os.getpid()}")
        parser.add_argument("--max-wait", type=float, default=30.0, help="longest pause between polls (seconds)")

    def handle(self, *args, once: bool, token: str | None, url: str, worker: str, max_wait: float, **options):
        logging.getLogger("httpx2").setLevel(logging.WARNING)  # one line per answered job is ours, not one per poll
        wait = 1.0
        answered = 0
        while True:
            try:
                count = self.work(url=url, token=_token(token), worker=worker)
            except Unavailable as exc:
                if once:
                    self.stderr.write(f"demo agent: {exc}")
                    return
                self.stdout.write(f"demo agent: waiting for the server ({exc}); next try in {wait:.0f} s")
                count = 0
            except Exception:  # a bug or an answer the client did not expect: reported, never the end of the agent
                then = "" if once else f", next try in {wait:.0f} s"
                self.stderr.write(f"demo agent: unexpected error{then}\n{traceback.format_exc()}")
                if once:
                    return
                count = 0
            answered += count
            if once:
                self.stdout.write(f"demo agent: answered {answered} job(s)")
                return
            if count:
                wait = 1.0
                continue
            time.sleep(wait)
            wait = min(max_wait, wait * 2)

    def work(self, *, url: str, token: str, worker: str) -> int:
        """Claim and answer jobs until none is open. Returns how many were answered."""
        if not token:
            raise Unavailable("no agent token yet (run seed_demo or pass --token)")
        answered = 0
        with Waymark(url, token, retry=RETRY) as client:
            jobs = (
                outcome
                for kinds, match in DEMO_CLAIMS
                for outcome in client.work_jobs(
                    _simulate, worker=worker, kinds=kinds, match=match, lease_seconds=LEASE_SECONDS, on_error="skip"
                )
            )
            try:
                for outcome in jobs:
                    job = outcome.job
                    if outcome.answered:
                        answered += 1
                        self.stdout.write(f"demo agent: {job.kind} job {job.id} answered ({outcome.run['outcome']})")
                    elif outcome.run is None:  # the simulation raised: the job waits for its lease to run out
                        self.stderr.write(
                            f"demo agent: job {job.id} not run: {type(outcome.error).__name__}: {outcome.error}"
                        )
                    else:
                        self.stderr.write(f"demo agent: job {job.id} refused: {outcome.error}")
            except WaymarkConnectionError as exc:
                raise Unavailable(str(exc)) from exc
            except (AuthenticationError, PermissionDenied) as exc:
                raise Unavailable(f"the server refused the token ({exc.status})") from exc
            except APIError as exc:
                raise Unavailable(f"the server answered {exc.status} ({exc.code})") from exc
        return answered
