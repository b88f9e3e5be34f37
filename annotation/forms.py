"""Forms of the browser UI. They parse and validate input only; the views hand the result to a service."""
import re
import uuid

from django import forms
from django.conf import settings
from django.contrib.auth.forms import UserCreationForm

from annotation.importing import upload_too_large_message
from annotation.models import Campaign, Invitation, Prompt
from annotation.schemas import LabelValueError, binarization_clean, parse_int
from annotation.services.invitations import MAX_INVITATIONS_AT_ONCE


class BinarizationField(forms.CharField):
    """A rating → 0/1 map typed as ``1=0, 2=0, 3=1, 4=1``; a value left out is left out of the audit."""

    def prepare_value(self, value):
        if isinstance(value, dict):
            return ", ".join(f"{raw}={unit}" for raw, unit in sorted(value.items(), key=lambda item: int(item[0])))
        return value

    def to_python(self, value):
        text = super().to_python(value).strip()
        pairs = []
        for part in filter(None, (p.strip() for p in text.replace(";", ",").split(","))):
            raw, sep, unit = (s.strip() for s in part.partition("="))
            if not sep or parse_int(raw) is None or unit not in {"0", "1"}:
                raise forms.ValidationError(f"{part!r} is not of the form value=0 or value=1.")
            pairs.append((raw, int(unit)))
        try:
            return binarization_clean(pairs)
        except LabelValueError as exc:
            raise forms.ValidationError(str(exc)) from exc


class AnchorsField(forms.CharField):
    """Scale anchors typed one per line, lowest point first; blank lines are ignored."""

    widget = forms.Textarea(attrs={"rows": 4})

    def prepare_value(self, value):
        if isinstance(value, list):
            return "\n".join(value)
        return value

    def to_python(self, value):
        return [line.strip() for line in super().to_python(value).splitlines() if line.strip()]


class CampaignForm(forms.ModelForm):
    scale_anchors = AnchorsField(
        required=False,
        label="Scale anchors (rating scales)",
        help_text="Words for the points of the scale, one per line from the lowest: a line per point "
        "(bad fit, poor fit, good fit, very good fit for 1–4), or two lines for the two ends. Workers see them "
        "with the rating buttons, as 1 = bad fit … 4 = very good fit. Leave empty for numbers only.",
    )
    binarization = BinarizationField(
        required=False,
        label="Binarization (rating scales)",
        help_text="Which ratings count as 1 and which as 0 in the noise audit, e.g. 1=0, 2=0, 3=1, 4=1. "
        "A rating left out (such as a middle point) is left out of the audit.",
    )

    class Meta:
        model = Campaign
        fields = [
            "title", "instructions", "schema", "positive_text", "negative_text", "scale_min", "scale_max",
            "scale_anchors", "binarization", "k", "lease_seconds", "max_labels_per_worker", "policy",
        ]
        widgets = {"instructions": forms.Textarea(attrs={"rows": 8})}
        labels = {
            "k": "Labels per prompt (k)",
            "lease_seconds": "Lease length (seconds)",
            "max_labels_per_worker": "Cap of labels per worker",
            "policy": "Assignment policy",
            "positive_text": "Answer for 1",
            "negative_text": "Answer for 0",
        }
        help_texts = {
            "instructions": "Markdown, shown to workers before and while they label.",
            "k": "How many different workers label each prompt.",
            "lease_seconds": "How long a worker holds a prompt before it may go to somebody else; an open "
            "labeling page keeps extending it.",
            "max_labels_per_worker": "Leave empty for no cap.",
        }


class PromptUploadForm(forms.Form):
    file = forms.FileField(
        label="Prompt file (CSV or JSONL)",
        help_text="Columns id and text; optional gold, group, and options (per-option rating).",
    )

    def clean_file(self):
        upload = self.cleaned_data["file"]
        # Checked before reading, so an oversize upload never lands in memory.
        limit = settings.CHORUS_MAX_IMPORT_BYTES
        if upload.size > limit:
            raise forms.ValidationError(upload_too_large_message(size=upload.size, limit=limit))
        return upload


