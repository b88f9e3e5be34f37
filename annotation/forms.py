"""Forms of the browser UI. They parse and validate input only; the views hand the result to a service."""

import math
import re
import uuid
from dataclasses import dataclass
from decimal import Decimal

from django import forms
from django.conf import settings
from django.contrib.auth.forms import UserCreationForm

from annotation import adaptive
from annotation.importing import upload_too_large_message
from annotation.models import Campaign, Collaboration, Invitation, Prompt, QualityRule, WorkerAction
from annotation.models.campaigns import MAX_K
from annotation.schemas import CONTINUOUS, LabelValueError, binarization_clean, parse_int
from annotation.selectors import campaign_title_clash, title_clash_message
from annotation.services.campaigns import FROZEN_ONCE_PROMPTS_EXIST
from annotation.services.controls import MAX_IDS_AT_ONCE, control_settings_check
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


@dataclass(frozen=True)
class FieldGroup:
    """A heading of the campaign form and its fields; ``schemas`` lists the schemas it is for (empty:
    every schema). static/js/campaign_form.js shows only the groups of the schema chosen."""

    key: str
    legend: str
    schemas: tuple[str, ...]
    fields: list  # bound fields

    @property
    def schemas_attr(self) -> str:
        return " ".join(self.schemas)


Schema = Campaign.Schema
# The campaign form's headings, in order: (key, legend, the schemas it is for (empty: all), its fields).
# A new setting of one schema goes into that schema's group (and Meta.fields); nothing else changes.
CAMPAIGN_FORM_GROUPS = (
    ("campaign", "The campaign", (), ["title", "instructions", "schema"]),
    ("binary", "Binary answers", (Schema.BINARY,), ["positive_text", "negative_text"]),
    (
        "rating",
        "Rating scale",
        (Schema.RATING, Schema.OPTION_RATING),
        ["scale_min", "scale_max", "scale_step", "scale_anchors", "binarization"],
    ),
    (
        "free_text",
        "Free-text answers",
        (Schema.FREE_TEXT,),
        ["answer_min_length", "answer_max_length", "clustering_protocol"],
    ),
    ("labels", "Labels per prompt", (), ["k", "k_max", "stop_confidence"]),
    (
        "workers",
        "Workers and controls",
        (),
        ["lease_seconds", "max_labels_per_worker", "policy", "control_rate", "control_first"],
    ),
)

# Why each setting is fixed once a campaign has prompts (``FROZEN_ONCE_PROMPTS_EXIST``), as the form says it.
_SLOTS_REASON = "every imported prompt got its slots for it, and the stopping rule must hold for all of them"
FROZEN_REASONS = {
    "k": _SLOTS_REASON,
    "k_max": _SLOTS_REASON,
    "stop_confidence": _SLOTS_REASON,
    "schema": "the imported prompts (their gold values and options) were checked against it",
    "scale_min": "the imported gold values were checked against the scale",
    "scale_max": "the imported gold values were checked against the scale",
    "scale_step": "the imported gold values were checked against the scale",
    "answer_min_length": "every answer stored keeps within the limits the campaign states",
    "answer_max_length": "every answer stored keeps within the limits the campaign states",
}
ADAPTIVE_FIELDS = ("k", "k_max", "stop_confidence")


def field_groups(form, spec) -> list[FieldGroup]:
    """``form``'s fields under the headings of ``spec`` (``CAMPAIGN_FORM_GROUPS``' shape); fields it does
    not have are skipped. A field of the form in no group still shows (for every schema), never silently
    lost."""
    groups = [
        FieldGroup(key=key, legend=legend, schemas=tuple(schemas), fields=[form[n] for n in names if n in form.fields])
        for key, legend, schemas, names in spec
    ]
    grouped = {name for _, _, _, names in spec for name in names}
    others = [form[name] for name in form.fields if name not in grouped]
    if others:
        groups.append(FieldGroup(key="others", legend="More settings", schemas=(), fields=others))
    return [group for group in groups if group.fields]


