"""What Chorus remembers about its publications on outside channels.

A ``Publication`` is one campaign published on one channel (MTurk through a configured backend, or a
link-based panel such as Prolific). MTurk rows mirror what MTurk holds (``MTurkHIT``,
``MTurkAssignment``) so reconciliation can compare both sides; every token sent to MTurk is derived
from these rows (``Publication.token_prefix`` + the row's id), so a retried call repeats the same token.
"""

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q


class Publication(models.Model):
    class Kind(models.TextChoices):
        MTURK = "mturk", "Amazon Mechanical Turk"
        PANEL = "panel", "Link-based panel"

    class Status(models.TextChoices):
        PENDING = "pending", "Waiting to be published"
        PUBLISHING = "publishing", "Publishing"
        PUBLISHED = "published", "Published"
        FAILED = "failed", "Failed"
        WITHDRAWING = "withdrawing", "Being withdrawn"
        WITHDRAWN = "withdrawn", "Withdrawn"

    ACTIVE_STATUSES = (Status.PENDING, Status.PUBLISHING, Status.PUBLISHED)

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
                condition=Q(status__in=["pending", "publishing", "published"]),
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
