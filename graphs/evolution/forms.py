"""The form that starts an evolution run: rounds, evaluator, gate (with its parameters) and an optional budget.

The form only shapes the input; evolution_start decides what may run (EvolutionRefused is shown on the form).
"""

from __future__ import annotations

from typing import Any

from django import forms

from .services import MAX_ROUNDS
from .sources import TWO_HOP, evaluator_choices

GATE_CHOICES = [
    ("tie", "tie-accepting: keep a candidate that scores at least as well"),
    ("strict", "strict improvement: keep a candidate that beats the retained score by the minimum delta"),
    ("paired", "paired: bootstrap the per-task deltas, keep a candidate that wins often enough"),
]
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
    max_model_calls = _count("Model calls", "Stop before the call that would exceed this.")
    max_output_tokens = _count("Output tokens", "Output tokens of every model call together.")
    max_evaluations = _count("Evaluations", "Measurements of candidates and the baseline.")
    max_seconds = forms.IntegerField(
        required=False, min_value=1, max_value=7 * 24 * 3600, label="Seconds", help_text="Wall time of the run."
    )

    GATE_PARAMETERS = {"strict": ("minimum_delta",), "paired": ("min_win_probability", "min_tasks")}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["evaluator"].choices = evaluator_choices()

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        gate = data.get("gate")
        for kind, names in self.GATE_PARAMETERS.items():
            for name in names:
                if data.get(name) is not None and gate != kind:
                    self.add_error(name, f"this applies to the {kind} gate only; choose it or leave this empty")
        return data

    def start_arguments(self) -> dict[str, Any]:
        """The keyword arguments of evolution_start (the form must be valid)."""
        data = self.cleaned_data
        gate: dict[str, Any] = {"kind": data["gate"]}
        for name in self.GATE_PARAMETERS.get(data["gate"], ()):
            if data.get(name) is not None:
                gate[name] = data[name]
        budget = {name: data[name] for name in BUDGET_FIELDS if data.get(name) is not None}
        return {"rounds": data["rounds"], "evaluator": data["evaluator"], "gate": gate, "budget": budget or None}

    def gate_fields(self) -> list[forms.BoundField]:
        return [self[name] for names in self.GATE_PARAMETERS.values() for name in names]

    def budget_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in BUDGET_FIELDS]
