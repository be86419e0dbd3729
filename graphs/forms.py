"""Forms of the graph pages: try guidance, compare revisions."""

from __future__ import annotations

from django import forms

from .schemas import MAX_HOPS, MAX_QUERY_CHARS, MAX_STEPS

RAW_MODES = [("raw_subgraph", "localized (raw_subgraph)"), ("raw_full", "whole graph (raw_full)")]


class GuidanceForm(forms.Form):
    """The steps an agent took, one action per line; the page shows the context the agent would be given."""

    query = forms.CharField(required=False, max_length=MAX_QUERY_CHARS, widget=forms.TextInput(attrs={"size": 60}))
    steps = forms.CharField(
        required=False,
        label="Steps taken (one action per line)",
        widget=forms.Textarea(attrs={"rows": 4, "cols": 30, "placeholder": "search\nread"}),
    )
    hops = forms.IntegerField(min_value=1, max_value=MAX_HOPS, initial=2)
    mode = forms.ChoiceField(choices=RAW_MODES, initial="raw_subgraph")
    paper_layout = forms.BooleanField(required=False, label="Paper layout (no relation labels)")
    revision = forms.CharField(required=False, max_length=64, label="Revision (seq or digest; empty: active)")

    def clean_steps(self) -> list[dict[str, str]]:
        lines = [line.strip() for line in self.cleaned_data["steps"].splitlines() if line.strip()]
        if len(lines) > MAX_STEPS:
            raise forms.ValidationError(f"at most {MAX_STEPS} steps")
        if any(len(line) > 200 for line in lines):
            raise forms.ValidationError("an action has at most 200 characters")
        return [{"action": line, "args": None, "observation": ""} for line in lines]


class DiffForm(forms.Form):
    from_ref = forms.CharField(required=False, max_length=64, label="From")
    to_ref = forms.CharField(required=False, max_length=64, label="To")