class CollaboratorForm(forms.Form):
    """A username, as the sharing services take it. Alone it checks the shape only (length, no NUL
    characters), as for the username in a remove link; ``CollaboratorAddForm`` adds the duplicate check."""

    username = forms.CharField(
        max_length=150,
        label="Username",
        # Phones would otherwise capitalise or "correct" the first letter of a username.
        widget=forms.TextInput(attrs={"autocapitalize": "none", "autocomplete": "off", "spellcheck": "false"}),
    )


class CollaboratorAddForm(CollaboratorForm):
    """Somebody to share ``campaign`` with. ``campaign_share`` refuses unknown users and the owner; it
    accepts a current collaborator silently (it is idempotent, for API retries), so the form, like
    SignUpForm with a taken username, says so itself: a person adding a name twice has likely mistyped."""

    def __init__(self, *args, campaign: Campaign, **kwargs):
        super().__init__(*args, **kwargs)
        self.campaign = campaign

    def clean_username(self):
        username = self.cleaned_data["username"]
        if self.campaign.collaborators.filter(username=username).exists():
            raise forms.ValidationError(f"{username} is already a collaborator.", code="duplicate")
        return username


class SignUpForm(UserCreationForm):
    """A cheap account: a username and a password, nothing else. The form checks them (a free
    username, the password rules); ``account_create`` writes the account."""

    class Meta(UserCreationForm.Meta):
        fields = ["username"]


class InvitationCreateForm(forms.Form):
    """Personal invitation links to make: one per non-empty line. ``invitations_create`` writes them."""

    notes = forms.CharField(
        label="Who are the links for?",
        widget=forms.Textarea(attrs={"rows": 4, "placeholder": "Ada Lovelace\nparticipant 17\nbob@example.org"}),
        help_text="One line per person: a name, an e-mail address or a number, for your records (only the "
        f"campaign's managers see it). Each line makes one link, for that person alone; at most "
        f"{MAX_INVITATIONS_AT_ONCE} lines.",
    )

    def clean_notes(self) -> list[str]:
        notes = [line.strip() for line in self.cleaned_data["notes"].splitlines() if line.strip()]
        longest = Invitation._meta.get_field("note").max_length
        too_long = [number for number, note in enumerate(notes, 1) if len(note) > longest]
        if too_long:
            raise forms.ValidationError(f"Line {too_long[0]} is longer than {longest} characters.")
        if len(notes) > MAX_INVITATIONS_AT_ONCE:
            raise forms.ValidationError(f"{len(notes)} lines: make at most {MAX_INVITATIONS_AT_ONCE} links at a time.")
        return notes


class InvitationCodeForm(forms.Form):
    """The re-entry code of an accepted invitation, as typed: case, spaces and dashes do not matter."""

    code = forms.CharField(
        max_length=20,
        label="Your code",
        help_text="Shown when you first opened this invitation, e.g. ABCD-EFGH.",
        widget=forms.TextInput(attrs={"autocapitalize": "characters", "autocomplete": "off", "spellcheck": "false"}),
    )

    def clean_code(self) -> str:
        return re.sub(r"[^0-9A-Za-z]", "", self.cleaned_data["code"]).upper()


def new_client_token() -> str:
    """Rendered into each labeling form: resubmitting that form repeats the token, so it counts once."""
    return uuid.uuid4().hex


def label_from_post(data, *, prompt: Prompt, schema_kind: str):
    """The raw label value of a submitted labeling form, for label_submit (which validates it).

    Per-option schemas send one field per option, ``value_0``, ``value_1``, …; the others send ``value``.
    """
    if schema_kind == Campaign.Schema.OPTION_RATING:
        return [data.get(f"value_{number}") for number in range(len(prompt.options))]
    return data.get("value")
