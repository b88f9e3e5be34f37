"""Closing a campaign cannot be undone, so it asks first, on a page of its own that works without
JavaScript; a closed campaign's page offers neither its workers' link nor publishing."""

import re

import pytest
from django.urls import reverse

from annotation import services
from annotation.channels.models import Publication
from tests.helpers import messages_of

pytestmark = pytest.mark.django_db


def test_the_campaign_page_links_to_the_confirmation_instead_of_closing(researcher_client, make_campaign):
    campaign = make_campaign(2)
    page = researcher_client.get(reverse("campaign_detail", args=[campaign.slug])).content.decode()
    close_url = reverse("campaign_close", args=[campaign.slug])
    assert f'<a class="button danger" href="{close_url}">Close…</a>' in page
    assert f'action="{close_url}"' not in page  # no one-click form next to "Pause"


def test_the_confirmation_says_what_closing_does_and_changes_nothing(researcher_client, make_campaign, make_worker):
    campaign = make_campaign(3, k=2, lease_seconds=600)
    services.lease_acquire(campaign=campaign, worker=make_worker())
    services.lease_acquire(campaign=campaign, worker=make_worker())

    response = researcher_client.get(reverse("campaign_close", args=[campaign.slug]))

    assert response.status_code == 200
    text = re.sub(r"\s+", " ", response.content.decode())
    for fact in (
        "It cannot be undone.",
        "No more labels, on any channel.",
        "Live leases end.",
        "Workers have 2 prompts open right now.",
        "for at most 9 minutes,",  # what is left of a 600 s lease taken a moment ago
        "It cannot be reopened.",
        "To stop labeling for a while, pause it instead.",
        "The labels stay.",
        "can be exported as CSV or JSONL",
    ):
        assert fact in text, fact
    assert '<input type="hidden" name="confirm" value="close">' in text
    assert "<script" not in text  # a plain form: it works without JavaScript
    campaign.refresh_from_db()
    assert campaign.status == "live"


def test_only_the_confirmed_post_closes(researcher_client, make_campaign):
    campaign = make_campaign(2)
    url = reverse("campaign_close", args=[campaign.slug])
    assert url == f"/campaigns/{campaign.slug}/close/"  # where the one-click form of old pages posted

    unconfirmed = researcher_client.post(url)
    assert unconfirmed.status_code == 400 and b"Close the campaign for good" in unconfirmed.content
    campaign.refresh_from_db()
    assert campaign.status == "live"

    response = researcher_client.post(url, {"confirm": "close"}, follow=True)
    assert response.redirect_chain[-1][0] == reverse("campaign_detail", args=[campaign.slug])
    assert "The campaign is closed." in messages_of(response)
    campaign.refresh_from_db()
    assert campaign.status == "closed" and campaign.closed_at is not None

    again = researcher_client.get(url, follow=True)
    assert "This campaign is already closed." in messages_of(again)


def test_a_stranger_gets_a_404(client, make_user, make_campaign):
    campaign = make_campaign(2)
    client.force_login(make_user("stranger"))
    url = reverse("campaign_close", args=[campaign.slug])
    assert client.get(url).status_code == 404
    assert client.post(url, {"confirm": "close"}).status_code == 404
    campaign.refresh_from_db()
    assert campaign.status == "live"


def test_a_closed_campaign_page_hides_the_workers_link_and_publishing(researcher_client, make_campaign):
    campaign = make_campaign(2)
    detail = reverse("campaign_detail", args=[campaign.slug])
    open_page = researcher_client.get(detail).content.decode()
    assert "Workers' link" in open_page and "Publish on MTurk or a panel" in open_page
    services.campaign_transition(campaign=campaign, action="close")

    page = researcher_client.get(detail).content.decode()

    assert "Workers' link" not in page and reverse("worker_campaign", args=[campaign.slug]) not in page
    assert reverse("campaign_invitation", args=[campaign.slug]) not in page
    assert "Publish on MTurk or a panel" not in page
    assert "takes no more labels" in page and "export them below" in page
    # Its publications stay reachable (progress, bonuses still to pay).
    assert f'href="{reverse("channels:campaign_channels", args=[campaign.slug])}">Publications</a>' in page


def test_the_channels_pages_refuse_to_publish_a_closed_campaign(researcher_client, make_campaign):
    campaign = make_campaign(2)
    services.campaign_transition(campaign=campaign, action="close")
    channels_url = reverse("channels:campaign_channels", args=[campaign.slug])

    page = researcher_client.get(channels_url).content.decode()
    assert "This campaign is closed: it takes no more labels, so it cannot be published." in page
    assert reverse("channels:mturk_publish", args=[campaign.slug]) not in page
    assert reverse("channels:panel_publish", args=[campaign.slug]) not in page
    for name, data in (
        ("channels:mturk_publish", {"title": "T", "description": "D", "reward": "0.10", "publish": "1"}),
        ("channels:panel_publish", {"panel_name": "prolific", "completion_code": "C0DE"}),
    ):
        url = reverse(name, args=[campaign.slug])
        assert researcher_client.get(url)["Location"] == channels_url
        assert researcher_client.post(url, data)["Location"] == channels_url
    assert not Publication.objects.exists()
