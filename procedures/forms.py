"""Forms of the procedure pages: mine now, amend and the rubric floor (operators)."""

from django import forms


class MineForm(forms.Form):
    intent = forms.CharField(max_length=200, help_text="the declared intent label, e.g. refund_request")
    held_out_share = forms.FloatField(initial=0.3, min_value=0.05, max_value=0.95, label="Held-out share")
    seed = forms.IntegerField(initial=17, min_value=0, max_value=2**31 - 1)
    live = forms.BooleanField(required=False, label="Also replay live with agents")


class AmendForm(forms.Form):
    """One precondition or failure exit per line; saving makes a new version with this one as parent."""

    preconditions = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}), max_length=7000)
    failure_exits = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}), max_length=7000)

    def lines(self, name: str) -> list[str]:
        return [line.strip() for line in self.cleaned_data.get(name, "").splitlines() if line.strip()]


class RubricFloorForm(forms.Form):
    """The procedure's rubric floor for its live replay gate; blank turns it off."""

    rubric_floor = forms.FloatField(
        required=False,
        min_value=0,
        max_value=1,
        label="Rubric floor",
        widget=forms.NumberInput(attrs={"step": "0.05", "min": "0", "max": "1"}),
        help_text="0 to 1; blank: no rubric check",
    )


class RerunForm(forms.Form):
    """Re-run a version's replay on another split of the runs it was mined from (operators)."""

    seed = forms.IntegerField(
        initial=17,
        min_value=0,
        max_value=2**31 - 1,
        error_messages={"invalid": "The seed is a whole number from 0 to 2147483647."},
    )
    held_out_share = forms.FloatField(
        initial=0.3,
        min_value=0.05,
        max_value=0.95,
        label="Held-out share",
        widget=forms.NumberInput(attrs={"step": "0.05", "min": "0.05", "max": "0.95"}),
    )
    live = forms.BooleanField(required=False, label="Also replay live with agents")

    def reason(self) -> str:
        """The errors as one sentence naming the fields (for a message after the redirect)."""
        names = {"seed": "seed", "held_out_share": "held-out share", "live": "live"}
        parts = [f"{names.get(field, field)}: {' '.join(errors)}" for field, errors in self.errors.items()]
        return "; ".join(parts)
