"""Outbound webhooks: a researcher's endpoints, the events Chorus found for them, each delivery's log.

An ``Endpoint`` belongs to a researcher, for one campaign or (``campaign`` empty) every campaign they
manage, and lists the events it wants. Events are found *after* the fact by a Celery scan that reads
what the core already stores (new labels, worker actions, snapshots) from a cursor per campaign
(``WebhookCursor``), so nothing is written on the label-submission path; each found event becomes one
``Delivery`` per endpoint, sent by Celery with retries.
"""

from django.conf import settings
from django.db import models


class Endpoint(models.Model):
    class Event(models.TextChoices):
        PROMPT_COMPLETED = "prompt.completed", "A prompt reached its final k (batched)"
        CAMPAIGN_COMPLETED = "campaign.completed", "Every prompt reached its final k"
        CAMPAIGN_STATUS = "campaign.status_changed", "The campaign was launched, paused, resumed or closed"
        WORKER_FLAGGED = "worker.flagged", "A worker was flagged"
        WORKER_EXCLUDED = "worker.excluded", "A worker was excluded from the audit"
        WORKER_BLOCKED = "worker.blocked", "A worker was blocked"
        AUDIT_THRESHOLD = "audit.threshold_crossed", "A noise number crossed a threshold you set"
        PUBLICATION_STATUS = "publication.status_changed", "A publication changed status"
        SUBMISSION_HELD = "submission.held", "A panel submission waits for your review"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="webhook_endpoints")
    campaign = models.ForeignKey(
        "annotation.Campaign",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="webhook_endpoints",
        help_text="Empty: every campaign the owner manages.",
    )
    url = models.URLField(max_length=500)
    events = models.JSONField(default=list)
    thresholds = models.JSONField(
        default=dict, blank=True, help_text="audit.threshold_crossed: {metric: value}, crossed in either direction."
    )
    secret = models.CharField(max_length=100, help_text="Signs every delivery; shown once, rotatable.")
    enabled = models.BooleanField(default=True)
    disabled_reason = models.TextField(blank=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.url} ({self.owner})"


class WebhookCursor(models.Model):
    """Where the scan of a campaign left off: the last label and worker action it read, the completion
    it reported, the side of each threshold it last saw."""

    campaign = models.OneToOneField("annotation.Campaign", on_delete=models.CASCADE, related_name="+")
    label_id = models.BigIntegerField(default=0)
    action_id = models.BigIntegerField(default=0)
    completed_sent = models.BooleanField(default=False)
    sides = models.JSONField(default=dict, help_text="endpoint id -> metric -> above or below")
    scanned_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"webhook cursor of campaign {self.campaign_id}"


class Delivery(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Failed (no more retries)"

    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="deliveries")
    event_id = models.UUIDField(help_text="The same on every attempt: receivers deduplicate on it.")
    event_type = models.CharField(max_length=40)
    payload = models.JSONField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "deliveries"
        indexes = [models.Index(fields=["endpoint", "-created_at"], name="delivery_endpoint_recent")]

    def __str__(self) -> str:
        return f"{self.event_type} to {self.endpoint_id} ({self.status})"
