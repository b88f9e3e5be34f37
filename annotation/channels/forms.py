"""Researcher forms: MTurk publishing options, a panel link and an MTurk bonus. The services validate again."""
from decimal import Decimal

from django import forms
from django.core.validators import RegexValidator

from annotation.channels.services import MTURK_BONUS_MAX, MTURK_DEFAULTS


class MTurkPublicationForm(forms.Form):
    title = forms.CharField(max_length=128, help_text="What workers see in MTurk's list of HITs.")
    description = forms.CharField(max_length=2000, widget=forms.Textarea(attrs={"rows": 3}))
    keywords = forms.CharField(max_length=1000, required=False, initial=MTURK_DEFAULTS["keywords"])
    reward = forms.DecimalField(min_value=0.01, max_value=100, decimal_places=2, help_text="US dollars per label.")
    n_assignments = forms.IntegerField(
        min_value=1, required=False, help_text="Labels to buy on MTurk. Empty: all the campaign still needs."
    )
    assignments_per_hit = forms.IntegerField(
        min_value=1, max_value=1000, initial=MTURK_DEFAULTS["assignments_per_hit"],
        help_text="HITs with 10 or more assignments pay 40% commission instead of 20%.",
    )
    assignment_duration = forms.IntegerField(min_value=30, required=False, help_text="Seconds per assignment (default: the lease length, at least 300).")
    lifetime = forms.IntegerField(min_value=30, initial=MTURK_DEFAULTS["lifetime"], help_text="Seconds; extended while labels are needed.")
    auto_approval_delay = forms.IntegerField(min_value=0, initial=MTURK_DEFAULTS["auto_approval_delay"], help_text="Seconds.")
    locales = forms.CharField(required=False, help_text="Country codes workers must be in, e.g. US, GB, US-NY. Empty: anywhere.")
    min_approval_rate = forms.IntegerField(min_value=0, max_value=100, required=False, help_text="Percent, e.g. 95.")
    min_approved = forms.IntegerField(min_value=0, required=False, help_text="Approved HITs, e.g. 100.")

    def options(self) -> dict:
        return {name: value for name, value in self.cleaned_data.items() if value not in (None, "")}


class PanelPublicationForm(forms.Form):
    panel_name = forms.CharField(max_length=20, initial="prolific", help_text="Workers are known as <panel>:<participant id>.")
    participant_param = forms.CharField(max_length=64, initial="PROLIFIC_PID")
    study_param = forms.CharField(max_length=64, initial="STUDY_ID", required=False)
    session_param = forms.CharField(max_length=64, initial="SESSION_ID", required=False)
    expected_study_id = forms.CharField(max_length=200, required=False, help_text="Refuse links of other studies.")
    completion_code = forms.CharField(max_length=100, required=False)
    completion_url = forms.URLField(max_length=500, required=False, assume_scheme="https", help_text="e.g. https://app.prolific.com/submissions/complete?cc=CODE")
    redirect_on_completion = forms.BooleanField(required=False)
    no_work_code = forms.CharField(
        max_length=100, required=False, label="No-work code",
        help_text="Optional: for a participant who finds nothing to label (e.g. the panel's code for a returned "
        "submission). Without code or URL they are asked to return the study; never given the completion code.",
    )
    no_work_url = forms.URLField(
        max_length=500, required=False, assume_scheme="https", label="No-work URL",
        help_text="Optional: send such a participant straight to this URL instead.",
    )
    quota_per_session = forms.IntegerField(min_value=1, required=False, help_text="Labels per participant session. Empty: no quota.")


class MTurkBonusForm(forms.Form):
    """A bonus for one MTurk worker of a publication. Whether the worker has work in the publication that
    can get a bonus is the view's question (a selector's answer), not the form's."""

    worker = forms.CharField(
        max_length=64, label="MTurk worker id",
        validators=[RegexValidator(r"^[A-Za-z0-9_-]+$", "An MTurk worker id has only letters and digits.")],
        widget=forms.TextInput(attrs={"list": "bonus-workers", "autocomplete": "off", "spellcheck": "false"}),
        help_text="Pick a worker with submitted or approved work in this publication, or type their id.",
    )
    amount = forms.DecimalField(
        min_value=Decimal("0.01"), max_value=MTURK_BONUS_MAX, max_digits=5, decimal_places=2, label="Amount (USD)",
        help_text=f"From 0.01 to {MTURK_BONUS_MAX}. MTurk adds its commission.",
    )
    reason = forms.CharField(
        max_length=900, widget=forms.Textarea(attrs={"rows": 2}),
        help_text="The worker sees this with the bonus (MTurk requires one).",
    )
