from django.db import models


class Label(models.Model):
    """An acknowledged label. Never edited: the admin shows it read-only."""

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="labels")
    prompt = models.ForeignKey("annotation.Prompt", on_delete=models.CASCADE, related_name="labels")
    worker = models.ForeignKey("annotation.Worker", on_delete=models.PROTECT, related_name="labels")
    lease = models.OneToOneField("annotation.Lease", on_delete=models.PROTECT, related_name="label")
    slot = models.OneToOneField("annotation.Slot", on_delete=models.PROTECT, related_name="label")
    value = models.JSONField(help_text="The raw value: a number, or one number per option.")
    client_token = models.CharField(max_length=64, help_text="Sent by the client; a resubmission repeats it.")
    leased_at = models.DateTimeField()
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["prompt", "worker"], name="label_prompt_worker_unique"),
            models.UniqueConstraint(fields=["worker", "client_token"], name="label_client_token_unique"),
        ]
        indexes = [models.Index(fields=["campaign", "id"], name="label_campaign_order")]

    def __str__(self) -> str:
        return f"{self.worker} → {self.prompt}: {self.value}"

    @property
    def time_spent(self):
        return self.created_at - self.leased_at
