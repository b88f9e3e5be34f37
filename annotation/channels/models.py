"""What Chorus remembers about its publications on outside channels.

A ``Publication`` is one campaign published on one channel (MTurk through a configured backend, or a
link-based panel such as Prolific). MTurk rows mirror what MTurk holds (``MTurkHIT``,
``MTurkAssignment``) so reconciliation can compare both sides; every token sent to MTurk is derived
from these rows (``Publication.token_prefix`` + the row's id), so a retried call repeats the same token.
"""

from decimal import Decimal

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q


class Publication(models.Model):
    class Kind(models.TextChoices):
        MTURK = "mturk", "Amazon Mechanical Turk"
        PANEL = "panel", "Link-based panel"
        PROLIFIC = "prolific", "Prolific (through its API)"

    class Status(models.TextChoices):
        DRAFT = "draft", "Draft (waiting for the researcher's confirmation)"
        PENDING = "pending", "Waiting to be published"
        PUBLISHING = "publishing", "Publishing"
        PUBLISHED = "published", "Published"
        FAILED = "failed", "Failed"
        WITHDRAWING = "withdrawing", "Being withdrawn"
        WITHDRAWN = "withdrawn", "Withdrawn"

    ACTIVE_STATUSES = (Status.DRAFT, Status.PENDING, Status.PUBLISHING, Status.PUBLISHED)

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.PROTECT, related_name="publications")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    channel = models.CharField(
        max_length=40, help_text="MTurk: the CHORUS_CHANNELS alias. Panels: the panel's name (e.g. prolific)."
    )
    worker_channel = models.CharField(
        max_length=20, help_text="Worker.channel of the workers arriving through this publication."
    )
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING)
    options = models.JSONField(default=dict, blank=True, help_text="The validated publishing options.")
    token_prefix = models.CharField(
        max_length=16, unique=True, help_text="Random, per publication: prefixes every idempotency token sent out."
    )
    remote_group_id = models.CharField(max_length=64, blank=True, help_text="MTurk: the HIT type id.")
    remote_block_id = models.CharField(
        max_length=64, blank=True, help_text="MTurk: the block-list qualification type id."
    )
    planned_assignments = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    published_at = models.DateTimeField(null=True, blank=True)
    withdrawn_at = models.DateTimeField(null=True, blank=True)
    reconciled_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(
        null=True, blank=True, help_text="MTurk: nothing can change any more (HITs expired, every assignment reviewed)."
    )

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "channel"],
                condition=Q(status__in=["draft", "pending", "publishing", "published"]),
                name="publication_one_active_per_channel",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.campaign} on {self.channel} ({self.status})"


class MTurkHIT(models.Model):
    """One HIT of a publication's pool. The row exists before the HIT does: its token makes creation
    idempotent, and a crash between MTurk's answer and our write is healed by the next attempt."""

    class Status(models.TextChoices):
        PLANNED = "planned", "Planned"
        LIVE = "live", "Live"
        EXPIRED = "expired", "Expired"

    publication = models.ForeignKey(Publication, on_delete=models.PROTECT, related_name="hits")
    index = models.PositiveIntegerField()
    max_assignments = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    hit_id = models.CharField(max_length=64, null=True, blank=True, unique=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PLANNED)
    expires_at = models.DateTimeField(null=True, blank=True)
    first_attempt_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name, verbose_name_plural = "MTurk HIT", "MTurk HITs"
        ordering = ["publication", "index"]
        constraints = [models.UniqueConstraint(fields=["publication", "index"], name="mturk_hit_index_unique")]

    def __str__(self) -> str:
        return self.hit_id or f"planned HIT {self.index} of publication {self.publication_id}"

    @property
    def token(self) -> str:
        return f"{self.publication.token_prefix}-h{self.index}"


def mturk_client_token(assignment_id: str) -> str:
    """The label's client token for an MTurk assignment: one label per assignment, enforced by the
    unique (worker, client_token) constraint of Label."""
    return f"mturk-{assignment_id}"[:64]


