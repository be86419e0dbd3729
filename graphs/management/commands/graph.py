"""`manage.py graph <verb> --workspace WS`: the reference CLI verbs (spec §9) over the workspace's revision chains.

Verbs: init [--graph FILE], show [--tail N], export DIR, history [--kind K] [--limit N], diff [--from REF] [--to REF],
transfer --to WS, guide --query Q [--step A]... [--hops N] [--full] [--paper-layout] [--revision REF].
`rejections` arrives with evolution. Bad input prints "graph: <reason>" on stderr and exits 2; nothing is written.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.http import Http404

from accounts.services import Actor
from graphs import revisions, selectors, services
from graphs.core import GraphError, to_graph_json, to_markdown, to_mermaid
from graphs.guidance import NoActiveGraph, workspace_guidance
from graphs.models import Revision, Workspace
from graphs.revisions import HeadMoved
from graphs.schemas import MAX_HOPS

PREFIX = "graph: "
USAGE_ERROR = 2
VERBS = ("init", "show", "export", "history", "diff", "transfer", "guide")


class Refused(CommandError):
    """A one-line reason; exit status 2."""

    def __init__(self, reason: str) -> None:
        super().__init__(PREFIX + reason, returncode=USAGE_ERROR)


def hop_count(value: str) -> int:
    number = int(value)
    if not 1 <= number <= MAX_HOPS:
        raise ValueError(value)
    return number


class Command(BaseCommand):
    help = "Procedural graph workspaces: init, show, export, history, diff, transfer, guide (see spec §9)."

    def add_arguments(self, parser) -> None:
        verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)

        def verb(name: str, help_text: str):
            sub = verbs.add_parser(
                name, help=help_text, called_from_command_line=getattr(parser, "called_from_command_line", None)
            )
            sub.add_argument("--workspace", required=True, help="the workspace slug")
            return sub

        init = verb("init", "seed a workspace: the skeleton, or a hand-written refiner-shape JSON graph")
        init.add_argument("--graph", dest="graph_file", help="a JSON file {nodes, edges} in the refiner shape")
        init.add_argument("--title", default="", help="the title of a new workspace")
        init.add_argument("--task", default="", help="the task description of a new workspace")
        show = verb("show", "the workspace, its head graph, nodes and edges")
        show.add_argument("--tail", type=int, default=10, help="rejection headlines to show")
        export = verb("export", "write graph.json, graph.md, graph.mmd and rejections.md")
        export.add_argument("directory", metavar="DIR")
        history = verb("history", "one line per revision, newest first")
        history.add_argument("--kind", default="graph", choices=revisions.KINDS)
        history.add_argument("--limit", type=int, default=20)
        diff = verb("diff", "a unified diff of graph.md between two revisions")
        diff.add_argument("--from", dest="from_ref", help="a seq number or a unique digest prefix")
        diff.add_argument("--to", dest="to_ref", help="a seq number or a unique digest prefix")
        transfer = verb("transfer", "copy this workspace's head graph into an empty workspace")
        transfer.add_argument("--to", dest="target", required=True, help="the target workspace slug")
        guide = verb("guide", "the raw guidance context an agent would get (no model)")
        guide.add_argument("--query", required=True)
        guide.add_argument("--step", action="append", default=[], dest="steps", metavar="ACTION")
        guide.add_argument("--hops", type=hop_count, default=2, help=f"1 to {MAX_HOPS}")
        guide.add_argument("--full", action="store_true", help="serialize the whole graph (raw_full)")
        guide.add_argument("--paper-layout", action="store_true", help="no relation labels (the paper's layout)")
        guide.add_argument("--revision", help="a seq number or digest (default: the active graph, else the head)")

    def execute(self, *args, **options):
        try:
            return super().execute(*args, **options)
        except Refused as exc:
            if getattr(self, "_called_from_command_line", False):
                self.stderr.write(str(exc))
                sys.exit(exc.returncode)
            raise

    def handle(self, *args, verb: str, workspace: str, **options) -> None:
        self.actor = Actor.system()
        getattr(self, f"do_{verb}")(workspace, **options)

    # -- helpers -------------------------------------------------------------------------------------------------

    def _workspace(self, slug: str) -> Workspace:
        found = Workspace.objects.filter(slug=slug).first()
        if found is None:
            raise Refused(f"no workspace named {slug!r}")
        return found

    def _head(self, workspace: Workspace) -> Revision:
        head = revisions.head(workspace, Revision.Kind.GRAPH)
        if head is None:
            raise Refused(f"{workspace.slug} has no graph yet (run: manage.py graph init --workspace {workspace.slug})")
        return head

    def _line(self, text: str = "") -> None:
        self.stdout.write(text)

    # -- verbs ---------------------------------------------------------------------------------------------------

    def do_init(self, slug: str, *, graph_file: str | None, title: str, task: str, **_: Any) -> None:
        if graph_file is not None and not Path(graph_file).is_file():
            raise Refused(f"cannot load {graph_file}: no such file")
        existing = Workspace.objects.filter(slug=slug).first()
        try:
            if existing is None:
                seeded = services.workspace_create(
                    actor=self.actor, slug=slug, title=title, task_description=task, graph=graph_file
                )
            else:
                if revisions.head(existing, Revision.Kind.GRAPH) is not None:
                    raise Refused(f"{slug} already has a graph")
                seeded = services.graph_seed(actor=self.actor, workspace=existing, graph=graph_file)
        except GraphError as exc:
            details = "; ".join(str(d) for d in exc.diagnostics) or str(exc)
            raise Refused(f"cannot load {graph_file}: {details}") from None
        except HeadMoved:
            raise Refused(f"{slug} already has a graph") from None
        except ValueError as exc:
            raise Refused(str(exc)) from None
        for warning in seeded.warnings:
            self._line(str(warning))
        graph = selectors.graph_of(seeded.revision)
        self._line(
            f"{slug}: seeded graph {seeded.revision.short_digest} ({seeded.origin}) with "
            f"{len(graph.nodes)} node(s), {len(graph.edges)} edge(s)"
        )

    def do_show(self, slug: str, *, tail: int, **_: Any) -> None:
        if tail < 0:
            raise Refused("--tail must be 0 or more")
        workspace = self._workspace(slug)
        head = self._head(workspace)
        graph = selectors.graph_of(head)
        meta = head.meta or {}
        active = workspace.active_revision
        self._line(f"workspace: {workspace.slug}" + (f" ({workspace.title})" if workspace.title else ""))
        if workspace.task_description:
            self._line(f"task: {workspace.task_description}")
        self._line(
            f"graph: #{head.seq} {head.short_digest}, {len(graph.nodes)} node(s), {len(graph.edges)} edge(s), "
            f"origin {meta.get('origin', '-')}, validation score {meta.get('validation_score', '-')}"
        )
        self._line(f"active: #{active.seq} {active.short_digest}" if active else "active: none")
        rejection_revisions = Revision.objects.filter(workspace=workspace, kind=Revision.Kind.REJECTIONS).count()
        self._line(
            f"rejection memory: {rejection_revisions} revision(s)" if rejection_revisions else "rejection memory: empty"
        )
        self._line("nodes:")
        for node in graph.nodes.values():
            self._line(f"  {node.id} ({node.type}): {node.description}")
        self._line("edges:")
        for edge in graph.edges:
            condition = f" [{edge.condition}]" if edge.condition else ""
            self._line(f"  {edge.source} -{edge.relation}-> {edge.target}{condition}")
        if tail and rejection_revisions:
            self._line(f"last rejections: shown once evolution lands ({rejection_revisions} revision(s) stored)")

    def do_export(self, slug: str, *, directory: str, **_: Any) -> None:
        workspace = self._workspace(slug)
        head = self._head(workspace)
        graph = selectors.graph_of(head)
        target = Path(directory)
        if target.exists() and not target.is_dir():
            raise Refused(f"{directory} is not a directory")
        rejections = Revision.objects.filter(workspace=workspace, kind=Revision.Kind.REJECTIONS).count()
        files = {
            "graph.json": to_graph_json(graph),
            "graph.md": to_markdown(graph),
            "graph.mmd": to_mermaid(graph),
            "rejections.md": "# Rejection memory\n\n"
            + (
                f"{rejections} revision(s) stored; the operator view arrives with evolution.\n"
                if rejections
                else "(empty)\n"
            ),
        }
        try:
            target.mkdir(parents=True, exist_ok=True)
            for name, text in files.items():
                (target / name).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise Refused(f"cannot write to {directory}: {exc.strerror or exc}") from None
        self._line(f"{slug}: exported #{head.seq} {head.short_digest} to {target}: {', '.join(files)}")

    def do_history(self, slug: str, *, kind: str, limit: int, **_: Any) -> None:
        if limit < 1:
            raise Refused("--limit must be 1 or more")
        workspace = self._workspace(slug)
        for revision in revisions.list_revisions(workspace, kind, limit=limit):
            meta = dict(revision.meta or {})
            if isinstance(meta.get("edits"), dict):
                meta["edits"] = {
                    key: len(value) if isinstance(value, list) else value for key, value in meta["edits"].items()
                }
            created = revision.created_at.isoformat().replace("+00:00", "Z")
            described = json.dumps(meta, sort_keys=True, ensure_ascii=False)
            self._line(f"{kind} #{revision.seq} {revision.short_digest} {created} {described}")

    def do_diff(self, slug: str, *, from_ref: str | None, to_ref: str | None, **_: Any) -> None:
        workspace = self._workspace(slug)
        self._head(workspace)
        try:
            diff = selectors.graph_diff(workspace, from_ref, to_ref)
        except (Http404, selectors.InvalidRef) as exc:
            raise Refused(str(exc)) from None
        self._line(diff.header)
        self._line(diff.text.rstrip("\n") if diff.text else "(no change)")

    def do_transfer(self, slug: str, *, target: str, **_: Any) -> None:
        source = self._workspace(slug)
        try:
            revision = services.graph_transfer(actor=self.actor, source=source, target_slug=target)
        except ValueError as exc:
            raise Refused(str(exc)) from None
        if revision is None:
            reason = (
                "it has no graph"
                if revisions.head(source, Revision.Kind.GRAPH) is None
                else f"{target} already has a graph"
            )
            raise Refused(f"nothing transferred from {slug} to {target}: {reason}")
        self._line(
            f"{target}: seeded graph {revision.short_digest} (transfer:{slug}) from {revision.meta['source_ref'][:12]}"
        )

    def do_guide(
        self,
        slug: str,
        *,
        query: str,
        steps: list[str],
        hops: int,
        full: bool,
        paper_layout: bool,
        revision: str | None,
        **_: Any,
    ) -> None:
        workspace = self._workspace(slug)
        if revision is None and workspace.active_revision_id is None:
            revision = str(self._head(workspace).seq)
        try:
            answer = workspace_guidance(
                slug=slug,
                query=query,
                steps=[{"action": action, "args": None, "observation": ""} for action in steps],
                mode="raw_full" if full else "raw_subgraph",
                hops=hops,
                window=3,
                revision=revision,
                include_relations=not paper_layout,
            )
        except (Http404, NoActiveGraph, selectors.InvalidRef) as exc:
            raise Refused(str(exc)) from None
        head = f"localized at: {answer.node_id}" if answer.node_id is not None else "(no match: full graph)"
        if answer.node_id is not None and answer.used_full_graph:
            head += " [full graph]"
        self._line(head)
        self._line(answer.text)


__all__ = ["VERBS", "Command"]
