"""The activity log as a CSV download, for the record kept with a study's labels."""

import json
from collections.abc import Iterator

from django.http import StreamingHttpResponse

from annotation.exporting import csv_response
from annotation.models import Campaign
from annotation.selectors import campaign_activity

ACTIVITY_FIELDS = ("created_at", "actor", "verb", "summary", "detail")


def activity_rows(*, campaign: Campaign) -> Iterator[dict]:
    for activity in campaign_activity(campaign=campaign).iterator(chunk_size=2000):
        yield {
            "created_at": activity.created_at.isoformat(),
            "actor": activity.actor.get_username() if activity.actor else "",
            "verb": activity.verb,
            "summary": activity.summary,
            "detail": json.dumps(activity.detail, ensure_ascii=False, sort_keys=True),
        }


def activity_csv_response(*, campaign: Campaign) -> StreamingHttpResponse:
    return csv_response(
        activity_rows(campaign=campaign), fields=ACTIVITY_FIELDS, filename=f"{campaign.slug}-activity.csv"
    )
