"""Runs as rubrics read them, always through trajectories' selectors (never its models): the production runs (the
ones agents sent from their work), one run as the rubric cores see it, and the rubric key of a run's intent.

The key is the declared intent label normalized as intents normalize it (intents.core.normalize_intent, a pure
function), so a rubric, procedure mining and the taxonomy agree on what one intent is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from intents.core import normalize_intent
from reviews.errors import Conflict, NotFound
from trajectories.selectors import run_queryset


@dataclass(frozen=True)
class StepView:
    ordinal: int
    tool: str
    arguments: Mapping[str, Any]
    summary: str
    ok: bool | None


@dataclass(frozen=True)
class RunView:
    """The `RunLike` the rubric cores read, built from a stored run whose steps are prefetched."""

    pk: int
    trajectory_id: str
    outcome: str
    intent: str
    steps: tuple[StepView, ...]


def intent_key(label: str) -> str:
    """The rubric key of a declared intent label."""
    return normalize_intent(label or "")


def all_runs():
    """Every stored run (trajectories.selectors.run_queryset), unevaluated."""
    return run_queryset()


def production_runs():
    """The runs agents sent in from their work: trajectories' own `production()`, which leaves out the runs a live
    replay made (source `waymark-evaluation`). Rubric proposals, judging started by people, people's assessments
    and agreement read only these; the replay gate's rubric floor alone judges evaluation runs."""
    return run_queryset().production()


def is_production(run_id: int) -> bool:
    return production_runs().filter(pk=run_id).exists()


def run_exists(run_id: int) -> bool:
    return run_queryset().filter(pk=run_id).exists()


def run_or_none(run_id: int):
    """The stored run (without its steps), or None."""
    return run_queryset().filter(pk=run_id).first()


def run_view(run) -> RunView:
    return RunView(
        pk=run.pk,
        trajectory_id=f"{run.source}:{run.external_id}",
        outcome=run.outcome,
        intent=run.intent,
        steps=tuple(
            StepView(
                ordinal=step.ordinal,
                tool=step.tool,
                arguments=dict(step.arguments or {}),
                summary=step.observation[:300],
                ok=step.ok,
            )
            for step in run.steps.all()
        ),
    )


def run_views(run_ids: Sequence[int]) -> list[RunView]:
    """The runs that exist among `run_ids`, in that order, as the cores see them (two queries)."""
    found = run_queryset().filter(pk__in=list(run_ids)).prefetch_related("steps")
    order = {pk: position for position, pk in enumerate(run_ids)}
    return [run_view(run) for run in sorted(found, key=lambda run: order[run.pk])]


def load_run(run_id: int | None, *, production: bool = False) -> RunView:
    """The run as the cores see it; with `production`, Conflict `evaluation_run` for a run a live replay made."""
    runs = production_runs() if production else run_queryset()
    run = runs.prefetch_related("steps").filter(pk=run_id).first() if run_id else None
    if run is None:
        if production and run_id and run_exists(run_id):
            raise Conflict(
                f"run {run_id} is an evaluation run (a live replay's): only production runs are judged and assessed",
                code="evaluation_run",
            )
        raise NotFound(f"no run {run_id}", code="unknown_run")
    return run_view(run)


def demo_run_ids(source: str, external_ids) -> dict[str, int]:
    """external id → run id of the runs of `source` among `external_ids` (seed_demo)."""
    rows = run_queryset().filter(source=source, external_id__in=list(external_ids))
    return dict(rows.values_list("external_id", "pk"))


def any_run_not_of(source: str, run_ids) -> bool:
    """Whether any existing run among `run_ids` is of another source than `source`."""
    return run_queryset().filter(pk__in=list(run_ids)).exclude(source=source).exists()