class MTurkAssignment(models.Model):
    """An MTurk assignment as Chorus knows it: opened on the task page, then as MTurk reports it."""

    class Status(models.TextChoices):
        ACCEPTED = "accepted", "Accepted (working)"
        ABANDONED = "abandoned", "Returned or expired, never submitted"
        SUBMITTED = "submitted", "Submitted"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"

    class Refill(models.TextChoices):
        NONE = "", "—"
        PENDING = "pending", "Pending"
        DONE = "done", "Done"
        SKIPPED = "skipped", "Not needed"

    assignment_id = models.CharField(max_length=64, unique=True)
    hit = models.ForeignKey(MTurkHIT, on_delete=models.PROTECT, related_name="assignments")
    worker = models.ForeignKey("annotation.Worker", on_delete=models.PROTECT, related_name="mturk_assignments")
    label = models.OneToOneField(
        "annotation.Label", null=True, blank=True, on_delete=models.SET_NULL, related_name="mturk_assignment"
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ACCEPTED)
    nothing_left = models.BooleanField(
        default=False, help_text="The task page told this worker there was nothing left."
    )
    refill = models.CharField(max_length=8, choices=Refill.choices, default=Refill.NONE, blank=True)
    opened_at = models.DateTimeField(null=True, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    reviewed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "MTurk assignment"
        indexes = [models.Index(fields=["hit", "status"], name="mturk_assignment_hit_status")]

    def __str__(self) -> str:
        return self.assignment_id


class MTurkWorkerBlock(models.Model):
    """A worker with nothing left in a campaign, or blocked from it: they get the publication's block-list
    qualification, which the HITs require not to exist, so MTurk stops showing them the HITs."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DONE = "done", "Done"
        LIFTING = "lifting", "Being lifted"  # the researcher unblocked the worker; the row goes once lifted

    publication = models.ForeignKey(Publication, on_delete=models.PROTECT, related_name="blocks")
    worker = models.ForeignKey("annotation.Worker", on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    created_at = models.DateTimeField(auto_now_add=True)
    done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "MTurk worker block"
        constraints = [models.UniqueConstraint(fields=["publication", "worker"], name="mturk_block_once")]

    def __str__(self) -> str:
        return f"{self.worker} blocked on publication {self.publication_id} ({self.status})"


class MTurkBonus(models.Model):
    """A bonus granted to a worker for an assignment; paid by reconciliation with a token derived from
    this row, so a retried payment is recognised by MTurk and never paid twice."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        SENT = "sent", "Sent"
        FAILED = "failed", "Failed"

    assignment = models.ForeignKey(MTurkAssignment, on_delete=models.PROTECT, related_name="bonuses")
    amount = models.DecimalField(max_digits=8, decimal_places=2)
    reason = models.CharField(max_length=1000)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name, verbose_name_plural = "MTurk bonus", "MTurk bonuses"
        constraints = [models.CheckConstraint(condition=Q(amount__gt=0), name="mturk_bonus_positive")]

    def __str__(self) -> str:
        return f"${self.amount} bonus on {self.assignment} ({self.status})"

    @property
    def token(self) -> str:
        return f"{self.assignment.hit.publication.token_prefix}-b{self.pk}"


class PanelConfig(models.Model):
    """A link-based panel publication (Prolific and similar): where the participant id arrives, and
    what a participant gets at the end: the completion code or URL after some work, the no-work code
    or URL (or a plain "please return the study") when there was none for them."""

    publication = models.OneToOneField(Publication, on_delete=models.CASCADE, related_name="panel")
    slug = models.SlugField(max_length=64, unique=True, help_text="Appears in the panel link.")
    participant_param = models.CharField(max_length=64, default="PROLIFIC_PID")
    study_param = models.CharField(max_length=64, default="STUDY_ID", blank=True)
    session_param = models.CharField(max_length=64, default="SESSION_ID", blank=True)
    expected_study_id = models.CharField(
        max_length=200, blank=True, help_text="When set, a link with another study id is refused."
    )
    completion_code = models.CharField(max_length=100, blank=True)
    completion_url = models.URLField(max_length=500, blank=True)
    redirect_on_completion = models.BooleanField(
        default=False, help_text="Send the participant straight to the completion URL instead of showing the code."
    )
    # A participant who finds no work before their first label is asked to return the study, never
    # given the completion code; a panel may have its own code or URL for that ("no code" returns).
    no_work_code = models.CharField(
        max_length=100, blank=True, help_text="Shown to a participant who finds no work to do (none labeled)."
    )
    no_work_url = models.URLField(
        max_length=500, blank=True, help_text="Where a participant who finds no work to do is sent instead."
    )
    quota_per_session = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)], help_text="Labels per participant session."
    )

    def __str__(self) -> str:
        return self.slug


