from django.conf import settings
from django.db import models


def public_worker_id(channel: str, external_id: str) -> str:
    """A worker's public id, ``<channel>:<external id>``: how pages, exports, the API and the audit name a
    worker. The one place it is built, for reads that fetch the two columns rather than the row too."""
    return f"{channel}:{external_id}"


def public_worker_id_parse(public_id: str) -> tuple[str, str]:
    """``(channel, external id)`` of a public id: the inverse of :func:`public_worker_id` (a channel has
    no colon; an external id may have some)."""
    channel, _, external_id = public_id.partition(":")
    return channel, external_id


class Worker(models.Model):
    """Somebody who labels, identified by channel + the channel's id for them.

    Native workers have a Django user; MTurk and panel workers are known by their external id only.
    """

    NATIVE = "native"

    channel = models.CharField(max_length=20, default=NATIVE)
    external_id = models.CharField(max_length=200)
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="worker"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["channel", "external_id"], name="worker_identity_unique")]

    def __str__(self) -> str:
        return self.public_id

    @property
    def public_id(self) -> str:
        return public_worker_id(self.channel, self.external_id)


class Participation(models.Model):
    """A worker in a campaign. Its row lock serialises one worker's requests for work."""

    campaign = models.ForeignKey("annotation.Campaign", on_delete=models.CASCADE, related_name="participations")
    worker = models.ForeignKey(Worker, on_delete=models.CASCADE, related_name="participations")
    n_labels = models.PositiveIntegerField(default=0)
    joined_at = models.DateTimeField(auto_now_add=True)
    excluded_at = models.DateTimeField(
        null=True, blank=True, help_text="Excluded from the audit: labels kept and exported, left out of every number."
    )
    blocked_at = models.DateTimeField(null=True, blank=True, help_text="Blocked: no further leases on any channel.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["campaign", "worker"], name="participation_unique")]

    def __str__(self) -> str:
        return f"{self.worker} in {self.campaign}"
