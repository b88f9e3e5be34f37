from django.db import models
from django.db.models import F, Q


class Lease(models.Model):
    """A worker's hold on one slot of one prompt, until ``expires_at``.

    One lease per (prompt, worker), ever: a worker is never shown a prompt twice, even one they let
    expire or skipped.
    """

    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        SUBMITTED = "submitted", "Submitted"
        RELEASED = "released", "Released"

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="leases")
    prompt = models.ForeignKey("annotation.Prompt", on_delete=models.CASCADE, related_name="leases")
    worker = models.ForeignKey("annotation.Worker", on_delete=models.CASCADE, related_name="leases")
    slot = models.ForeignKey(
        "annotation.Slot",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="leases",
        help_text="Empty for a control prompt, which has no slots.",
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ACTIVE)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["prompt", "worker"], name="lease_prompt_worker_unique"),
            models.CheckConstraint(condition=Q(expires_at__gt=F("created_at")), name="lease_ends_after_start"),
        ]
        indexes = [models.Index(fields=["worker", "campaign", "status"], name="lease_worker_campaign")]

    def __str__(self) -> str:
        return f"{self.worker} on {self.prompt}"