def stop_consequences_checked(k, k_max, stop_confidence) -> adaptive.StopConsequences | None:
    """``stop_consequences`` for settings the model accepts (None for others: the form or the model says
    why, and a k of a billion must not be walked through)."""
    if not (1 <= k <= k_max <= MAX_K and 0.5 <= stop_confidence <= 0.999):
        return None
    return adaptive.stop_consequences(k=k, k_max=k_max, stop_confidence=stop_confidence)


class ScaleStepField(forms.CharField):
    """A rating scale's step as typed: a number (1, 0.5, 0.1), or "continuous" (None); empty is the
    default step, whole points, so a form posted without the field keeps today's scales."""

    def prepare_value(self, value):
        if value is None:
            return CONTINUOUS
        return f"{value:g}" if isinstance(value, float) else value

    def to_python(self, value):
        text = super().to_python(value).strip().lower()
        if not text:
            return 1.0
        if text == CONTINUOUS:
            return None
        try:
            step = float(text)
        except ValueError:
            raise forms.ValidationError(
                f'Type a step such as 1, 0.5 or 0.1, or "{CONTINUOUS}"; got {text!r}.'
            ) from None
        if not math.isfinite(step):
            raise forms.ValidationError(f'Type a step such as 1, 0.5 or 0.1, or "{CONTINUOUS}"; got {text!r}.')
        return step


