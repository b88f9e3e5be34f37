"""What the channels do when the core says something happened (``annotation.signals``)."""

from django.dispatch import receiver

from annotation.channels.models import Publication
from annotation.channels.tasks import prolific_sync_task
from annotation.signals import campaign_status_changed


@receiver(campaign_status_changed)
def _study_follows_campaign(*, campaign_id: int, **kwargs):
    """Pause, start or stop the campaign's Prolific studies (``prolific_sync`` reads the new status)."""
    for publication_id in (
        Publication.objects.filter(campaign_id=campaign_id, kind=Publication.Kind.PROLIFIC, closed_at__isnull=True)
        .exclude(status=Publication.Status.FAILED)
        .values_list("pk", flat=True)
    ):
        prolific_sync_task.delay(publication_id)
