"""The list page's filter form (GET): every field optional."""

from django import forms

from .models import Outcome


class RunFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Task contains")
    outcome = forms.ChoiceField(required=False, choices=[("", "any outcome"), *Outcome.choices])
    source = forms.CharField(required=False, max_length=100)
    tool = forms.CharField(required=False, max_length=60)
    intent = forms.CharField(required=False, max_length=200)
    cursor = forms.CharField(required=False, max_length=100, widget=forms.HiddenInput)