class CampaignForm(forms.ModelForm):
    scale_step = ScaleStepField(
        required=False,
        label="Step (rating scales)",
        help_text=f"The step between points: 1 for whole points, 0.5 for halves, 0.1…; it must divide the scale. "
        f'"{CONTINUOUS}" for any value. Up to 11 points are buttons, more (or continuous) a slider.',
    )
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
        help_text="Optional: which ratings count as 1 and which as 0 in a binarized view of the noise audit, e.g. "
        "1=0, 2=0, 3=1, 4=1 (a rating left out, such as a middle point, is left out of that view). Without it the "
        "audit puts ratings on 0–1 as (value − min) / (max − min); with it, both views are reported.",
    )
    # Not required: the forms of other schemas (and older pages) leave it out, which keeps the default.
    clustering_protocol = forms.TypedChoiceField(
        choices=Campaign.ClusteringProtocol.choices,
        required=False,
        empty_value=Campaign.ClusteringProtocol.DOUBLE_BLIND,
        label="Clustering protocol (free text)",
        help_text=Campaign._meta.get_field("clustering_protocol").help_text,
    )

    class Meta:
        model = Campaign
        fields = [
            "title",
            "instructions",
            "schema",
            "positive_text",
            "negative_text",
            "scale_min",
            "scale_max",
            "scale_step",
            "scale_anchors",
            "binarization",
            "answer_min_length",
            "answer_max_length",
            "clustering_protocol",
            "k",
            "k_max",
            "stop_confidence",
            "lease_seconds",
            "max_labels_per_worker",
            "policy",
            "control_rate",
            "control_first",
        ]
        widgets = {"instructions": forms.Textarea(attrs={"rows": 8})}
        labels = {
            "k": "Labels per prompt (k)",
            "k_max": "Most labels per prompt (adaptive k)",
            "stop_confidence": "Stop at confidence (adaptive k)",
            "lease_seconds": "Lease length (seconds)",
            "max_labels_per_worker": "Cap of labels per worker",
            "policy": "Assignment policy",
            "control_rate": "Control rate",
            "control_first": "Controls first (qualification)",
            "positive_text": "Answer for 1",
            "negative_text": "Answer for 0",
            "answer_min_length": "Shortest answer (free text)",
            "answer_max_length": "Longest answer (free text)",
        }
        help_texts = {
            "instructions": "Markdown, shown to workers before and while they label.",
            "k": "How many different workers label each prompt (adaptive k: the least).",
            "k_max": "Leave empty for k labels on every prompt. Set it (binary answers, or a rating scale whose "
            "binarization maps every point) for adaptive k: from k labels on, a prompt stops once its majority is "
            "settled, else it gets one more label, up to this many.",
            "stop_confidence": "Adaptive k: a prompt stops once the probability that its majority is the crowd's "
            "majority reaches this (0.5 to 0.999, empty: 0.95; uniform prior). A tie never stops before the most "
            "labels.",
            "lease_seconds": "How long a worker holds a prompt before it may go to somebody else; an open "
            "labeling page keeps extending it.",
            "max_labels_per_worker": "Leave empty for no cap.",
            "answer_min_length": "Free text: the fewest characters an answer may have, after trimming (1 or more).",
            "answer_max_length": "Free text: the most characters an answer may have (the text box stops there); "
            "60 fits a short phrase such as “brush my teeth”.",
            "control_rate": "The share of each worker's prompts that are control prompts (known gold, outside k and "
            "the audit), between 0 and 1: 0.1 is about one in ten. Leave empty for none.",
            "control_first": "How many of each worker's first prompts are controls, as a qualification; 0 or empty "
            "for none.",
        }

    def __init__(self, *args, owner, **kwargs):
        """``owner``: whose campaign it is (the new one's creator, or the edited one's owner), for the
        rule that an owner's campaigns have different names."""
        super().__init__(*args, **kwargs)
        self.owner = owner
        self.fields["control_first"].required = False
        self.fields["stop_confidence"].required = False
        self.fields["answer_min_length"].required = False
        self.fields["answer_max_length"].required = False
        # Disabled fields keep the campaign's value whatever is posted; campaign_update refuses them too.
        self.frozen = self.instance.pk is not None and self.instance.prompts.exists()
        if self.frozen:
            for name in FROZEN_ONCE_PROMPTS_EXIST & set(self.fields):
                self.fields[name].disabled = True
                self.fields[name].frozen_reason = f"Fixed once prompts are imported: {FROZEN_REASONS[name]}."

    def groups(self) -> list[FieldGroup]:
        return field_groups(self, CAMPAIGN_FORM_GROUPS)

    def errors_by_field(self) -> list[tuple[str, str, str]]:
        """Every error as (field id, label, message), the form's own first, for the summary above the form
        (the field id is empty for the form's own errors)."""
        summary = [("", "", message) for message in self.non_field_errors()]
        for field in self:
            summary += [(field.id_for_label, field.label, message) for message in field.errors]
        return summary

    def clean_title(self) -> str:
        title = self.cleaned_data["title"]
        renamed = self.instance if self.instance.pk else None
        clash = campaign_title_clash(owner=self.owner, title=title, renamed=renamed)
        if clash is not None:
            raise forms.ValidationError(title_clash_message(clash=clash), code="duplicate_title")
        return title

    def clean_control_first(self) -> int:
        return self.cleaned_data["control_first"] or 0  # left empty: none

    def clean_answer_min_length(self) -> int:
        return self._or_default("answer_min_length")

    def clean_answer_max_length(self) -> int:
        return self._or_default("answer_max_length")

    def _or_default(self, name: str):
        """A field left empty (or absent: forms of other schemas) takes the model's default."""
        value = self.cleaned_data[name]
        return Campaign._meta.get_field(name).default if value is None else value

    def clean_stop_confidence(self) -> float:
        return self._or_default("stop_confidence")

    def clean(self):
        cleaned = super().clean()
        try:  # a field that failed its own check (not a number) is absent, and said so already
            control_settings_check(
                control_rate=cleaned.get("control_rate"), control_first=cleaned.get("control_first", 0)
            )
        except forms.ValidationError as exc:
            self.add_error(None, exc)
        consequences = self.stop_consequences()
        changed = set(ADAPTIVE_FIELDS) & set(self.changed_data)  # a frozen rule is the campaign's, not an error
        # (other schemas have no adaptive k: the model refuses k_max for them, saying so)
        adaptive_schema = cleaned.get("schema") in (Schema.BINARY, Schema.RATING)
        if consequences is not None and consequences.pointless and changed and adaptive_schema:
            if "k_max" not in self.errors:
                self.add_error("k_max", consequences.warning)
        return cleaned

    def adaptive_values(self) -> tuple[int, int | None, float] | None:
        """(k, k_max, stop_confidence) as typed (a bound form) or stored; None when one is not a number."""
        values = []
        for name in ADAPTIVE_FIELDS:
            field = self[name]
            raw = field.value()  # as posted; the campaign's own value when unbound or disabled
            try:
                values.append(None if raw in (None, "") else field.field.to_python(raw))
            except forms.ValidationError:
                return None
        k, k_max, confidence = values
        if k is None:
            return None
        return k, k_max, Campaign._meta.get_field("stop_confidence").default if confidence is None else confidence

    def stop_consequences(self) -> adaptive.StopConsequences | None:
        """What adaptive k's settings on the form mean (``stop_consequences``); None without adaptive k or
        with settings the model refuses (it says why beside the field)."""
        values = self.adaptive_values()
        if values is None or values[1] is None:
            return None
        return stop_consequences_checked(*values)


