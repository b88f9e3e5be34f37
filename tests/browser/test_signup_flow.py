"""A worker's first hour without a dead end, in a real browser (headless Chromium): the header's sign-up
and sign-in come back to the campaign, a full campaign says so before anybody signs up, an invitation
link is one person across devices, and a panel participant with no work is asked to return the study.
Each test leaves a screenshot of the page it checks in its ``tmp_path``."""

import pytest

from annotation import services
from annotation.channels.services import publication_create_panel
from annotation.models import Label, Worker
from tests.helpers import PHONE, fill_sign_in, fill_sign_up, label_all

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def fill_all_slots(campaign) -> None:
    label_all(campaign, services.worker_get_or_create(channel="panel", external_id="early-bird"))


def test_the_headers_sign_up_comes_back_to_the_campaign(live_server, page, make_campaign):
    campaign = make_campaign(2, k=1)
    start = f"{live_server.url}/w/{campaign.slug}/"
    page.goto(start)
    page.click(".site-header >> text=Sign up")
    fill_sign_up(page, "header-hana")
    page.wait_for_url(start)
    page.click("text=Start labeling")
    page.wait_for_selector("form.label-form")


def test_the_headers_sign_in_comes_back_to_the_campaign(live_server, page, make_campaign, make_user):
    campaign = make_campaign(2, k=1)
    make_user("returning-rui")
    start = f"{live_server.url}/w/{campaign.slug}/"
    page.goto(start)
    page.click(".site-header >> text=Sign in")
    fill_sign_in(page, "returning-rui")
    page.wait_for_url(start)
    assert page.is_visible("text=Start labeling")


def test_a_full_campaign_says_so_before_sign_up(live_server, new_page, make_campaign, tmp_path):
    campaign = make_campaign(2, k=1, title="Everyday statements", instructions="Is it **true**?")
    fill_all_slots(campaign)
    page = new_page(**PHONE)
    page.goto(f"{live_server.url}/w/{campaign.slug}/")
    page.screenshot(path=tmp_path / "full-campaign.png", full_page=True)
    assert page.inner_text(".outlook") == (
        "This campaign is full: every prompt has all the labels it needs. Thank you for your interest!"
    )
    assert page.locator("main a.button").count() == 0  # no "Sign up", no "Start labeling"


def test_an_invitation_is_one_person_on_two_devices(live_server, new_page, make_campaign, researcher, tmp_path):
    campaign = make_campaign(3, k=1)
    invitation = services.invitations_create(campaign=campaign, created_by=researcher, notes=["Ada"])[0]
    link = f"{live_server.url}/w/{campaign.slug}/join/{invitation.token}/"
    phone = new_page(**PHONE)
    phone.goto(link)
    phone.click("text=Start as a guest")
    code = phone.inner_text(".reentry-code")
    phone.screenshot(path=tmp_path / "invitation-code.png", full_page=True)
    phone.click("a.button:has-text('Continue')")
    phone.click("text=Start labeling")
    with phone.expect_navigation():
        phone.tap("button[data-key=t]")

    laptop = new_page()
    laptop.goto(link)
    assert not laptop.is_visible("text=Start as a guest")
    laptop.fill("input[name=code]", code.lower())
    laptop.click("main >> button:has-text('Continue')")
    laptop.wait_for_url(f"{live_server.url}/w/{campaign.slug}/")
    assert laptop.inner_text(".done-count") == "1"  # the same worker, on the second device
    assert Worker.objects.filter(user__username__startswith="guest-").count() == 1
    assert Label.objects.count() == 1


def test_a_panel_participant_with_no_work_is_asked_to_return_the_study(
    live_server, new_page, make_campaign, researcher, tmp_path
):
    campaign = make_campaign(1, k=1, title="Everyday statements")
    fill_all_slots(campaign)
    panel = publication_create_panel(campaign=campaign, user=researcher, completion_code="C0DE1234").panel
    page = new_page(**PHONE)
    page.goto(f"{live_server.url}/channels/panel/{panel.slug}/?PROLIFIC_PID=P1&STUDY_ID=S1&SESSION_ID=X1")
    page.wait_for_selector(".panel-no-work")
    page.screenshot(path=tmp_path / "panel-no-work.png", full_page=True)
    text = page.inner_text(".panel-no-work")
    assert "Sorry, there is no work for you" in text and "return the study on Prolific" in text
    assert "C0DE1234" not in page.content()
