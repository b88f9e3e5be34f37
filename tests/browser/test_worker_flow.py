"""The pages in a real browser (headless Chromium) against a live server: keyboard labeling, the
heartbeat, a phone-sized screen, and the researcher's upload."""

import json

import pytest

from annotation import services
from annotation.models import Label, Lease
from tests.helpers import PHONE, fill_sign_up, no_horizontal_scroll, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

INSTRUCTIONS = "Decide whether each statement is **true**."


def sign_up(page, base_url: str, slug: str, username: str) -> None:
    page.goto(f"{base_url}/w/{slug}/")
    page.click(".worker-start >> text=Sign up")
    fill_sign_up(page, username)
    page.wait_for_url(f"{base_url}/w/{slug}/")


def done_count(page) -> int:
    return int(page.inner_text(".done-count"))


def test_a_worker_signs_up_and_labels_with_the_keyboard_until_nothing_is_left(live_server, page, make_campaign):
    campaign = make_campaign(3, k=1, instructions=INSTRUCTIONS)
    sign_up(page, live_server.url, campaign.slug, "keyboard-kim")
    assert page.inner_text(".instructions strong") == "true"
    assert done_count(page) == 0
    page.click("text=Start labeling")

    pressed = []
    for done, key in enumerate("tft"):
        page.wait_for_selector("form.label-form")
        assert done_count(page) == done
        text = page.inner_text(".prompt-text")
        with page.expect_navigation():
            page.keyboard.press(key)
        pressed.append((text, 1 if key == "t" else 0))
        assert done_count(page) == done + 1

    assert page.inner_text(".nothing-left h1") == "Nothing left for you"
    assert "nothing left for you to label" in page.inner_text(".nothing-left .reason")
    labels = Label.objects.filter(worker__user__username="keyboard-kim").select_related("prompt").order_by("id")
    assert [(label.prompt.text, label.value) for label in labels] == pressed


def test_per_option_rating_with_digits_and_enter(live_server, page, researcher, make_user):
    campaign = services.campaign_create(
        owner=researcher,
        title="Options",
        schema="option_rating",
        scale_min=1,
        scale_max=4,
        k=1,
        binarization={"1": 0, "2": 0, "3": 1, "4": 1},
    )
    rows = [{"id": "q1", "text": "Rate each colour", "options": ["red", "green", "blue"]}]
    services.prompts_import(campaign=campaign, data=json.dumps(rows[0]).encode(), filename="q.jsonl")
    services.campaign_transition(campaign=campaign, action="launch")
    make_user("opal")
    sign_in(page, live_server.url, "opal")
    page.goto(f"{live_server.url}/w/{campaign.slug}/next/")
    page.wait_for_selector(".option-row.current")
    page.keyboard.press("3")
    page.keyboard.press("1")
    assert page.eval_on_selector_all(".option-row", "rows => rows.map(r => r.classList.contains('current'))") == [
        False,
        False,
        True,
    ]
    page.keyboard.press("4")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert Label.objects.get().value == [3, 1, 4]


def test_the_open_page_sends_heartbeats(live_server, page, make_user, make_campaign):
    campaign = make_campaign(1, k=1, lease_seconds=12)  # a beat every 4 s
    make_user("hattie")
    sign_in(page, live_server.url, "hattie")
    with page.expect_response(lambda response: "/heartbeat/" in response.url, timeout=9_000) as beat:
        page.goto(f"{live_server.url}/w/{campaign.slug}/next/")
    assert beat.value.status == 200
    lease = Lease.objects.get()
    assert beat.value.json() == {"expires_at": lease.expires_at.isoformat()}
    assert (lease.expires_at - lease.created_at).total_seconds() > 12


def test_a_phone_sized_screen_needs_no_horizontal_scroll(live_server, new_page, make_user, make_campaign):
    campaign = make_campaign(2, k=1, instructions=INSTRUCTIONS)
    make_user("pat")
    page = new_page(**PHONE)
    sign_in(page, live_server.url, "pat")
    page.goto(f"{live_server.url}/w/{campaign.slug}/")
    assert no_horizontal_scroll(page)
    page.click("text=Start labeling")
    page.wait_for_selector("form.label-form")
    assert no_horizontal_scroll(page)
    for selector in ("button[data-key=t]", "button[data-key=f]", ".stop-form button"):
        button = page.locator(selector)
        assert button.is_visible()
        box = button.bounding_box()
        assert box["height"] >= 44 and box["x"] >= 0 and box["x"] + box["width"] <= 390, selector
    with page.expect_navigation():
        page.tap("button[data-key=t]")
    assert done_count(page) == 1


def test_a_researcher_uploads_prompts_and_sees_the_progress_bar(live_server, new_page, researcher, tmp_path):
    campaign = services.campaign_create(owner=researcher, title="Uploads", k=2)
    prompts = tmp_path / "prompts.csv"
    prompts.write_text("id,text,gold\na,Water is wet.,1\nb,Stones float.,0\nc,Birds fly.,1\nd,Fish knit.,0\n")
    page = new_page(**PHONE)
    sign_in(page, live_server.url, "researcher")
    page.goto(f"{live_server.url}/campaigns/{campaign.slug}/")
    page.set_input_files("input[name=file]", str(prompts))
    page.click("button:has-text('Upload')")
    page.click("button:has-text('Import these 4 prompts')")  # after the file's preview
    page.wait_for_selector(".message-success")
    assert page.inner_text(".message-success") == "Imported 4 prompts from prompts.csv."
    bar = page.locator("progress.campaign-progress")
    assert (bar.get_attribute("max"), bar.get_attribute("value")) == ("8", "0")
    assert "0 of 8 labels" in page.inner_text(".progress-text")
    assert no_horizontal_scroll(page)
    page.click("button:has-text('Launch')")
    page.wait_for_selector(".status-live")
