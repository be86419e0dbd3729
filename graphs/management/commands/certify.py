"""`manage.py certify --workspace WS --revision SEQ [--evaluator KEY] [--wait]`: certify a graph revision.

Queues a certification (graphs.certification_services.graph_certify): the revision and what it would replace (the
workspace's active revision, or no graph) measured on the same validation tasks, and a certificate issued from the
pairs. Without --wait a worker measures it; with --wait this process runs the steps until it ends (or until agents
have jobs to answer: it then says so and leaves the rest to the worker). One line of result; bad input prints
"certify: <reason>" on stderr and exits 2, writing nothing.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.http import Http404

from accounts.services import Actor
from common.liveness import lease_owner
from graphs import selectors
from graphs.certification_services import CertificationRefused, certification_step, graph_certify

PREFIX = "certify: "
USAGE_ERROR = 2
MAX_STEPS = 20


class Refused(CommandError):
    def __init__(self, reason: str) -> None:
        super().__init__(PREFIX + reason, returncode=USAGE_ERROR)


class Command(BaseCommand):
    help = "Certify a graph revision: a paired evaluation against the active revision (or no graph)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--workspace", required=True, help="the workspace slug")
        parser.add_argument("--revision", required=True, help="the revision: its seq number or a digest prefix")
        parser.add_argument("--evaluator", help="the evaluator key (default: the one of the run that accepted it)")
        parser.add_argument("--wait", action="store_true", help="measure it in this process")

    def handle(self, *args, workspace: str, revision: str, evaluator: str | None, wait: bool, **options) -> None:
        try:
            found = selectors.workspace_by_slug(workspace)
            candidate = selectors.resolve_revision(found, revision)
        except (Http404, selectors.InvalidRef) as error:
            raise Refused(str(error)) from None
        try:
            certification, created = graph_certify(actor=Actor.system(), revision=candidate, evaluator=evaluator)
        except CertificationRefused as error:
            raise Refused(str(error)) from None
        against = certification.control.label if certification.control_id else "no graph"
        verb = "queued" if created else "already under way:"
        self.stdout.write(f"certification {certification.pk} of {candidate.label} against {against} {verb}")
        if not wait:
            return
        worker = lease_owner("certify")
        for _ in range(MAX_STEPS):
            certification.refresh_from_db()
            if not certification.is_open or certification.status == certification.Status.WAITING:
                break
            certification_step(certification_id=certification.pk, worker=worker)
        certification.refresh_from_db()
        self.stdout.write(self._result(certification))

    def _result(self, certification) -> str:
        if certification.status == certification.Status.WAITING:
            return f"waiting for agents: {certification.error}; a worker finishes it when they have answered"
        if certification.status != certification.Status.DONE:
            return f"{certification.status}: {certification.error}"
        summary = selectors.revision_certificate(certification.candidate_id) or {}
        state = "certified" if summary.get("passed") else "not certified"
        return f"{state}: {summary.get('sentence', '')}"
