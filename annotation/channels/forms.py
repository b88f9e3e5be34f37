"""Researcher forms: MTurk publishing options, a panel link and an MTurk bonus. The services validate again."""

import re
from decimal import Decimal

from django import forms
from django.core.validators import RegexValidator

from annotation.channels.options import MTURK_DEFAULTS
from annotation.channels.pricing import MTURK_BONUS_MAX

_DURATION_UNITS = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600),
    **dict.fromkeys(("d", "day", "days"), 24 * 3600),
    **dict.fromkeys(("w", "week", "weeks"), 7 * 24 * 3600),
}
_SECONDS = re.compile(r"\d+", re.ASCII)
_DURATION = re.compile(r"(?:\s*\d+\s*[a-z]+\s*(?:,|and)?)+", re.ASCII)
_DURATION_PART = re.compile(r"(\d+)\s*([a-z]+)", re.ASCII)


def duration_text(seconds: int) -> str:
    """Whole seconds as a person reads them: ``7 days``, ``1 hour 30 minutes``, ``45 seconds``."""
    parts = []
    for name, size in (("day", 24 * 3600), ("hour", 3600), ("minute", 60), ("second", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count} {name}{'' if count == 1 else 's'}")
    return " ".join(parts) or "0 seconds"


class DurationField(forms.CharField):
    """A duration typed as a person says it (``90 minutes``, ``1 hour``, ``1 day 12 hours``) or as a bare
    number of seconds; cleaned to whole seconds (what MTurk takes) and shown back in words."""

    def __init__(self, *, min_seconds: int = 0, **kwargs):
        self.min_seconds = min_seconds
        super().__init__(**kwargs)

    def prepare_value(self, value):
        if isinstance(value, int) and not isinstance(value, bool):
            return duration_text(value)
        return value

    def to_python(self, value):
        text = super().to_python(value).strip().lower()
        if not text:
            return None
        if len(text) > 40:
            raise forms.ValidationError("Write a duration in at most 40 characters, e.g. 1 day 12 hours.")
        if _SECONDS.fullmatch(text):
            seconds = int(text)
        elif _DURATION.fullmatch(text) and all(unit in _DURATION_UNITS for _, unit in _DURATION_PART.findall(text)):
            seconds = sum(int(count) * _DURATION_UNITS[unit] for count, unit in _DURATION_PART.findall(text))
        else:
            raise forms.ValidationError(
                f"{value!r} is not a duration: write it as 90 minutes, 1 hour, 3 days (or a number of seconds)."
            )
        if seconds < self.min_seconds:
            raise forms.ValidationError(f"Give at least {duration_text(self.min_seconds)}.")
        return seconds


class MTurkPublicationForm(forms.Form):
    title = forms.CharField(max_length=128, help_text="What workers see in MTurk's list of HITs.")
    description = forms.CharField(max_length=2000, widget=forms.Textarea(attrs={"rows": 3}))
    keywords = forms.CharField(max_length=1000, required=False, initial=MTURK_DEFAULTS["keywords"])
    reward = forms.DecimalField(min_value=0.01, max_value=100, decimal_places=2, help_text="US dollars per label.")
    n_assignments = forms.IntegerField(
        label="Labels to buy",
        min_value=1,
        required=False,
        help_text="Labels to buy on MTurk. Empty: all the campaign still needs.",
    )
    assignments_per_hit = forms.IntegerField(
        min_value=1,
        max_value=1000,
        initial=MTURK_DEFAULTS["assignments_per_hit"],
        help_text="HITs with 10 or more assignments pay 40% commission instead of 20%.",
    )
    assignment_duration = DurationField(
        min_seconds=30,
        required=False,
        help_text="A worker's time for one assignment, e.g. 10 minutes. Empty: the campaign's lease length, at least "
        "5 minutes.",
    )
    lifetime = DurationField(
        min_seconds=30,
        initial=MTURK_DEFAULTS["lifetime"],
        help_text="How long the HITs stay listed, e.g. 7 days; extended while labels are needed.",
    )
    auto_approval_delay = DurationField(
        min_seconds=0,
        initial=MTURK_DEFAULTS["auto_approval_delay"],
        help_text="After this long, MTurk approves a submitted assignment Chorus has not reviewed, e.g. 3 days.",
    )
    locales = forms.CharField(
        required=False, help_text="Country codes workers must be in, e.g. US, GB, US-NY. Empty: anywhere."
    )
    min_approval_rate = forms.IntegerField(min_value=0, max_value=100, required=False, help_text="Percent, e.g. 95.")
    min_approved = forms.IntegerField(min_value=0, required=False, help_text="Approved HITs, e.g. 100.")

    def options(self) -> dict:
        return {name: value for name, value in self.cleaned_data.items() if value not in (None, "")}


class PanelPublicationForm(forms.Form):
    panel_name = forms.CharField(
        max_length=20, initial="prolific", help_text="Workers are known as <panel>:<participant id>."
    )
    participant_param = forms.CharField(
        max_length=64, initial="PROLIFIC_PID", label="Participant id parameter", help_text="The link's query parameter."
    )
    study_param = forms.CharField(max_length=64, initial="STUDY_ID", required=False, label="Study id parameter")
    session_param = forms.CharField(max_length=64, initial="SESSION_ID", required=False, label="Session id parameter")
    expected_study_id = forms.CharField(
        max_length=200, required=False, label="Expected study id", help_text="Refuse links of other studies."
    )
    completion_code = forms.CharField(max_length=100, required=False)
    completion_url = forms.URLField(
        max_length=500,
        required=False,
        assume_scheme="https",
        help_text="e.g. https://app.prolific.com/submissions/complete?cc=CODE",
    )
    redirect_on_completion = forms.BooleanField(required=False)
    no_work_code = forms.CharField(
        max_length=100,
        required=False,
        label="No-work code",
        help_text="Optional: for a participant who finds nothing to label (e.g. the panel's code for a returned "
        "submission). Without code or URL they are asked to return the study; never given the completion code.",
    )
    no_work_url = forms.URLField(
        max_length=500,
        required=False,
        assume_scheme="https",
        label="No-work URL",
        help_text="Optional: send such a participant straight to this URL instead.",
    )
    quota_per_session = forms.IntegerField(
        min_value=1, required=False, help_text="Labels per participant session. Empty: no quota."
    )


class MTurkBonusForm(forms.Form):
    """A bonus for one MTurk worker of a publication. Whether the worker has work in the publication that
    can get a bonus is the view's question (a selector's answer), not the form's."""

    worker = forms.CharField(
        max_length=64,
        label="MTurk worker id",
        validators=[RegexValidator(r"^[A-Za-z0-9_-]+$", "An MTurk worker id has only letters and digits.")],
        widget=forms.TextInput(attrs={"list": "bonus-workers", "autocomplete": "off", "spellcheck": "false"}),
        help_text="Pick a worker with submitted or approved work in this publication, or type their id.",
    )
    amount = forms.DecimalField(
        min_value=Decimal("0.01"),
        max_value=MTURK_BONUS_MAX,
        max_digits=5,
        decimal_places=2,
        label="Amount (USD)",
        help_text=f"From 0.01 to {MTURK_BONUS_MAX}. MTurk adds its commission.",
    )
    reason = forms.CharField(
        max_length=900,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="The worker sees this with the bonus (MTurk requires one).",
    )


class ProlificPublicationForm(forms.Form):
    """A Prolific study's options; ``prolific.prolific_options_clean`` checks them again."""

    title = forms.CharField(max_length=200, help_text="What participants see in Prolific's list of studies.")
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), help_text="What the study asks of them.")
    reward = forms.DecimalField(
        min_value=Decimal("0.01"), decimal_places=2, help_text="Per submission, in your Prolific account's currency."
    )
    labels_per_participant = forms.IntegerField(min_value=1, help_text="Labels each participant gives.")
    estimated_minutes = forms.IntegerField(min_value=1, max_value=1440, help_text="Minutes a submission takes.")
    devices = forms.MultipleChoiceField(
        choices=[(d, d.capitalize()) for d in ("desktop", "tablet", "mobile")],
        initial=["desktop", "tablet", "mobile"],
        widget=forms.CheckboxSelectMultiple,
    )
    auto_approve = forms.BooleanField(
        required=False,
        initial=True,
        help_text="Approve participants in good standing once the live audit has covered their labels.",
    )

    def options(self) -> dict:
        data = dict(self.cleaned_data)
        data["reward"] = str(data["reward"])
        return data


class ProlificTokenForm(forms.Form):
    token = forms.CharField(
        label="Your own Prolific API token",
        widget=forms.PasswordInput(render_value=False),
        max_length=500,
        help_text="Your API token from Prolific's settings. Chorus never shows it back.",
    )


class ProlificReviewForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    category = forms.CharField(required=False)
    message = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))


class ProlificBonusForm(forms.Form):
    worker = forms.CharField(max_length=200, help_text="The participant (prolific:<id>).")
    amount = forms.DecimalField(min_value=Decimal("0.01"), decimal_places=2)
    reason = forms.CharField(max_length=1000)
    key = forms.CharField(widget=forms.HiddenInput, max_length=200)