class StopRuleForm(forms.Form):
    """Adaptive k's three settings, as the campaign form's script asks what they mean (a GET)."""

    k = forms.IntegerField(min_value=1, max_value=MAX_K)
    k_max = forms.IntegerField(min_value=1, max_value=MAX_K)
    stop_confidence = forms.FloatField(required=False, min_value=0.5, max_value=0.999)

    def consequences(self) -> adaptive.StopConsequences | None:
        if not self.is_valid():
            return None
        confidence = self.cleaned_data["stop_confidence"]
        if confidence is None:
            confidence = Campaign._meta.get_field("stop_confidence").default
        return stop_consequences_checked(self.cleaned_data["k"], self.cleaned_data["k_max"], confidence)


class StopPlanForm(forms.Form):
    """The adaptive-k planner's question on the campaign page (a GET): what a label would pay."""

    reward = forms.DecimalField(
        required=False,
        min_value=Decimal("0.01"),
        max_value=Decimal("100"),
        decimal_places=2,
        label="Reward per label (US$)",
        help_text="To price the plan as on MTurk (rewards plus commission).",
    )

    def reward_or_none(self) -> Decimal | None:
        """The reward asked about, or None when none was given or it was not an amount."""
        return self.cleaned_data.get("reward") if self.is_valid() else None


def upload_checked(upload):
    """An uploaded file under ``CHORUS_MAX_IMPORT_BYTES``, checked before reading, so that an oversize
    upload never lands in memory."""
    limit = settings.CHORUS_MAX_IMPORT_BYTES
    if upload is not None and upload.size > limit:
        raise forms.ValidationError(upload_too_large_message(size=upload.size, limit=limit))
    return upload


class PromptUploadForm(forms.Form):
    file = forms.FileField(
        label="Prompt file (CSV or JSONL)",
        help_text="Columns id and text; optional gold, group, options (per-option rating), and control "
        "(true for a control prompt, which needs a gold).",
    )

    def clean_file(self):
        return upload_checked(self.cleaned_data["file"])