class PanelSession(models.Model):
    """One participant's visit from the panel (their SESSION_ID), counting labels against the quota."""

    panel = models.ForeignKey(PanelConfig, on_delete=models.CASCADE, related_name="sessions")
    worker = models.ForeignKey("annotation.Worker", on_delete=models.PROTECT, related_name="+")
    session_ref = models.CharField(max_length=200, blank=True)
    study_ref = models.CharField(max_length=200, blank=True)
    n_labels = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["panel", "worker", "session_ref"], name="panel_session_unique"),
        ]

    def __str__(self) -> str:
        session = f" (session {self.session_ref})" if self.session_ref else ""
        return f"{self.worker} on {self.panel}{session}"


class ProlificAccount(models.Model):
    """A Prolific researcher token Chorus acts with: the deployment's (``CHORUS_PROLIFIC_TOKEN``, ``user``
    empty, ``token`` empty: read from the settings each time) or one a researcher saved on the channels
    page. The token is never shown back, logged or exported. Its workspace holds the hooks' secret and
    subscriptions, which deliver to ``/channels/prolific/hooks/<pk>/``."""

    class Hooks(models.TextChoices):
        NONE = "", "Not subscribed"
        SUBSCRIBED = "subscribed", "Subscribed and confirmed"
        REFUSED = "refused", "Refused by Prolific (reconciliation only)"
        NO_URL = "no_url", "No public URL (reconciliation only)"

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="prolific_account"
    )
    token = models.CharField(max_length=500, blank=True, help_text="Empty: the deployment's CHORUS_PROLIFIC_TOKEN.")
    workspace_id = models.CharField(max_length=64, blank=True)
    hook_secret = models.CharField(max_length=500, blank=True)
    hooks = models.CharField(max_length=12, choices=Hooks.choices, default=Hooks.NONE, blank=True)
    hooks_note = models.TextField(blank=True, help_text="Why hooks are not used, in words (Prolific's refusal).")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user"], condition=Q(user__isnull=True), name="prolific_one_deployment_account"
            ),
        ]

    def __str__(self) -> str:  # never the token
        return f"Prolific account of {self.user}" if self.user_id else "Prolific account of the deployment"


class ProlificExclusionGroup(models.Model):
    """The Chorus-managed participant group of a campaign's blocked workers, on one Prolific account:
    every study of the campaign excludes it (``participant_group_blocklist``), so a blocked worker cannot
    take a place again."""

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.PROTECT, related_name="+")
    account = models.ForeignKey(ProlificAccount, on_delete=models.PROTECT, related_name="groups")
    group_id = models.CharField(max_length=64, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["campaign", "account"], name="prolific_group_once")]

    def __str__(self) -> str:
        return self.group_id or f"group of campaign {self.campaign_id} (not created yet)"


