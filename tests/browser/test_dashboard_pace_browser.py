"""The dashboard says when a live campaign will be done at its current pace (as the campaign page does),
at 1280×800 and on a phone (390×844), from the progress API."""

import datetime

import pytest
from django.utils import timezone

from annotation.models import Campaign
from tests.helpers import PHONE, label_one, no_horizontal_scroll, page_problems, sign_in, sim_worker

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LAPTOP = {"viewport": {"width": 1280, "height": 800}}


@pytest.mark.parametrize("screen", [LAPTOP, PHONE], ids=["1280x800", "390x844"])
def test_the_dashboard_says_when_the_campaign_will_be_done(live_server, new_page, make_campaign, researcher, screen):
    campaign = make_campaign(10, k=2)
    Campaign.objects.filter(pk=campaign.pk).update(launched_at=timezone.now() - datetime.timedelta(minutes=10))
    for _ in range(4):
        label_one(campaign, sim_worker(), value=1)
    page = new_page(**screen)
    problems = page_problems(page, http=True)
    sign_in(page, live_server.url, "researcher")
    page.goto(f"{live_server.url}/audits/{campaign.slug}/")
    pace = page.locator("#pace")
    # 4 labels in 10 minutes: 0.4 a minute, 16 labels still wanted: 40 minutes.
    pace.filter(has_text="Done in about").wait_for(timeout=10_000)
    assert pace.inner_text() == "Done in about 40 minutes at the pace of the last 10 minutes (0.4 labels a minute)."
    assert no_horizontal_scroll(page)
    assert problems == []
