"""Forms of the window pages: analyse a window, compare two analyses, decide a novelty alert.

The forms only shape the input; the services decide what may be written (WindowRefused is shown on the form).
"""

from __future__ import annotations

from typing import Any

from django import forms

from .models import DriftReport, NoveltyAlert
from .services import DEFAULT_MARGIN, DEFAULT_NOVELTY_THRESHOLD, DEFAULT_THRESHOLD, MAX_MARGIN

DATETIME_INPUT = forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")


class AnalyzeWindowForm(forms.Form):
    start = forms.DateTimeField(label="Candidates stored from", widget=DATETIME_INPUT)
    end = forms.DateTimeField(label="Stored before", widget=DATETIME_INPUT)
    threshold = forms.FloatField(
        min_value=-1,
        max_value=1,
        initial=DEFAULT_THRESHOLD,
        label="Similarity threshold",
        help_text="Candidates at least this similar (cosine) share a cluster.",
        widget=forms.NumberInput(attrs={"step": "0.01"}),
    )
    margin = forms.FloatField(
        min_value=0,
        max_value=MAX_MARGIN,
        initial=DEFAULT_MARGIN,
        label="Ambiguity margin",
        help_text="A member this close to another cluster's medoid is ambiguous.",
        widget=forms.NumberInput(attrs={"step": "0.01"}),
    )
    novelty_threshold = forms.FloatField(
        min_value=-1,
        max_value=1,
        initial=DEFAULT_NOVELTY_THRESHOLD,
        label="Novelty threshold",
        help_text="A candidate less similar than this to every reviewed intent is novel.",
        widget=forms.NumberInput(attrs={"step": "0.01"}),
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        start, end = data.get("start"), data.get("end")
        if start and end and start >= end:
            self.add_error("end", "the window must end after it starts")
        return data

    def analyze_arguments(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {key: data[key] for key in ("start", "end", "threshold", "margin", "novelty_threshold")}


class CompareForm(forms.Form):
    before = forms.TypedChoiceField(coerce=int, label="Before (window)")
    after = forms.TypedChoiceField(coerce=int, label="After (window)")
    matching = forms.ChoiceField(
        choices=[
            (DriftReport.Matching.IDENTITY, "shared medoid ids (the spec's default)"),
            (DriftReport.Matching.MEDOID, "nearest medoid above a threshold"),
        ],
        initial=DriftReport.Matching.IDENTITY,
        label="Match clusters by",
    )
    match_threshold = forms.FloatField(
        required=False,
        min_value=-1,
        max_value=1,
        label="Match threshold",
        help_text="Medoid matching only; empty: the after window's similarity threshold.",
        widget=forms.NumberInput(attrs={"step": "0.01"}),
    )

    def __init__(self, *args: Any, analyses: list | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = [
            (item.pk, f"#{item.pk} {item.window_start:%Y-%m-%d %H:%M} → {item.window_end:%Y-%m-%d %H:%M}")
            for item in analyses or []
        ]
        self.fields["before"].choices = choices
        self.fields["after"].choices = choices
        if len(choices) >= 2:
            self.fields["before"].initial = choices[1][0]
            self.fields["after"].initial = choices[0][0]


class DecideAlertForm(forms.Form):
    decision = forms.ChoiceField(
        choices=[(NoveltyAlert.Status.DISMISSED, "dismiss"), (NoveltyAlert.Status.PROMOTED, "promote to review")]
    )
    note = forms.CharField(required=False, max_length=2000)
