"""What outbound webhooks do when the core says something happened (``annotation.signals``)."""

from django.dispatch import receiver

from annotation.models import Campaign
from annotation.signals import campaign_status_changed
from annotation.webhooks.models import Endpoint
from annotation.webhooks.services import event_emit


@receiver(campaign_status_changed)
def _campaign_status(*, campaign_id: int, status: str, **kwargs):
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    if campaign is not None:
        event_emit(campaign=campaign, event_type=Endpoint.Event.CAMPAIGN_STATUS, data={"status": status})
