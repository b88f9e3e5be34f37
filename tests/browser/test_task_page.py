"""The task page in a real browser: rating buttons in rows of 44 px targets on a phone, the scale's anchors, no keyboard
hints on touch screens, "Skip"; and closing a campaign through its confirmation page without JavaScript."""

import json

import pytest

from annotation import services
from annotation.models import Campaign, Label, Lease
from tests.helpers import PHONE, no_horizontal_scroll, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DESKTOP = {"viewport": {"width": 1280, "height": 800}}


def launched(researcher, rows, **fields):
    fields.setdefault("k", 1)
    campaign = services.campaign_create(owner=researcher, title="Fit", **fields)
    data = "".join(json.dumps(row) + "\n" for row in rows).encode()
    services.prompts_import(campaign=campaign, data=data, filename="q.jsonl")
    return services.campaign_transition(campaign=campaign, action="launch")


def rating(researcher, low, high, n_prompts=2, schema="rating", anchors=(), options=()):
    rows = [
        {"id": f"q{i}", "text": f"Does answer {i} fit the question?", "options": list(options)}
        for i in range(n_prompts)
    ]
    return launched(
        researcher,
        rows,
        schema=schema,
        scale_min=low,
        scale_max=high,
        binarization={str(low): 0, str(high): 1},
        scale_anchors=list(anchors),
    )


def open_task(new_page, live_server, campaign, username, **context):
    page = new_page(**context)
    sign_in(page, live_server.url, username)
    page.goto(f"{live_server.url}/w/{campaign.slug}/next/")
    page.wait_for_selector("form.label-form")
    return page


def boxes(page, selector):
    return [page.locator(selector).nth(i).bounding_box() for i in range(page.locator(selector).count())]


@pytest.mark.parametrize("low, high", [(0, 1), (1, 4), (1, 7), (0, 10)])
def test_a_phone_shows_every_scale_in_rows_of_44_px_buttons(live_server, new_page, researcher, make_user, low, high):
    campaign = rating(researcher, low, high, anchors=["bad fit", "very good fit"])
    make_user("pat")
    page = open_task(new_page, live_server, campaign, "pat", **PHONE)

    buttons = boxes(page, "button.choice-button")
    assert len(buttons) == high - low + 1
    # One row up to six points; beyond, rows of six (issue 22), so that every button is a 44 px target.
    assert len({round(box["y"]) for box in buttons}) == (1 if len(buttons) <= 6 else 2)
    assert all(box["x"] >= 0 and box["x"] + box["width"] <= 390 and box["height"] >= 44 for box in buttons)
    assert all(box["width"] >= 44 for box in buttons)
    # The text of each button stays inside it.
    assert page.eval_on_selector_all("button.choice-button", "bs => bs.every(b => b.scrollWidth <= b.clientWidth)")
    assert no_horizontal_scroll(page)
    assert page.locator(".scale-anchors").inner_text().split("\n") == [f"{low} = bad fit", f"{high} = very good fit"]


def test_a_phone_rates_each_option_on_one_row_too(live_server, new_page, researcher, make_user):
    campaign = rating(researcher, 0, 10, n_prompts=1, schema="option_rating", options=["red", "green"])
    make_user("olga")
    page = open_task(new_page, live_server, campaign, "olga", **PHONE)
    for row in range(2):
        choices = boxes(page, f".option-row >> nth={row} >> .choice span")
        assert len(choices) == 11 and len({round(box["y"]) for box in choices}) == 1
        assert all(box["x"] >= 0 and box["x"] + box["width"] <= 390 for box in choices)
    assert no_horizontal_scroll(page)
    page.tap(".option-row >> nth=0 >> text=7")
    page.tap(".option-row >> nth=1 >> text=10")
    with page.expect_navigation():
        page.tap("button.submit-button")
    assert Label.objects.get().value == [7, 10]


@pytest.mark.parametrize("schema", ["binary", "option_rating"])
def test_keyboard_hints_only_where_there_is_a_keyboard(live_server, new_page, researcher, make_user, schema):
    options = ["red", "green"] if schema == "option_rating" else []
    campaign = launched(
        researcher,
        [{"id": "q", "text": "Is it so?", "options": options}],
        schema=schema,
        k=2,
        binarization={} if schema == "binary" else {"1": 0, "4": 1},
    )
    make_user("touchy")
    make_user("clicky")
    phone = open_task(new_page, live_server, campaign, "touchy", **PHONE)
    desktop = open_task(new_page, live_server, campaign, "clicky", **DESKTOP)
    assert phone.locator(".keyboard-help").is_hidden() and desktop.locator(".keyboard-help").is_visible()
    assert phone.locator("form.label-form kbd").count() > 0  # in the page, but not shown
    assert phone.eval_on_selector_all("form.label-form kbd", "ks => ks.every(k => k.offsetParent === null)")
    assert desktop.eval_on_selector_all("form.label-form kbd", "ks => ks.every(k => k.offsetParent !== null)")


def test_skip_on_a_phone_gives_the_next_prompt_and_frees_the_slot(live_server, new_page, make_campaign, make_user):
    campaign = make_campaign(2, k=1)
    make_user("sam")
    page = open_task(new_page, live_server, campaign, "sam", **PHONE)
    assert page.inner_text(".task-count") == "0 labeled · about 2 left for you"
    first = page.inner_text(".prompt-text")
    skip = page.locator(".skip-form button").bounding_box()
    assert skip["height"] >= 44 and skip["x"] + skip["width"] <= 390
    with page.expect_navigation():
        page.tap("text=Skip this prompt")
    page.wait_for_selector("form.label-form")
    assert page.inner_text(".prompt-text") != first
    assert "you will not be shown it again" in page.inner_text(".messages")
    assert page.inner_text(".task-count") == "0 labeled · about 1 left for you"
    skipped = Lease.objects.get(status=Lease.Status.RELEASED)
    assert skipped.slot.lease_id is None


def test_closing_asks_first_and_works_without_javascript(live_server, new_page, make_campaign):
    campaign = make_campaign(2)
    page = new_page(java_script_enabled=False, **PHONE)
    sign_in(page, live_server.url, "researcher")
    page.goto(f"{live_server.url}/campaigns/{campaign.slug}/")
    page.click("text=Close…")
    page.wait_for_selector(".close-confirmation")
    assert "It cannot be undone." in page.inner_text(".close-confirmation")
    assert no_horizontal_scroll(page)
    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.LIVE
    page.click("text=Close the campaign for good")
    page.wait_for_selector(".status-closed")
    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.CLOSED
    assert page.locator("text=Workers' link").count() == 0


def test_keys_send_nothing_once_skip_was_sent(live_server, new_page, make_campaign, make_user):
    """A rating key pressed while "Skip" loads would label the prompt just given back."""
    campaign = make_campaign(2, k=1)
    make_user("kit")
    page = open_task(new_page, live_server, campaign, "kit", **DESKTOP)
    posts = []
    page.on("request", lambda request: posts.append(request.url) if request.method == "POST" else None)
    # Send "Skip" but hold the navigation, as a slow network would.
    page.evaluate("""() => {
        const skip = document.querySelector(".skip-form");
        skip.addEventListener("submit", (event) => event.preventDefault());
        skip.requestSubmit();
    }""")
    page.keyboard.press("t")
    page.wait_for_timeout(500)
    assert posts == [] and not Label.objects.exists()
