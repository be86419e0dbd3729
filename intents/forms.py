"""The form that starts an intent proposal run: window, declared-intent filter, failed runs only, batch size.

The form only shapes the input; intent_proposal_start decides what may run (ProposalRefused is shown on the form).
"""

from __future__ import annotations

from typing import Any

from django import forms

from .services import DEFAULT_BATCH_SIZE, MAX_BATCH_SIZE

DATETIME_INPUT = forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")


class StartProposalForm(forms.Form):
    window_from = forms.DateTimeField(
        required=False, label="Stored from", widget=DATETIME_INPUT, help_text="Empty: from the first run."
    )
    window_to = forms.DateTimeField(
        required=False, label="Stored before", widget=DATETIME_INPUT, help_text="Empty: up to now."
    )
    intent = forms.CharField(
        required=False, max_length=200, label="Declared intent", help_text="Only runs that declared this label."
    )
    failed_only = forms.BooleanField(required=False, label="Failed runs only")
    only_new = forms.BooleanField(required=False, label="Only runs no proposal covered yet")
    batch_size = forms.IntegerField(
        min_value=1,
        max_value=MAX_BATCH_SIZE,
        initial=DEFAULT_BATCH_SIZE,
        help_text=f"Runs per model call (1 to {MAX_BATCH_SIZE}).",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        start, end = data.get("window_from"), data.get("window_to")
        if start and end and start >= end:
            self.add_error("window_to", "the window must end after it starts")
        return data

    def start_arguments(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "window_from": data.get("window_from"),
            "window_to": data.get("window_to"),
            "intent": data.get("intent") or "",
            "failed_only": bool(data.get("failed_only")),
            "only_new": bool(data.get("only_new")),
            "batch_size": data["batch_size"],
        }
