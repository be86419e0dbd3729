"""The rubrics app on the run pages, registered with trajectories (trajectories.run_panels; RubricsConfig.ready
imports this module): the run page's rubric panel, whose cited steps the timeline marks, and the explorer's rubric
score column. Trajectories imports no rubric module; the panel's own address (rubrics:run_panel) answers its htmx
polls and forms."""

from __future__ import annotations

from trajectories.run_panels import RunPanel, register_listed_runs, register_run_panel

from . import selectors
from .views import PANEL, POLL_SECONDS


def rubric_panel(viewer, run, *, production: bool) -> RunPanel:
    panel = selectors.run_panel(viewer, run, production=production)
    return RunPanel(
        template=PANEL,
        context={"rubric_panel": panel, "poll_seconds": POLL_SECONDS},
        evidence=panel.evidence_by_step,
    )


register_run_panel("rubrics", rubric_panel)
register_listed_runs("rubrics", selectors.attach_rubric_scores)
