"""`manage.py graph <verb> --workspace WS`: the reference CLI verbs (spec §9) over the workspace's revision chains.

Verbs: init [--graph FILE | --from-text FILE [--solutions DIR] [--tools a,b] --model SPEC], show [--tail N],
export DIR, history [--kind K] [--limit N], diff [--from REF] [--to REF], transfer --to WS,
guide --query Q [--step A]... [--hops N] [--full] [--paper-layout] [--revision REF],
evolve [--rounds N] [--evaluator KEY] [--gate tie|strict] [--max-model-calls N] [--max-evaluations N]
[--max-seconds S] [--wait], rejections [--full N] [--refiner-view].
Bad input prints "graph: <reason>" on stderr and exits 2; nothing is written.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.http import Http404
from django.urls import reverse

from accounts.services import Actor
from common.liveness import lease_owner
from graphs import revisions, selectors, services
from graphs.core import GraphError, to_graph_json, to_markdown, to_mermaid
from graphs.core.bootstrap import bootstrap_graph
from graphs.evolution import selectors as evolution_selectors
from graphs.evolution import services as evolution
from graphs.guidance import NoActiveGraph, workspace_guidance
from graphs.models import EvolutionRound, EvolutionRun, Revision, Workspace
from graphs.revisions import HeadMoved
from graphs.schemas import MAX_HOPS
from llm.core import ModelError
from llm.factory import chat_model_from_spec
from llm.recording import RecordedChatModel

PREFIX = "graph: "
USAGE_ERROR = 2
VERBS = ("init", "show", "export", "history", "diff", "transfer", "guide", "evolve", "rejections")
BOOTSTRAP_SUBJECT = "graphs.bootstrap"
WAIT_POLL_SECONDS = 2.0


class Refused(CommandError):
    """A one-line reason; exit status 2."""

    def __init__(self, reason: str) -> None:
        super().__init__(PREFIX + reason, returncode=USAGE_ERROR)


def score(value: float | None) -> str:
    """A score as the reference prints it (0.5, 1.0); "-" when there is none."""
    return "-" if value is None else str(round(float(value), 4))


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
        init.add_argument("--from-text", dest="from_text", metavar="FILE", help="bootstrap from a problem statement")
        init.add_argument("--solutions", metavar="DIR", help="a directory of worked solutions, one text file each")
        init.add_argument(
            "--tools", nargs="+", action="extend", metavar="a,b", help="the tool (ACTION) names, comma-separated"
        )
        init.add_argument("--model", metavar="SPEC", help="anthropic:MODEL_ID or scripted:FILE (a JSON array)")
        init.add_argument("--retries", help="refiner retries after a malformed reply (default 1)")
        init.add_argument("--cycle-policy", dest="cycle_policy", choices=("repair", "allow"), help="default repair")
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
        evolve = verb("evolve", "start an evolution run; with --wait, run it here and print one line per round")
        evolve.add_argument("--rounds", default="10", help=f"rounds to run, 1 to {evolution.MAX_ROUNDS} (default 10)")
        evolve.add_argument("--evaluator", default="two-hop", help="two-hop, agents, or a name from settings")
        evolve.add_argument("--gate", default="tie", choices=("tie", "strict"), help="tie (default) or strict")
        evolve.add_argument("--max-model-calls", dest="max_model_calls", help="budget: model calls")
        evolve.add_argument("--max-evaluations", dest="max_evaluations", help="budget: evaluations")
        evolve.add_argument("--max-seconds", dest="max_seconds", help="budget: seconds")
        evolve.add_argument("--wait", action="store_true", help="run the steps in this process until the run ends")
        rejections = verb("rejections", "the rejection memory: the operator's markdown, or what the refiner sees")
        rejections.add_argument("--full", default="5", help="rounds shown in full, newest first (default 5)")
        rejections.add_argument("--refiner-view", dest="refiner_view", action="store_true")

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

    def do_init(
        self,
        slug: str,
        *,
        graph_file: str | None,
        title: str,
        task: str,
        from_text: str | None = None,
        solutions: str | None = None,
        tools: list[str] | None = None,
        model: str | None = None,
        retries: str | None = None,
        cycle_policy: str | None = None,
        **_: Any,
    ) -> None:
        if from_text is not None:
            if graph_file is not None:
                raise Refused("--graph and --from-text: give one of them, not both")
            self._init_from_text(
                slug,
                problem_file=from_text,
                title=title,
                task=task,
                solutions_dir=solutions,
                tools=tools,
                model_spec=model,
                retries=retries,
                cycle_policy=cycle_policy,
            )
            return
        given = [
            flag
            for flag, value in (
                ("--tools", tools),
                ("--solutions", solutions),
                ("--model", model),
                ("--retries", retries),
                ("--cycle-policy", cycle_policy),
            )
            if value is not None
        ]
        if given:
            raise Refused(f"{', '.join(given)} only apply with --from-text")
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
        memory = evolution_selectors.rejection_memory(workspace)
        counts = ", ".join(f"{count} {kind}" for kind, count in memory.counts().items() if count)
        self._line(
            f"rejection memory: {counts} (through round {memory.iteration})"
            if memory.entries
            else "rejection memory: empty"
        )
        self._line("nodes:")
        for node in graph.nodes.values():
            self._line(f"  {node.id} ({node.type}): {node.description}")
        self._line("edges:")
        for edge in graph.edges:
            condition = f" [{edge.condition}]" if edge.condition else ""
            self._line(f"  {edge.source} -{edge.relation}-> {edge.target}{condition}")
        if tail and memory.entries:
            self._line("last rounds:")
            for entry in memory.entries[-tail:]:
                self._line(f"  {entry.headline()}")

    def do_export(self, slug: str, *, directory: str, **_: Any) -> None:
        workspace = self._workspace(slug)
        head = self._head(workspace)
        graph = selectors.graph_of(head)
        target = Path(directory)
        if target.exists() and not target.is_dir():
            raise Refused(f"{directory} is not a directory")
        files = {
            "graph.json": to_graph_json(graph),
            "graph.md": to_markdown(graph),
            "graph.mmd": to_mermaid(graph),
            "rejections.md": evolution_selectors.rejection_memory(workspace).render_markdown() + "\n",
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
        elif revision is None and workspace.canary_control_id is not None:  # the active revision, not the control
            revision = str(workspace.active_revision.seq)
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

    # -- init --from-text ----------------------------------------------------------------------------------------

    def _init_from_text(
        self,
        slug: str,
        *,
        problem_file: str,
        title: str,
        task: str,
        solutions_dir: str | None,
        tools: list[str] | None,
        model_spec: str | None,
        retries: str | None,
        cycle_policy: str | None,
    ) -> None:
        if not model_spec:
            raise Refused("init --from-text needs --model (anthropic:MODEL_ID or scripted:FILE)")
        role_retries = whole_number(retries, "--retries", default=1, maximum=5)
        existing = Workspace.objects.filter(slug=slug).first()
        if existing is not None and revisions.head(existing, Revision.Kind.GRAPH) is not None:
            raise Refused(f"{slug} already has a graph")
        statement = read_problem(problem_file)
        worked = read_solutions(solutions_dir) if solutions_dir is not None else []
        tool_names = [name.strip() for value in tools or [] for name in value.split(",") if name.strip()]
        if not worked and not tool_names:
            raise Refused("init --from-text needs --tools when no worked solution is given (--solutions DIR)")
        chat_model = model_from_spec(model_spec)
        vocabulary = existing.vocabulary if existing is not None else None
        recorded = RecordedChatModel(chat_model, subject=(BOOTSTRAP_SUBJECT, slug))
        try:
            result = bootstrap_graph(
                statement,
                recorded,
                solutions=worked,
                tools=tool_names or None,
                vocabulary=vocabulary,
                cycle_policy=cycle_policy or "repair",
                role_retries=role_retries,
            )
        except ModelError as exc:
            raise Refused(f"the model did not answer: {exc}") from None
        except ValueError as exc:
            raise Refused(str(exc)) from None
        if not result.ok:
            raise Refused(result.refusal())
        meta = result.seed_meta()
        try:
            if existing is None:
                seeded = services.workspace_create(
                    actor=self.actor,
                    slug=slug,
                    title=title,
                    task_description=task or statement,
                    graph=result.graph,
                    seed_meta=meta,
                    activate=False,
                )
            else:
                seeded = services.graph_seed(
                    actor=self.actor, workspace=existing, graph=result.graph, seed_meta=meta, activate=False
                )
        except GraphError as exc:
            raise Refused(result.refusal() if not exc.diagnostics else f"bootstrap refused: {exc}") from None
        except HeadMoved:
            raise Refused(f"{slug} already has a graph") from None
        except ValueError as exc:
            raise Refused(str(exc)) from None
        graph = selectors.graph_of(seeded.revision)
        for diagnostic in result.diagnostics:
            self._line(str(diagnostic))
        self._line(
            f"{slug}: seeded graph {seeded.revision.short_digest} ({seeded.origin}) with "
            f"{len(graph.nodes)} node(s), {len(graph.edges)} edge(s)"
        )
        self._line(
            f"bootstrapped from {result.solutions} worked solution(s) in {result.refiner_calls} refiner call(s): "
            "a starting point, not a validated graph; the first evolve run measures it as its baseline. "
            "It is not active: promote it through a review."
        )

    # -- evolve --------------------------------------------------------------------------------------------------

    def do_evolve(
        self,
        slug: str,
        *,
        rounds: str,
        evaluator: str,
        gate: str,
        max_model_calls: str | None,
        max_evaluations: str | None,
        max_seconds: str | None,
        wait: bool,
        **_: Any,
    ) -> None:
        workspace = self._workspace(slug)
        count = whole_number(rounds, "--rounds", default=10, minimum=1, maximum=evolution.MAX_ROUNDS)
        budget = {
            "max_model_calls": whole_number(max_model_calls, "--max-model-calls"),
            "max_evaluations": whole_number(max_evaluations, "--max-evaluations"),
            "max_seconds": seconds(max_seconds, "--max-seconds"),
        }
        try:
            run = evolution.evolution_start(
                actor=self.actor,
                workspace=workspace,
                rounds=count,
                evaluator=evaluator,
                gate={"kind": gate},
                budget={key: value for key, value in budget.items() if value is not None},
                enqueue=not wait,
            )
        except evolution.EvolutionRefused as exc:
            raise Refused(str(exc)) from None
        if not wait:
            self._line(
                f"{slug}: evolution run {run.pk} queued ({count} round(s), evaluator {evaluator}, gate {gate}); "
                "a worker runs it"
            )
            page = reverse("graphs:evolution", args=[slug, run.pk])
            self._line(
                f"watch it: the page {page}, GET /api/v1/graphs/{slug}/evolutions/{run.pk} (and …/rounds), "
                f"or manage.py graph rejections --workspace {slug}"
            )
            return
        self._line(f"{slug}: evolution run {run.pk}: {count} round(s), evaluator {evaluator}, gate {gate}")
        run = self._run_here(run)
        self._line(f"validation: baseline {score(run.baseline_score)} -> retained {score(run.best_score)}")
        self._line(f"stopped: {run.stopped_reason or '-'} ({run.status}), {run.rounds_done} round(s)")
        if run.status == EvolutionRun.Status.FAILED:
            raise CommandError(f"graph: evolution run {run.pk} failed: {run.error}", returncode=1)

    def _run_here(self, run: EvolutionRun) -> EvolutionRun:
        """Step the run in this process until it ends, printing each round once it is recorded. A step another
        process holds (the reaper handed the run to a worker) is waited for."""
        worker = lease_owner("graph-evolve")
        printed: set[int] = set()
        while True:
            result = evolution.evolution_step(run_id=run.pk, worker=worker)
            self._print_rounds(run, printed)
            run.refresh_from_db()
            if run.is_finished:
                return run
            if result is None:
                wait = evolution.lease_wait(run.pk)
                time.sleep(min(max(wait or 0.0, 0.2), WAIT_POLL_SECONDS))
            elif run.status == EvolutionRun.Status.WAITING:
                time.sleep(WAIT_POLL_SECONDS)  # evaluation jobs still out with agents

    def _print_rounds(self, run: EvolutionRun, printed: set[int]) -> None:
        for round_ in EvolutionRound.objects.filter(run=run).exclude(iteration__in=printed).order_by("iteration"):
            printed.add(round_.iteration)
            self._line(round_line(round_))

    # -- rejections ----------------------------------------------------------------------------------------------

    def do_rejections(self, slug: str, *, full: str, refiner_view: bool, **_: Any) -> None:
        count = whole_number(full, "--full", default=5)
        workspace = self._workspace(slug)
        memory = evolution_selectors.rejection_memory(workspace)
        text = memory.render_for_refiner(full_entries=count) if refiner_view else memory.render_markdown(count)
        self._line(text.rstrip("\n"))


def round_line(round_: EvolutionRound) -> str:
    """One line per round: iteration, OUTCOME, the retained and candidate scores, and what else says why."""
    line = f"round {round_.iteration}: {round_.outcome.upper()}"
    if round_.mode:
        line += f" [{round_.mode}]"
    line += f" retained {score(round_.retained_score)}, candidate {score(round_.candidate_score)}"
    if round_.disposition:
        line += f", {round_.disposition}"
    if round_.duplicate_of is not None:
        line += f", duplicate of round {round_.duplicate_of}"
    errors = [d for d in round_.diagnostics or [] if isinstance(d, dict) and d.get("severity") == "error"]
    if errors:
        line += f", {len(errors)} error(s): " + "; ".join(str(d.get("code", "?")) for d in errors)
    return line


def whole_number(
    value: str | None, flag: str, *, default: int | None = None, minimum: int = 0, maximum: int | None = None
) -> int | None:
    """A whole number from a flag (the default when absent); Refused for anything else or out of range."""
    if value is None:
        return default
    text = str(value).strip()
    bound = f"from {minimum} to {maximum}" if maximum is not None else f"of {minimum} or more"
    if not (text.isascii() and text.isdigit()) or not minimum <= int(text) <= (maximum or int(text)):
        raise Refused(f"{flag} must be a whole number {bound}, not {value!r}")
    return int(text)


def seconds(value: str | None, flag: str) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not 0 <= number < float("inf"):
        raise Refused(f"{flag} must be a number of seconds, 0 or more, not {value!r}")
    return number


def read_problem(path: str) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or ("not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else exc)
        raise Refused(f"cannot read the problem statement {path}: {reason}") from None
    if not text.strip():
        raise Refused(f"the problem statement {path} is empty")
    return text


def read_solutions(directory: str) -> list[str]:
    """The worked solutions: every visible file of `directory`, in name order (hidden files are skipped)."""
    folder = Path(directory)
    if not folder.is_dir():
        raise Refused(f"--solutions {directory} must be a directory")
    files = sorted(path for path in folder.iterdir() if path.is_file() and not path.name.startswith("."))
    texts = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or "not UTF-8 text"
            raise Refused(f"cannot read the solution {path}: {reason}") from None
        if text.strip():
            texts.append(text)
    if not texts:
        raise Refused(f"--solutions {directory} holds no text files")
    return texts


def model_from_spec(spec: str):
    try:
        return chat_model_from_spec(spec)
    except ValueError as exc:
        if spec.startswith("scripted:"):
            raise Refused(f"cannot read scripted replies from {spec.removeprefix('scripted:')}: {exc}") from None
        raise Refused(str(exc)) from None


__all__ = ["VERBS", "Command"]
