"""The form that starts an evolution run: rounds, evaluator, gate (with its parameters) and an optional budget.

The form only shapes the input; evolution_start decides what may run (EvolutionRefused is shown on the form).
"""

from __future__ import annotations

import json
from typing import Any

from django import forms

from common.text import SURROGATE_MESSAGE, dotted, first_unencodable

from .services import MAX_ROUNDS
from .sources import TWO_HOP, evaluator_choices

GATE_CHOICES = [
    ("tie", "tie-accepting: keep a candidate that scores at least as well"),
    ("strict", "strict improvement: keep a candidate that beats the retained score by the minimum delta"),
    ("paired", "paired: bootstrap the per-task deltas, keep a candidate that wins often enough"),
    ("objective", "objective: metrics with intervals (lexicographic or pareto), for evaluators that report metrics"),
]
OBJECTIVE_EXAMPLE = (
    '{"metrics": [{"name": "quality", "unit": "score", "direction": "maximize", "lower_bound": 0, '
    '"upper_bound": 1, "min_improvement": 0.02}], "mode": "lexicographic"}'
)
BUDGET_FIELDS = ("max_model_calls", "max_output_tokens", "max_evaluations", "max_seconds")


def _count(label: str, help_text: str) -> forms.IntegerField:
    return forms.IntegerField(
        required=False, min_value=0, max_value=10**9, label=label, help_text=help_text, widget=forms.NumberInput
    )


class StartRunForm(forms.Form):
    rounds = forms.IntegerField(
        min_value=1, max_value=MAX_ROUNDS, initial=4, help_text=f"Rounds of refine, measure, gate (1 to {MAX_ROUNDS})."
    )
    evaluator = forms.ChoiceField(choices=(), initial=TWO_HOP, help_text="Where the candidate's score comes from.")
    gate = forms.ChoiceField(choices=GATE_CHOICES, initial="tie", widget=forms.RadioSelect)
    minimum_delta = forms.FloatField(
        required=False,
        min_value=0.0,
        max_value=1.0,
        label="Minimum delta (strict gate)",
        help_text="How much the candidate must beat the retained score by; empty: any improvement.",
    )
    min_win_probability = forms.FloatField(
        required=False,
        min_value=0.5,
        max_value=1.0,
        label="Minimum win probability (paired gate)",
        help_text="From 0.5 to 1; empty: 0.9.",
    )
    min_tasks = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=100_000,
        label="Minimum paired tasks (paired gate)",
        help_text="Empty: 20.",
    )
    objective = forms.CharField(
        required=False,
        label="Objective (objective gate)",
        widget=forms.Textarea(attrs={"rows": 4, "placeholder": OBJECTIVE_EXAMPLE}),
        help_text="An ObjectiveSpec document: metrics (name, unit, direction, bounds, margins), mode, alpha.",
    )
    context = forms.CharField(
        required=False,
        label="Evaluation context (objective gate)",
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="An ObjectiveContext document: evaluation design, evaluator version, cohort, budget profile, "
        "evidence partition, expected task ids, measurement basis; objective_digest is filled in when left out.",
    )
    max_model_calls = _count("Model calls", "Stop before the call that would exceed this.")
    max_output_tokens = _count("Output tokens", "Output tokens of every model call together.")
    max_evaluations = _count("Evaluations", "Measurements of candidates and the baseline.")
    max_seconds = forms.IntegerField(
        required=False, min_value=1, max_value=7 * 24 * 3600, label="Seconds", help_text="Wall time of the run."
    )

    GATE_PARAMETERS = {
        "strict": ("minimum_delta",),
        "paired": ("min_win_probability", "min_tasks"),
        "objective": ("objective", "context"),
    }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["evaluator"].choices = evaluator_choices()

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        gate = data.get("gate")
        for kind, names in self.GATE_PARAMETERS.items():
            for name in names:
                if data.get(name) not in (None, "") and gate != kind:
                    self.add_error(name, f"this applies to the {kind} gate only; choose it or leave this empty")
        if gate == "objective":
            self._clean_objective(data)
        return data

    def _clean_objective(self, data: dict[str, Any]) -> None:
        """Both documents parse as JSON objects; the context names the objective's digest unless it says otherwise."""
        from graphs.core.objectives import ObjectiveSpec

        documents = {}
        for name in ("objective", "context"):
            text = (data.get(name) or "").strip()
            if not text:
                self.add_error(name, "the objective gate needs this document")
                continue
            try:
                value = json.loads(text)
            except ValueError as error:
                self.add_error(name, f"not JSON: {error}")
                continue
            if not isinstance(value, dict):
                self.add_error(name, "must be a JSON object")
                continue
            if (where := first_unencodable(value)) is not None:  # a "\ud800" escape: cannot be stored or shown
                self.add_error(name, f"{SURROGATE_MESSAGE}: at {dotted(where)}")
                continue
            documents[name] = value
        if len(documents) < 2:
            return
        try:
            digest = ObjectiveSpec.from_document(documents["objective"]).digest
        except (ValueError, TypeError, KeyError) as error:
            self.add_error("objective", f"not a valid objective: {error}")
            return
        documents["context"].setdefault("objective_digest", digest)
        data["objective_document"], data["context_document"] = documents["objective"], documents["context"]

    def start_arguments(self) -> dict[str, Any]:
        """The keyword arguments of evolution_start (the form must be valid)."""
        data = self.cleaned_data
        gate: dict[str, Any] = {"kind": data["gate"]}
        if data["gate"] == "objective":
            gate.update(objective=data["objective_document"], context=data["context_document"])
        else:
            for name in self.GATE_PARAMETERS.get(data["gate"], ()):
                if data.get(name) is not None:
                    gate[name] = data[name]
        budget = {name: data[name] for name in BUDGET_FIELDS if data.get(name) is not None}
        return {"rounds": data["rounds"], "evaluator": data["evaluator"], "gate": gate, "budget": budget or None}

    def gate_fields(self) -> list[forms.BoundField]:
        return [self[name] for kind, names in self.GATE_PARAMETERS.items() if kind != "objective" for name in names]

    def objective_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in self.GATE_PARAMETERS["objective"]]

    def budget_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in BUDGET_FIELDS]
