"""Forms of the accounts pages: they check the shape of the input; the rules live in services and roles."""

from __future__ import annotations

from datetime import datetime

from django import forms
from django.utils import timezone

from .roles import SCOPES
from .selectors import AuditCursor, AuditFilters
from .tokens import MAX_EXPIRY_DAYS, expiry_after

_DAYS = f"a whole number of days from 1 to {MAX_EXPIRY_DAYS}, or leave it empty for a token that never expires"


class TokenCreateForm(forms.Form):
    name = forms.CharField(max_length=100, error_messages={"required": "Give the token a name."})
    scopes = forms.MultipleChoiceField(
        choices=[(scope, scope) for scope in SCOPES],
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "Choose at least one scope."},
    )
    expires_in_days = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_EXPIRY_DAYS,
        error_messages={
            "invalid": f"Enter {_DAYS}.",
            "min_value": "A token lasts at least 1 day.",
            "max_value": f"A token lasts at most {MAX_EXPIRY_DAYS} days.",
        },
    )

    def expires_at(self) -> datetime | None:
        """When the token expires, counted from now (None: never); call after is_valid()."""
        return expiry_after(self.cleaned_data.get("expires_in_days"), timezone.now())


class AgentCreateForm(forms.Form):
    name = forms.CharField(max_length=150, error_messages={"required": "Give the agent a name."})


class AuditFilterForm(forms.Form):
    actor = forms.CharField(required=False, max_length=150, help_text='a username, or "system"')
    verb = forms.CharField(required=False, max_length=80, help_text="prefix, e.g. auth.")
    target_type = forms.CharField(required=False, max_length=80)
    target_id = forms.CharField(required=False, max_length=120)
    date_from = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    date_to = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    after = forms.CharField(required=False, max_length=200, widget=forms.HiddenInput)

    def clean_after(self) -> AuditCursor | None:
        text = self.cleaned_data["after"]
        if not text:
            return None
        try:
            return AuditCursor.decode(text)
        except ValueError:
            raise forms.ValidationError("This page link is not valid any more; start from the first page.")

    def clean(self):
        cleaned = super().clean()
        start, end = cleaned.get("date_from"), cleaned.get("date_to")
        if start and end and start > end:
            self.add_error("date_to", "The end date is before the start date.")
        return cleaned

    def filters(self) -> AuditFilters:
        """The filters that passed validation (an invalid field is left out and reported on the form)."""
        data = getattr(self, "cleaned_data", {})
        return AuditFilters(
            actor=data.get("actor", "").strip(),
            verb=data.get("verb", "").strip(),
            target_type=data.get("target_type", "").strip(),
            target_id=data.get("target_id", "").strip(),
            date_from=data.get("date_from"),
            date_to=data.get("date_to"),
        )

    def cursor(self) -> AuditCursor | None:
        return getattr(self, "cleaned_data", {}).get("after")
