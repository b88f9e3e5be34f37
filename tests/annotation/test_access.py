"""Drafts are private: until a campaign is launched, every worker-facing URL of it (its page, its
invitation links, its panel link, the worker API) answers only its managers, and everybody else gets
the 404 of a slug that does not exist (``selectors.campaigns_for_workers``)."""

import pytest
from rest_framework.test import APIClient

from annotation import selectors, services
from annotation.channels.services import publication_create_panel
from annotation.models import Lease, Worker
from tests.helpers import signed_in

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]

MISSING = "no-such-campaign"


@pytest.fixture
def draft(make_campaign, make_user, researcher):
    """A draft with prompts, a collaborator, an invitation and a panel link: everything a worker could
    be sent to before launch."""
    campaign = make_campaign(3, launch=False, title="Secret benchmark", instructions="Unreleased **plans**")
    campaign.collaborators.add(make_user("colleague"))
    campaign.invitation = services.invitations_create(campaign=campaign, created_by=researcher, notes=["Ada"])[0]
    campaign.panel = publication_create_panel(campaign=campaign, user=researcher, completion_code="C").panel
    return campaign


def worker_urls(campaign) -> dict[str, str]:
    return {
        "page": f"/w/{campaign.slug}/",
        "join": f"/w/{campaign.slug}/join/{campaign.invitation.token}/",
        "next": f"/w/{campaign.slug}/next/",
        "panel": f"/channels/panel/{campaign.panel.slug}/?PROLIFIC_PID=P1&STUDY_ID=S&SESSION_ID=X",
    }


def missing_urls() -> dict[str, str]:
    return {
        "page": f"/w/{MISSING}/",
        "join": f"/w/{MISSING}/join/whatever/",
        "next": f"/w/{MISSING}/next/",
        "panel": f"/channels/panel/{MISSING}/?PROLIFIC_PID=P1&STUDY_ID=S&SESSION_ID=X",
    }


@pytest.mark.parametrize("who", ["anonymous", "stranger"])
@pytest.mark.parametrize("url", ["page", "join", "next", "panel"])
def test_a_draft_is_a_404_like_a_missing_slug_for_everybody_but_its_managers(draft, make_user, who, url):
    client = signed_in(make_user("stranger") if who == "stranger" else None)
    workers = Worker.objects.count()
    draft_url, missing_url = worker_urls(draft)[url], missing_urls()[url]
    response, missing = client.get(draft_url), client.get(missing_url)
    # /next/ asks an anonymous visitor to sign in first, whatever the slug
    expected = 302 if (url, who) == ("next", "anonymous") else 404
    assert (response.status_code, missing.status_code) == (expected, expected)
    # The same answer, path aside: nothing tells a guessed slug from a wrong one.
    draft_path, missing_path = draft_url.split("?")[0].encode(), missing_url.split("?")[0].encode()
    assert response.content.replace(draft_path, b"PATH") == missing.content.replace(missing_path, b"PATH")
    assert response.get("Location", "").replace(draft.slug, "SLUG") == missing.get("Location", "").replace(
        MISSING, "SLUG"
    )
    assert b"Secret benchmark" not in response.content and b"Unreleased" not in response.content
    assert Worker.objects.count() == workers  # the panel link made no participant either


@pytest.mark.parametrize("path", ["next-task/", "my-labels/"])
def test_the_worker_api_hides_a_draft_too(draft, make_user, path):
    method = "post" if path == "next-task/" else "get"
    stranger = APIClient()
    stranger.force_authenticate(make_user("stranger"))
    response = getattr(stranger, method)(f"/api/v1/campaigns/{draft.slug}/{path}")
    missing = getattr(stranger, method)(f"/api/v1/campaigns/{MISSING}/{path}")
    assert response.status_code == missing.status_code == 404
    assert response.json() == missing.json()
    owner = APIClient()
    owner.force_authenticate(draft.owner)
    assert getattr(owner, method)(f"/api/v1/campaigns/{draft.slug}/{path}").status_code == 200


@pytest.mark.parametrize("manager", ["researcher", "colleague", "staffer"])
def test_managers_preview_the_draft_workers_page(draft, make_user, manager):
    user = {"researcher": draft.owner, "colleague": draft.collaborators.get()}.get(manager) or make_user(
        "staffer", is_staff=True
    )
    client = signed_in(user)
    page = client.get(f"/w/{draft.slug}/")
    assert page.status_code == 200 and b"Unreleased <strong>plans</strong>" in page.content
    assert b"Preview: this campaign is not launched yet." in page.content
    assert b"Start labeling" not in page.content and page.context["outlook"].code == "campaign_draft"
    # The other worker URLs answer them too (no work: the campaign is not live), never with a lease.
    assert client.get(f"/w/{draft.slug}/next/").context["code"] == "campaign_draft"
    assert client.get(worker_urls(draft)["join"]).status_code == 302  # signed in already: to the page
    assert not Lease.objects.exists()


def test_launch_opens_the_draft_to_everybody(draft):
    client = signed_in()
    assert client.get(f"/w/{draft.slug}/").status_code == 404
    services.campaign_transition(campaign=draft, action="launch")
    page = client.get(f"/w/{draft.slug}/")
    assert page.status_code == 200 and b"Preview" not in page.content
    assert client.get(worker_urls(draft)["join"]).status_code == 200
    assert client.get(worker_urls(draft)["panel"]).status_code == 302  # the participant is in


def test_a_campaign_closed_before_launch_stays_private(draft, make_user):
    services.campaign_transition(campaign=draft, action="close")
    assert signed_in().get(f"/w/{draft.slug}/").status_code == 404
    assert signed_in(draft.owner).get(f"/w/{draft.slug}/").status_code == 200


def test_a_launched_campaign_with_several_collaborators_is_found_once(make_campaign, make_user):
    """The visibility rule is a subquery: a join on the collaborators would find the campaign once per
    collaborator, and the page would fail with MultipleObjectsReturned."""
    campaign = make_campaign(1)
    campaign.collaborators.add(make_user("c1"), make_user("c2"))
    stranger = make_user("stranger")
    assert selectors.campaign_for_workers(slug=campaign.slug, user=stranger) == campaign
    assert signed_in(campaign.collaborators.first()).get(f"/w/{campaign.slug}/").status_code == 200
