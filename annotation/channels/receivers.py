"""What the channels do when the core says something happened (``annotation.signals``)."""

from django.dispatch import receiver

from annotation.channels.models import ProlificSubmission, Publication
from annotation.channels.tasks import prolific_review_task, prolific_sync_task
from annotation.signals import campaign_status_changed
from audits.hook import rules_applied


@receiver(campaign_status_changed)
def _study_follows_campaign(*, campaign_id: int, **kwargs):
    """Pause, start or stop the campaign's Prolific studies (``prolific_sync`` reads the new status)."""
    for publication_id in (
        Publication.objects.filter(campaign_id=campaign_id, kind=Publication.Kind.PROLIFIC, closed_at__isnull=True)
        .exclude(status=Publication.Status.FAILED)
        .values_list("pk", flat=True)
    ):
        prolific_sync_task.delay(publication_id)


@receiver(rules_applied)
def _review_what_waited_for_the_audit(*, campaign_id: int, **kwargs):
    """The live audit has judged the labels it read: the submissions waiting for it may be approved now."""
    for publication_id in (
        ProlificSubmission.objects.filter(
            publication__campaign_id=campaign_id, verdict=ProlificSubmission.Verdict.WAITING
        )
        .values_list("publication_id", flat=True)
        .distinct()
    ):
        prolific_review_task.delay(publication_id)
