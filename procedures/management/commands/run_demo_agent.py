"""`manage.py run_demo_agent [--once] [--token T] [--url U]`: the demo environment's simulated support agent.

One loop serves both kinds of evaluation job: it claims them over the HTTP API (POST /api/v1/jobs/claim with kinds
procedure_replay and graph_evaluation), runs a replay job's procedure in the simulated environment or follows a
graph evaluation job's graph (procedures.demo_agent), and answers with the run (POST /api/v1/jobs/{job}/result).
While the server is not up, the token is not there yet, or there is no work, it waits with a growing pause (up to
--max-wait seconds) instead of failing; it never exits on an error unless --once is given.

The token comes from --token, else WAYMARK_AGENT_TOKEN, else the file seed_demo writes (var/demo-agent-token).
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from procedures.demo_agent import JOB_SIMULATIONS, simulate_job

DEFAULT_URL = "http://127.0.0.1:8000"
TOKEN_FILENAME = "demo-agent-token"


class Unavailable(Exception):
    """The server cannot be reached or refuses us for now (down, no token yet, token refused)."""


class AgentClient:
    def __init__(self, base_url: str, token: str, timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        request = urllib.request.Request(
            self.base_url + path,
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                return exc.code, json.loads(raw) if raw else None
            except ValueError:
                return exc.code, None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise Unavailable(str(exc)) from exc


def _token(explicit: str | None) -> str:
    if explicit:
        return explicit.strip()
    if os.environ.get("WAYMARK_AGENT_TOKEN"):
        return os.environ["WAYMARK_AGENT_TOKEN"].strip()
    path = Path(settings.VAR_DIR) / TOKEN_FILENAME
    return path.read_text().strip() if path.exists() else ""


class Command(BaseCommand):
    help = "Run the demo agent: claim replay and graph evaluation jobs over the API and answer them."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--once", action="store_true", help="answer the open jobs, then exit")
        parser.add_argument("--token", help="bearer token with the evaluations:run scope")
        parser.add_argument("--url", default=os.environ.get("WAYMARK_URL", DEFAULT_URL))
        parser.add_argument("--worker", default=f"demo-agent-{os.getpid()}")
        parser.add_argument("--max-wait", type=float, default=30.0, help="longest pause between polls (seconds)")

    def handle(self, *args, once: bool, token: str | None, url: str, worker: str, max_wait: float, **options):
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
        client = AgentClient(url, token)
        answered = 0
        while True:
            claim = {"worker": worker, "lease_seconds": 120, "kinds": list(JOB_SIMULATIONS)}
            status, job = client.post("/api/v1/jobs/claim", claim)
            if status == 204:
                return answered
            if status in (401, 403):
                raise Unavailable(f"the server refused the token ({status})")
            if status != 200 or not isinstance(job, dict):
                raise Unavailable(f"claim answered {status}")
            run = simulate_job(str(job.get("kind")), job.get("payload") or {})
            status, body = client.post(f"/api/v1/jobs/{job['id']}/result", {"run": run})
            if status in (200, 201):
                answered += 1
                self.stdout.write(f"demo agent: {job.get('kind')} job {job['id']} answered ({run['outcome']})")
            else:
                self.stderr.write(f"demo agent: job {job['id']} refused ({status}): {body}")
