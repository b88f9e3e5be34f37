"""The activity log as a CSV download, for the record kept with a study's labels."""

import csv
import json
from collections.abc import Iterator
from itertools import chain

from django.http import StreamingHttpResponse

from annotation.exporting import EchoLine, neutralise_cell
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
    writer = csv.writer(EchoLine())
    chunks = (
        writer.writerow([neutralise_cell(row[field]) for field in ACTIVITY_FIELDS])
        for row in activity_rows(campaign=campaign)
    )
    response = StreamingHttpResponse(chain([writer.writerow(ACTIVITY_FIELDS)], chunks), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="{campaign.slug}-activity.csv"'
    return response
