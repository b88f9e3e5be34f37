"""Roles in headless Chromium: the owner shares a campaign with a colleague as a viewer on its page; the
viewer sees its progress, export and activity but no form that would be refused, and their dashboard
offers no action; a new account that signed up is offered no "New campaign"."""

import pytest

from annotation.models import Collaboration
from tests.helpers import fill_sign_up, page_problems, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_viewer_watches_and_the_activity_log_says_who_did_what(live_server, new_page, make_campaign, make_user):
    campaign = make_campaign(4, k=2, title="Shared study")
    make_user("viola")
    base = live_server.url

    owner = new_page(viewport={"width": 1280, "height": 900})
    problems = page_problems(owner)
    sign_in(owner, base, "researcher")
    owner.goto(f"{base}/campaigns/{campaign.slug}/")
    owner.fill("#collaborators input[name=username]", "viola")
    owner.check("#collaborators input[value=viewer]")
    owner.click("#collaborators button:has-text('Add')")
    assert "Shared with viola as viewer" in owner.inner_text(".message")
    assert Collaboration.objects.get(campaign=campaign).role == "viewer"
    assert "Shared with viola as viewer" in owner.inner_text("#activity")

    viewer = new_page(viewport={"width": 1280, "height": 900})
    problems += page_problems(viewer)
    sign_in(viewer, base, "viola")
    viewer.click(f"a:has-text('{campaign.title}')")
    assert "You are a viewer of this campaign" in viewer.inner_text("main")
    assert viewer.locator("main form[method=post]").count() == 0  # nothing to press that would be refused
    assert viewer.locator("a:has-text('Download CSV'), button:has-text('Download CSV')").count() == 1
    activity = viewer.inner_text("#activity")
    assert (
        "researcher: Created “Shared study”" in activity and "Chorus: Launch: now live" in activity
    )  # launched by a script (the fixture)
    viewer.goto(f"{base}/audits/{campaign.slug}/")
    assert viewer.locator("main form[method=post]").count() == 0
    assert problems == []


def test_a_new_account_is_offered_no_campaign_to_create(live_server, new_page, db):
    page = new_page()
    page.goto(f"{live_server.url}/accounts/signup/")
    fill_sign_up(page, "newcomer")
    page.goto(f"{live_server.url}/")
    assert page.locator("a:has-text('New campaign')").count() == 0
    assert "manage.py researcher newcomer" in page.inner_text("main")
