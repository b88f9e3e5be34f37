"""Acting on workers during collection: the researcher's quality rules and the actions taken on workers,
by a researcher or a rule. Each row is a log entry: kept, never edited except to record an undo."""

from django.conf import settings
from django.db import models


class QualityRule(models.Model):
    """'When <metric> is past <threshold> after at least <min_labels> labels, <action>.'

    The live audit (Celery) evaluates a campaign's active rules after each quick audit; an action a
    rule takes is logged as a ``WorkerAction`` that names the rule and the numbers that triggered it.
    """

    class Metric(models.TextChoices):
        CONTROL_ACCURACY = "control_accuracy", "Control accuracy below"
        STRAIGHT_LINING = "straight_lining", "Straight-lining (share of the most frequent answer) above"

    class Action(models.TextChoices):
        FLAG = "flag", "Flag only"
        EXCLUDE = "exclude", "Exclude from the audit"
        BLOCK = "block", "Block from the campaign"
        RECOLLECT = "recollect", "Exclude, block and re-collect their labels"

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="quality_rules")
    metric = models.CharField(max_length=20, choices=Metric.choices)
    threshold = models.FloatField(help_text="A share between 0 and 1.")
    min_labels = models.PositiveIntegerField(
        help_text="Controls answered (control accuracy) or labels given (straight-lining) before the rule applies."
    )
    action = models.CharField(max_length=10, choices=Action.choices)
    active = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"{self.get_metric_display()} {self.threshold} after {self.min_labels}: {self.get_action_display()}"


class WorkerAction(models.Model):
    """One action on one worker of one campaign, by a person or by a rule, with why and the numbers."""

    class Kind(models.TextChoices):
        FLAG = "flag", "Flagged"
        EXCLUDE = "exclude", "Excluded from the audit"
        INCLUDE = "include", "Included in the audit again"
        BLOCK = "block", "Blocked"
        UNBLOCK = "unblock", "Unblocked"
        RECOLLECT = "recollect", "Labels voided for re-collection"

    # The kinds that set or clear each standing: the latest action of a family is the standing's cause.
    EXCLUSION = (Kind.EXCLUDE, Kind.RECOLLECT, Kind.INCLUDE)
    BLOCKING = (Kind.BLOCK, Kind.RECOLLECT, Kind.UNBLOCK)

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="worker_actions")
    worker = models.ForeignKey("annotation.Worker", on_delete=models.PROTECT, related_name="actions")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Who acted; empty when a rule did.",
    )
    rule = models.ForeignKey(QualityRule, null=True, blank=True, on_delete=models.SET_NULL, related_name="actions")
    reason = models.CharField(max_length=300)
    numbers = models.JSONField(default=dict, blank=True, help_text="The worker's numbers that led to the action.")
    created_at = models.DateTimeField()
    undone_at = models.DateTimeField(null=True, blank=True)
    undone_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["campaign", "worker"], name="worker_action_campaign_worker")]

    def __str__(self) -> str:
        return f"{self.worker}: {self.get_kind_display()} ({self.reason})"