class ProlificStudy(models.Model):
    """A publication's study on Prolific, and what Chorus wants of it. ``prolific_sync`` drives the
    study towards that (create the draft, publish, pause, start, stop, places) from any state, so a
    lost answer or a crash is healed by running it again."""

    publication = models.OneToOneField(Publication, on_delete=models.CASCADE, related_name="prolific")
    account = models.ForeignKey(ProlificAccount, on_delete=models.PROTECT, related_name="studies")
    study_id = models.CharField(max_length=64, blank=True, db_index=True)
    remote_status = models.CharField(max_length=20, blank=True)
    reward_minor = models.PositiveIntegerField(help_text="Per submission, in the account's minor units (pence).")
    currency = models.CharField(max_length=3, default="GBP")
    labels_per_participant = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    estimated_minutes = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    devices = models.JSONField(default=list, blank=True)
    filters = models.JSONField(default=list, blank=True, help_text="Prolific's filter objects, passed through.")
    publish_requested = models.BooleanField(default=False)
    auto_approve = models.BooleanField(
        default=True, help_text="Approve a participant in good standing once the live audit covered their labels."
    )
    total_places = models.PositiveIntegerField(default=0, help_text="total_available_places as last set.")
    places_taken = models.PositiveIntegerField(default=0)
    total_cost_minor = models.PositiveIntegerField(null=True, blank=True, help_text="Prolific's own total_cost.")
    pending = models.TextField(blank=True, help_text="What is waiting for Prolific, and why (shown on the page).")
    synced_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "Prolific studies"

    def __str__(self) -> str:
        return self.study_id or f"draft study of publication {self.publication_id}"

    @property
    def total_cost(self):
        """Prolific's own total cost in the account's currency (major units); None before the draft exists."""
        return None if self.total_cost_minor is None else Decimal(self.total_cost_minor) / 100

    @property
    def internal_name(self) -> str:
        """Chorus's key on the study: looked up before a creation whose answer was lost is repeated."""
        return f"chorus:{self.publication.token_prefix}"


class ProlificSubmission(models.Model):
    """A Prolific submission as Chorus last read it, and Chorus's verdict on it."""

    class Verdict(models.TextChoices):
        NONE = "", "—"
        WAITING = "waiting", "Waiting for the live audit"
        APPROVE = "approve", "Approve (good standing)"
        HELD = "held", "Held for the researcher (blocked or excluded)"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"

    publication = models.ForeignKey(Publication, on_delete=models.PROTECT, related_name="prolific_submissions")
    submission_id = models.CharField(max_length=64, unique=True)
    participant_id = models.CharField(max_length=64)
    worker = models.ForeignKey("annotation.Worker", on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=20)
    verdict = models.CharField(max_length=10, choices=Verdict.choices, default=Verdict.NONE, blank=True)
    rejection_category = models.CharField(max_length=30, blank=True)
    message = models.TextField(blank=True)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    event_at = models.FloatField(default=0.0, help_text="X-Timestamp of the newest event applied (out-of-order guard).")
    leases_ended = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["publication", "status"], name="prolific_sub_status")]

    def __str__(self) -> str:
        return self.submission_id


class ProlificBonus(models.Model):
    """A bonus to one participant. Prolific's pay call is not idempotent, so the row is written before
    anything is sent: set up once (``setup_id``), paid once; a pay whose answer was lost (``paying``) is
    checked against the submission's ``bonus_payments`` before it is ever sent again."""

    class Status(models.TextChoices):
        RECORDED = "recorded", "Recorded"
        SET_UP = "set_up", "Set up on Prolific"
        PAYING = "paying", "Pay sent, answer not seen"
        PAID = "paid", "Paid"
        FAILED = "failed", "Refused by Prolific"

    publication = models.ForeignKey(Publication, on_delete=models.PROTECT, related_name="prolific_bonuses")
    worker = models.ForeignKey("annotation.Worker", on_delete=models.PROTECT, related_name="+")
    submission_id = models.CharField(max_length=64)
    amount = models.DecimalField(max_digits=8, decimal_places=2)
    reason = models.CharField(max_length=1000)
    key = models.CharField(max_length=200, help_text="The idempotency key: one bonus per key and publication.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RECORDED)
    setup_id = models.CharField(max_length=64, blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    paid_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "Prolific bonuses"
        constraints = [
            models.UniqueConstraint(fields=["publication", "key"], name="prolific_bonus_key_once"),
            models.CheckConstraint(condition=Q(amount__gt=0), name="prolific_bonus_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.amount} bonus to {self.worker} ({self.status})"


class ProlificEvent(models.Model):
    """A verified hook delivery, kept by its ``X-Event-ID`` so a repeated delivery is done once."""

    account = models.ForeignKey(ProlificAccount, on_delete=models.CASCADE, related_name="+")
    event_id = models.CharField(max_length=200, unique=True)
    event_type = models.CharField(max_length=60)
    resource_id = models.CharField(max_length=64)
    sent_at = models.FloatField(default=0.0, help_text="X-Timestamp.")
    payload = models.JSONField(default=dict)
    received_at = models.DateTimeField(auto_now_add=True)
    processed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.event_type} {self.resource_id}"
