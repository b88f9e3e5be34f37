from django.db import models

from annotation.models.workers import Participation


class LabelQuerySet(models.QuerySet):
    def counted(self):
        """The labels that count: every acknowledged label except the void ones. Exports, the audit and
        its statistics read only these."""
        return self.filter(voided_at__isnull=True)

    def audited(self):
        """The labels that enter the benchmark's audit: counted ones, except control labels (they
        measure workers, not prompts) and the labels of workers excluded from the campaign's audit."""
        excluded = Participation.objects.filter(
            campaign=models.OuterRef("campaign"), worker=models.OuterRef("worker"), excluded_at__isnull=False
        )
        return self.counted().filter(is_control=False).exclude(models.Exists(excluded))


class Label(models.Model):
    """An acknowledged label. Never edited and never deleted: the admin shows it read-only.

    A label can become void when its channel's rules say it does not count after all (an MTurk
    assignment returned, abandoned or rejected after the label was acknowledged): ``label_void``
    then frees its slot for another worker and the row stays, with ``voided_at`` and the reason.
    """

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="labels")
    prompt = models.ForeignKey("annotation.Prompt", on_delete=models.CASCADE, related_name="labels")
    worker = models.ForeignKey("annotation.Worker", on_delete=models.PROTECT, related_name="labels")
    lease = models.OneToOneField("annotation.Lease", on_delete=models.PROTECT, related_name="label")
    slot = models.OneToOneField(
        "annotation.Slot",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="label",
        help_text="The slot the label fills; empty once the label is void.",
    )
    is_control = models.BooleanField(
        default=False, help_text="A label of a control prompt: fills no slot and never enters the benchmark's audit."
    )
    value = models.JSONField(
        help_text="The raw value: a number, one number per option, or (free text) the answer as stored."
    )
    client_token = models.CharField(max_length=64, help_text="Sent by the client; a resubmission repeats it.")
    leased_at = models.DateTimeField()
    created_at = models.DateTimeField(db_index=True)
    voided_at = models.DateTimeField(null=True, blank=True)
    void_reason = models.CharField(max_length=200, blank=True)

    objects = LabelQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["prompt", "worker"], name="label_prompt_worker_unique"),
            models.UniqueConstraint(fields=["worker", "client_token"], name="label_client_token_unique"),
            models.CheckConstraint(
                condition=models.Q(is_control=False, voided_at__isnull=True, slot__isnull=False)
                | models.Q(voided_at__isnull=False, slot__isnull=True)
                | models.Q(is_control=True, slot__isnull=True),
                name="label_fills_a_slot_unless_void_or_control",
            ),
        ]
        indexes = [models.Index(fields=["campaign", "id"], name="label_campaign_order")]

    def __str__(self) -> str:
        return f"{self.worker} → {self.prompt}: {self.value}" + (" (void)" if self.voided_at else "")

    @property
    def time_spent(self):
        return self.created_at - self.leased_at
