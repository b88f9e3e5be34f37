"""A live campaign's time to completion (issue 21, "Progress with a time"): the labels still wanted
at the pace of the last half hour, on the campaign page and in the progress API."""

import pytest
from django.urls import reverse

from annotation import selectors, services
from tests.clock import later
from tests.helpers import label_one

pytestmark = pytest.mark.django_db


def test_the_pace_of_the_last_half_hour_gives_the_time_to_completion(make_campaign, make_worker, researcher_client):
    campaign = make_campaign(10, k=2)  # 20 labels wanted
    for _ in range(4):
        label_one(campaign, make_worker())
    with later(10 * 60):  # 4 labels in 10 minutes: 0.4 a minute, 16 left: 40 minutes
        progress = selectors.campaign_progress(campaign=campaign)
        pace = selectors.campaign_pace(campaign=campaign, progress=progress)
        assert pace.labels_per_minute == pytest.approx(0.4, rel=1e-3)
        assert pace.eta_seconds == pytest.approx(40 * 60, rel=1e-3)
        page = researcher_client.get(reverse("campaign_detail", args=[campaign.slug])).content.decode()
        assert "Done in about 40 minutes at the pace of the last 10 minutes (0.4 labels a minute)." in page
        api = researcher_client.get(f"/api/v1/campaigns/{campaign.slug}/progress/").json()
        assert api["labels"] == 4 and api["eta_seconds"] == pytest.approx(2400, rel=1e-3)
    with later(3 * 3600):  # the labels are older than the window: no pace to go by
        pace = selectors.campaign_pace(campaign=campaign, progress=selectors.campaign_progress(campaign=campaign))
        assert (pace.labels_per_minute, pace.eta_seconds) == (0, None)
        page = researcher_client.get(reverse("campaign_detail", args=[campaign.slug])).content.decode()
        assert "No labels in the last 30 minutes" in page


def test_a_campaign_that_is_not_live_has_no_pace(make_campaign, make_worker):
    campaign = make_campaign(3, k=1)
    label_one(campaign, make_worker())
    campaign = services.campaign_transition(campaign=campaign, action="pause")
    with later(600):
        pace = selectors.campaign_pace(campaign=campaign, progress=selectors.campaign_progress(campaign=campaign))
    assert (pace.labels_per_minute, pace.eta_seconds) == (None, None)
