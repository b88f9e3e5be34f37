"""Issue 21 in headless Chromium, at 1280×800 and on a phone (390×844): the campaign form shows the chosen
schema's settings only, sums its errors up at the top, says what adaptive k would do as it is typed, and
disables the settings fixed once prompts exist, saying why; the publication page copies the study link
and opens a try-out that stores nothing; a worker's first task opens the instructions. No console error,
no horizontal scrolling on the phone. Screenshots go to ``tmp_path``."""

import pytest

from annotation.channels.services import publication_create_panel
from annotation.models import Label, Lease
from tests.helpers import PHONE, page_problems, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DESKTOP = {"viewport": {"width": 1280, "height": 800}}
SIZES = [pytest.param(DESKTOP, id="desktop"), pytest.param(PHONE, id="phone")]


def fits(page, size) -> bool:
    """No wider than the viewport (a mobile page's innerWidth grows with a too-wide page)."""
    return page.evaluate("document.documentElement.scrollWidth") <= size["viewport"]["width"]


@pytest.mark.parametrize("size", SIZES)
def test_the_campaign_form_says_what_it_needs(live_server, new_page, researcher, make_campaign, size, tmp_path):
    page = new_page(**size)
    problems = page_problems(page, http=True)
    sign_in(page, live_server.url, "researcher")
    page.goto(f"{live_server.url}/campaigns/new/")

    # one schema's settings at a time
    binary, rating, free_text = (
        page.locator(f"fieldset[data-schemas*='{s}']") for s in ("binary", "rating", "free_text")
    )
    assert binary.is_visible() and not rating.is_visible() and not free_text.is_visible()
    page.select_option("select[name=schema]", "rating")
    assert rating.is_visible() and not binary.is_visible()
    assert page.locator("input[name=scale_min]").is_visible()
    page.select_option("select[name=schema]", "free_text")
    assert free_text.is_visible() and not rating.is_visible()
    page.select_option("select[name=schema]", "binary")

    # adaptive k's consequences, as typed
    page.fill("input[name=k]", "3")
    page.fill("input[name=k_max]", "5")
    page.fill("input[name=stop_confidence]", "0.95")
    page.wait_for_selector(".stop-consequences >> text=With k = 3 and 0.95, no prompt stops at 3")
    assert not page.locator(".stop-warning").is_visible()
    page.fill("input[name=k_max]", "4")
    page.fill("input[name=stop_confidence]", "0.99")
    # (k_max = 4 at 0.95 is pointless too: wait for the answer about 0.99, the last one asked)
    page.wait_for_selector(".stop-lines >> text=With k = 3 and 0.99, no prompt stops at 3")
    assert page.inner_text(".stop-warning").startswith("No prompt can stop before k_max = 4 labels")
    page.screenshot(path=tmp_path / "consequences.png")

    # the errors, summed up at the top, link to their fields
    page.click("button:has-text('Create campaign')")
    summary = page.locator(".error-summary")
    summary.wait_for()
    assert summary.locator("a[href='#id_title']").inner_text().startswith("Title: This field is required.")
    assert summary.locator("a[href='#id_k_max']").is_visible()
    box = summary.bounding_box()
    assert box["y"] < page.locator("fieldset").first.bounding_box()["y"]
    # the page came back with the last values' consequences, before any script ran
    assert page.locator(".stop-warning").is_visible()
    assert fits(page, size)
    page.screenshot(path=tmp_path / "errors.png", full_page=True)
    summary.locator("a[href='#id_title']").click()
    assert page.evaluate("location.hash") == "#id_title"

    # a campaign with prompts: the fixed settings are disabled, with their reason
    campaign = make_campaign(2, k=3, launch=False, title="With prompts")
    page.goto(f"{live_server.url}/campaigns/{campaign.slug}/edit/")
    assert page.locator("input[name=k]").is_disabled() and page.locator("select[name=schema]").is_disabled()
    assert not page.locator("input[name=title]").is_disabled()
    reason = page.locator("input[name=k] ~ .frozen-reason")
    assert reason.is_visible() and reason.inner_text().startswith("Fixed once prompts are imported:")
    assert fits(page, size)
    page.screenshot(path=tmp_path / "fixed.png", full_page=True)
    page.fill("input[name=title]", "Renamed")
    page.click("button:has-text('Save')")
    page.wait_for_selector(".message-success")
    campaign.refresh_from_db()
    assert (campaign.title, campaign.k) == ("Renamed", 3)
    assert problems == []


@pytest.mark.parametrize("size", SIZES)
def test_the_publication_page_copies_the_link_and_opens_a_try_out(
    live_server, new_page, researcher, make_campaign, size, tmp_path
):
    campaign = make_campaign(3, instructions="Say **yes** or no.")
    publication = publication_create_panel(campaign=campaign, user=researcher, completion_code="DONE1")
    page = new_page(**size, permissions=["clipboard-read", "clipboard-write"])
    problems = page_problems(page, http=True)
    sign_in(page, live_server.url, "researcher")
    page.goto(f"{live_server.url}/channels/publications/{publication.pk}/")
    copy = page.locator("button[data-copy-target=panel-url]")
    copy.click()
    page.wait_for_selector("button[data-copy-target=panel-url]:has-text('Copied')")
    study_url = page.input_value("#panel-url")
    assert page.evaluate("navigator.clipboard.readText()") == study_url
    assert fits(page, size)
    page.screenshot(path=tmp_path / "publication.png", full_page=True)

    with page.expect_popup() as opened:
        page.click("a.try-it")
    trial = opened.value
    trial_problems = page_problems(trial, http=True)
    trial.wait_for_selector("form.label-form")
    assert "Preview:" in trial.inner_text(".panel-try")
    assert trial.locator("details.instructions-toggle").get_attribute("open") is not None
    assert trial.locator("a:has-text('Sign in'), a:has-text('Sign up')").count() == 0
    first = trial.inner_text(".prompt-text")
    trial.click("button.choice-button >> nth=0")
    trial.wait_for_selector("text=Preview: that answer was not stored, and no place was used.")
    assert trial.inner_text(".prompt-text") != first
    assert fits(trial, size)
    trial.screenshot(path=tmp_path / "try.png", full_page=True)
    assert Label.objects.count() == 0 and Lease.objects.count() == 0
    assert problems == [] and trial_problems == []


@pytest.mark.parametrize("size", SIZES)
def test_a_worker_s_first_task_opens_the_instructions(live_server, new_page, make_campaign, make_user, size):
    campaign = make_campaign(4, k=1, instructions="Read **this** first.")
    make_user("wanda")
    page = new_page(**size)
    problems = page_problems(page, http=True)
    sign_in(page, live_server.url, "wanda")
    page.goto(f"{live_server.url}/w/{campaign.slug}/next/")
    page.wait_for_selector("form.label-form")
    details = page.locator("details.instructions-toggle")
    assert details.get_attribute("open") is not None and page.locator(".instructions strong").is_visible()
    page.click("button.choice-button >> nth=0")
    page.wait_for_selector(".done-count:has-text('1')")
    assert page.locator("details.instructions-toggle").get_attribute("open") is None
    assert not page.locator(".instructions strong").is_visible()
    assert fits(page, size)
    assert problems == []
