"""Adaptive k's log: what the stopping rule decided for a prompt each time its last open slot was filled
(``annotation.services.adaptive``). Each row is a log entry: kept, never edited."""

from django.db import models


class StopDecision(models.Model):
    """Adaptive k: what was decided for a prompt when its last open slot was filled."""

    class Outcome(models.TextChoices):
        STOP = "stop", "Stop: the majority is settled"
        EXTEND = "extend", "One more slot"
        AT_MAX = "at_max", "Stop: the most labels allowed"

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="+")
    prompt = models.ForeignKey("annotation.Prompt", on_delete=models.CASCADE, related_name="stop_decisions")
    n_labels = models.PositiveSmallIntegerField()
    n_positive = models.PositiveSmallIntegerField(help_text="Counted labels whose scaled value is 1.")
    posterior = models.FloatField(help_text="P(the current majority is the crowd's majority), uniform Beta prior.")
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["prompt", "n_labels"]
        constraints = [models.UniqueConstraint(fields=["prompt", "n_labels"], name="stop_decision_prompt_count_unique")]

    def __str__(self) -> str:
        return f"{self.prompt} at {self.n_labels}: {self.outcome} ({self.posterior:.3f})"
