"""What other apps add to the run pages, registered from their AppConfig.ready: trajectories imports no app that
reads runs (import-linter: "trajectories imports no consumer"), so the apps that do come to it.

- A *run panel* is a section of one run's page: `register_run_panel(name, source)`, where `source(viewer, run,
  production=...)` returns a `RunPanel` (a template and its context, rendered with the request like any page part,
  and the steps it cites as evidence, which the step timeline marks) or None to show nothing. The rubrics app's
  panel (score, assessments, a person's assessment, judging) is one.
- A *listed-runs annotation* sets attributes on the runs of an explorer page before its rows are built:
  `register_listed_runs(name, annotate)`, where `annotate(runs, viewer=..., production=...)` runs one query for the
  page at most (`production(run)` says whether a run is a production run). The explorer's rubric column reads
  `run.rubric_score`, which the rubrics app sets (None, or anything with `overall`, `required_failures` and
  `version_number`).

Panels and annotations run in the order they were registered (the order of INSTALLED_APPS).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RunPanel:
    template: str
    context: dict[str, Any] = field(default_factory=dict)
    # step position on the page → what cites it ("task_completed (rita)"): the timeline marks these steps
    evidence: Mapping[int, list[str]] = field(default_factory=dict)


RunPanelSource = Callable[..., RunPanel | None]
ListedRunsAnnotation = Callable[..., None]

_panels: dict[str, RunPanelSource] = {}
_annotations: dict[str, ListedRunsAnnotation] = {}


def register_run_panel(name: str, source: RunPanelSource) -> None:
    """Register (or re-register, as AppConfig.ready may run more than once) a run page panel under `name`."""
    _panels[name] = source


def register_listed_runs(name: str, annotate: ListedRunsAnnotation) -> None:
    _annotations[name] = annotate


def run_panels(viewer: Any, run: Any, *, production: bool) -> list[RunPanel]:
    """The panels of `run`'s page as `viewer` may see them."""
    found = (source(viewer, run, production=production) for source in _panels.values())
    return [panel for panel in found if panel is not None]


def annotate_listed_runs(runs: list, *, viewer: Any, production: Callable[[Any], bool]) -> list:
    for annotate in _annotations.values():
        annotate(runs, viewer=viewer, production=production)
    return runs


def evidence_steps(panels: list[RunPanel]) -> frozenset[int]:
    """The step positions any panel cites."""
    return frozenset(step for panel in panels for step in panel.evidence)