class StudyForm(forms.ModelForm):
    """An imported study: the labels file, the prompts file if any, and the schema the labels follow."""

    labels = forms.FileField(
        label="Labels file (CSV, TSV or JSONL)",
        help_text="One label per row: columns worker, prompt, value; optional gold, group, created_at and text "
        "(the prompt's text). A Chorus label export is such a file.",
    )
    prompts = forms.FileField(
        required=False,
        label="Prompts file (optional)",
        help_text="Columns prompt and text (optional gold, group), when the labels file has no text column.",
    )
    binarization = BinarizationField(
        required=False,
        label="Binarization (rating scales)",
        help_text="Optional: which ratings count as 1 and which as 0, e.g. 1=0, 2=0, 3=1, 4=1.",
    )

    scale_step = ScaleStepField(
        required=False,
        label="Scale step (rating scales)",
        help_text='1 for whole points, 0.5 for half points, 0.1 …, or "continuous" for any value (WordSim-353\'s '
        "ratings such as 9.75 and 6.8).",
    )

    class Meta:
        model = Campaign
        fields = ["title", "instructions", "schema", "positive_text", "negative_text", "scale_min", "scale_max"]
        widgets = {"instructions": forms.Textarea(attrs={"rows": 3})}
        labels = CampaignForm.Meta.labels
        help_texts = {"instructions": "Optional: what the study's workers were asked, for the card's readers."}

    field_order = ["title", "labels", "prompts", "schema"]
    #: The study form's headings: the files, then the schema's settings (static/js/campaign_form.js shows
    #: the chosen schema's only).
    GROUPS = (
        ("study", "The study", (), ["title", "labels", "prompts", "instructions", "schema"]),
        *(group for group in CAMPAIGN_FORM_GROUPS if group[0] in ("binary", "rating")),
    )

    def groups(self) -> list[FieldGroup]:
        return field_groups(self, self.GROUPS)

    def __init__(self, *args, owner, **kwargs):
        super().__init__(*args, **kwargs)
        self.owner = owner

    def clean_title(self) -> str:
        title = self.cleaned_data["title"]
        clash = campaign_title_clash(owner=self.owner, title=title)
        if clash is not None:
            raise forms.ValidationError(title_clash_message(clash=clash), code="duplicate_title")
        return title

    def clean_labels(self):
        return upload_checked(self.cleaned_data["labels"])

    def clean_prompts(self):
        return upload_checked(self.cleaned_data.get("prompts"))


class CampaignCopyForm(forms.Form):
    title = forms.CharField(
        max_length=200,
        required=False,
        label="Title of the new campaign",
        help_text="Empty: this one's, with “(copy)” (or “(copy 2)”, …).",
    )


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

    role = forms.ChoiceField(
        choices=Collaboration.Role.choices,
        initial=Collaboration.Role.EDITOR,
        required=False,  # a form posted before roles existed shares as an editor, as it did then
        widget=forms.RadioSelect,
        help_text="Adding a collaborator again with the other role changes their role.",
    )

    def __init__(self, *args, campaign: Campaign, **kwargs):
        super().__init__(*args, **kwargs)
        self.campaign = campaign

    def clean(self):
        cleaned = super().clean()
        cleaned["role"] = role = cleaned.get("role") or Collaboration.Role.EDITOR
        username = cleaned.get("username")
        if Collaboration.objects.filter(campaign=self.campaign, user__username=username, role=role).exists():
            self.add_error(
                "username", forms.ValidationError(f"{username} is already a collaborator.", code="duplicate")
            )
        return cleaned


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


class QualityRuleForm(forms.ModelForm):
    """A quality rule as the campaign page adds it; ``rule_create`` checks the threshold and the count."""

    class Meta:
        model = QualityRule
        fields = ["metric", "threshold", "min_labels", "action"]
        labels = {
            "metric": "When",
            "threshold": "Threshold (a share, 0 to 1)",
            "min_labels": "After at least",
            "action": "Then",
        }
        help_texts = {"min_labels": "Controls answered (control accuracy) or labels given (straight-lining)."}
        widgets = {
            "threshold": forms.NumberInput(attrs={"step": "0.01", "min": "0", "max": "1"}),
            "min_labels": forms.NumberInput(attrs={"min": "1"}),
        }


class ControlMarkForm(forms.Form):
    """Prompts to make controls, or normal prompts again, by their imported ids (one per line);
    ``prompts_control_set`` checks them against the campaign."""

    external_ids = forms.CharField(
        label="Prompt ids",
        widget=forms.Textarea(attrs={"rows": 4, "autocapitalize": "none", "spellcheck": "false"}),
        help_text=f"The ids of imported prompts, one per line; at most {MAX_IDS_AT_ONCE} at a time.",
    )
    control = forms.TypedChoiceField(
        label="Make them",
        choices=[("1", "controls"), ("0", "normal prompts again")],
        coerce=lambda value: value == "1",
        initial="1",
        widget=forms.RadioSelect,
    )

    def clean_external_ids(self) -> list[str]:
        return [line.strip() for line in self.cleaned_data["external_ids"].splitlines() if line.strip()]


