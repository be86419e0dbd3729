"""The explorer's filter form (GET): every field optional, bounded so that a filtered URL stays short."""

from __future__ import annotations

import unicodedata
from datetime import date, datetime, time, timedelta

from django import forms
from django.utils import timezone

from .models import Outcome
from .schemas import MAX_COST, MAX_STEPS_PER_RUN
from .selectors import KINDS, SORTS

SORT_CHOICES = [
    ("newest", "newest first"),
    ("oldest", "oldest first"),
    ("score_desc", "highest score"),
    ("score_asc", "lowest score"),
    ("cost_desc", "highest cost"),
    ("cost_asc", "lowest cost"),
    ("steps_desc", "most steps"),
    ("steps_asc", "fewest steps"),
    ("duration_desc", "longest"),
    ("duration_asc", "shortest"),
]
assert [name for name, _ in SORT_CHOICES] == list(SORTS)
KIND_CHOICES = [("production", "production runs"), ("evaluation", "evaluation runs"), ("all", "all runs")]
assert [name for name, _ in KIND_CHOICES] == list(KINDS)
EARLIEST_DAY = date(1900, 1, 1)
LATEST_DAY = date(9999, 12, 30)
MAX_SECONDS = 10**9
# (min field, max field) pairs checked for order
RANGES = (
    ("received_from", "received_to"),
    ("score_min", "score_max"),
    ("duration_min", "duration_max"),
    ("cost_min", "cost_max"),
    ("steps_min", "steps_max"),
)


class NormalizedText(forms.CharField):
    """Stripped text in Unicode NFC, as ingest stores run identity (trajectories.schemas.identity)."""

    def to_python(self, value):
        value = super().to_python(value)
        return unicodedata.normalize("NFC", value).strip() if value else value


def _day_field(label: str) -> forms.DateField:
    return forms.DateField(
        required=False,
        label=label,
        widget=forms.DateInput(attrs={"type": "date"}),
        error_messages={"invalid": "Enter a date as YYYY-MM-DD."},
    )


def _number(label: str, *, minimum: float | None = 0, maximum: float = MAX_SECONDS) -> forms.FloatField:
    return forms.FloatField(required=False, label=label, min_value=minimum, max_value=maximum)


class RunFilterForm(forms.Form):
    q = NormalizedText(required=False, max_length=200, label="Search")
    outcome = forms.ChoiceField(required=False, choices=[("", "any outcome"), *Outcome.choices])
    source = NormalizedText(required=False, max_length=100)
    tool = NormalizedText(required=False, max_length=60)
    intent = NormalizedText(required=False, max_length=200)
    kind = forms.ChoiceField(required=False, choices=KIND_CHOICES, label="Runs")
    received_from = _day_field("Received from")
    received_to = _day_field("Received until")
    score_min = _number("Score from", minimum=-1e12, maximum=1e12)
    score_max = _number("Score to", minimum=-1e12, maximum=1e12)
    duration_min = _number("Duration from (s)")
    duration_max = _number("Duration to (s)")
    cost_min = _number("Cost from", maximum=MAX_COST)
    cost_max = _number("Cost to", maximum=MAX_COST)
    steps_min = forms.IntegerField(required=False, label="Steps from", min_value=0, max_value=MAX_STEPS_PER_RUN)
    steps_max = forms.IntegerField(required=False, label="Steps to", min_value=0, max_value=MAX_STEPS_PER_RUN)
    sort = forms.ChoiceField(required=False, choices=SORT_CHOICES)
    cursor = forms.CharField(required=False, max_length=200, widget=forms.HiddenInput)

    def _clean_day(self, name: str) -> date | None:
        day = self.cleaned_data.get(name)
        if day is not None and not EARLIEST_DAY <= day <= LATEST_DAY:
            raise forms.ValidationError("Enter a date between 1900-01-01 and 9999-12-30.")
        return day

    def clean_received_from(self) -> date | None:
        return self._clean_day("received_from")

    def clean_received_to(self) -> date | None:
        return self._clean_day("received_to")

    def clean(self):
        data = super().clean()
        for low, high in RANGES:
            if data.get(low) is not None and data.get(high) is not None and data[low] > data[high]:
                self.add_error(high, f"must not be below “{self.fields[low].label}”.")
                data.pop(low, None)  # an inverted range is ignored whole
        return data

    def error_summary(self) -> str:
        """The invalid fields with their messages, one sentence each."""
        parts = []
        for name, errors in self.errors.items():
            field = self.fields.get(name)
            label = (field.label or name.replace("_", " ").capitalize()) if field is not None else "Filters"
            parts.append(f"{label}: {' '.join(errors)}")
        return " ".join(parts)

    def received_bounds(self) -> tuple[datetime | None, datetime | None]:
        """[start of `received_from`, start of the day after `received_to`) in the current time zone."""
        start = self.cleaned_data.get("received_from")
        end = self.cleaned_data.get("received_to")
        zone = timezone.get_current_timezone()
        return (
            datetime.combine(start, time.min, tzinfo=zone) if start else None,
            datetime.combine(end + timedelta(days=1), time.min, tzinfo=zone) if end else None,
        )