class WorkerActionForm(forms.Form):
    """An action on one of the campaign's workers, from its workers page or the worker's own page
    (``views.worker_actions``): the worker by public id, the action, and why; ``back``: the page to go
    back to. ``annotation.services.quality`` checks the worker and the reason."""

    ACTIONS = [
        ("flag", "Flag"),
        ("unflag", "Unflag"),
        ("exclude", "Exclude from the audit"),
        ("include", "Include in the audit again"),
        ("block", "Block"),
        ("unblock", "Unblock"),
        ("recollect", "Exclude, block and re-collect their labels"),
    ]

    worker = forms.CharField(widget=forms.HiddenInput, max_length=221)
    action = forms.ChoiceField(label="Action", choices=ACTIONS)
    reason = forms.CharField(label="Why", max_length=WorkerAction._meta.get_field("reason").max_length)
    confirm = forms.BooleanField(required=False, widget=forms.HiddenInput)  # re-collecting asks first
    back = forms.ChoiceField(required=False, choices=[("", "the workers page"), ("worker", "the worker's page")])


class WorkersActionForm(forms.Form):
    """One action on several workers at once, from the workers page (``views.worker_actions``): the
    workers by public id (the rows' check boxes), the action (re-collecting is one worker at a time) and
    one reason; ``query``: the page's filters and sort, to go back to."""

    ACTIONS = [(kind, label) for kind, label in WorkerActionForm.ACTIONS if kind != "recollect"]

    workers = forms.Field(widget=forms.MultipleHiddenInput, error_messages={"required": "Choose at least one worker."})
    action = forms.ChoiceField(label="Action", choices=ACTIONS)
    reason = forms.CharField(label="Why", max_length=WorkerAction._meta.get_field("reason").max_length)
    query = forms.CharField(required=False, max_length=500, widget=forms.HiddenInput)

    def clean_workers(self) -> list[str]:
        ids = [str(value).strip() for value in self.cleaned_data["workers"] if str(value).strip()]
        if not ids:
            raise forms.ValidationError("Choose at least one worker.")
        if too_long := [value for value in ids if len(value) > 221]:
            raise forms.ValidationError(f"{too_long[0][:40]}… is not a worker id (at most 221 characters).")
        return list(dict.fromkeys(ids))


class WorkerFilterForm(forms.Form):
    """The workers page's filters and sort (GET): an audit flag, a status, a column and its direction
    (``-``: high to low)."""

    flag = forms.ChoiceField(label="Flag", required=False)
    status = forms.ChoiceField(label="Status", required=False)
    sort = forms.ChoiceField(label="Sort by", required=False)

    def __init__(self, *args, flags: dict, statuses: dict, columns: list[tuple[str, str]], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["flag"].choices = [("", "any or none"), *flags.items()]
        self.fields["status"].choices = [("", "any"), *statuses.items()]
        self.fields["sort"].choices = [
            choice
            for key, heading in columns
            for choice in ((f"-{key}", f"{heading}, high to low"), (key, f"{heading}, low to high"))
        ]


def new_client_token() -> str:
    """Rendered into each labeling form: resubmitting that form repeats the token, so it counts once."""
    return uuid.uuid4().hex


def label_from_post(data, prompt: Prompt, schema_kind: str):
    """The raw label value of a submitted labeling form, for label_submit (which validates it).

    Per-option schemas send one field per option, ``value_0``, ``value_1``, …; the others send ``value``.
    """
    if schema_kind == Campaign.Schema.OPTION_RATING:
        return [data.get(f"value_{number}") for number in range(len(prompt.options))]
    return data.get("value")
