"""Issue 14: a worker answers free-text questions in a real browser: the question is shown, the text box
has the focus, Enter submits, an empty answer is refused with its message, and the box stops at the
campaign's longest answer."""

import json

import pytest

from annotation import services
from annotation.models import Campaign, Label, Lease
from tests.helpers import PHONE, no_horizontal_scroll, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

QUESTIONS = [
    "Name something people do before they leave for work.",
    "Name a fruit that is yellow.",
    "Name something you take to the beach.",
]


def free_text(researcher, **fields) -> Campaign:
    campaign = services.campaign_create(
        owner=researcher, title="Before work", schema=Campaign.Schema.FREE_TEXT, k=1, **fields
    )
    data = "".join(json.dumps({"id": f"q{i}", "text": text}) + "\n" for i, text in enumerate(QUESTIONS)).encode()
    services.prompts_import(campaign=campaign, data=data, filename="q.jsonl")
    return services.campaign_transition(campaign=campaign, action="launch")


def question_on(page) -> str:
    return page.locator(".prompt-text").inner_text().strip()


def test_a_worker_types_answers_and_enter_submits(live_server, new_page, researcher, make_user):
    campaign = free_text(researcher, answer_max_length=20)
    make_user("pat")
    page = new_page(viewport={"width": 1280, "height": 800})
    sign_in(page, live_server.url, "pat")
    page.goto(f"{live_server.url}/w/{campaign.slug}/next/")
    page.wait_for_selector("form.label-form input#answer")
    first = question_on(page)
    assert first in QUESTIONS
    assert page.evaluate("document.activeElement.id") == "answer"  # type at once, no click
    assert page.get_attribute("#answer", "maxlength") == "20"

    # Nothing typed: the browser keeps the form (the box is required); nothing reaches the server.
    page.keyboard.press("Enter")
    assert page.evaluate("document.querySelector('#answer').validity.valueMissing") is True
    # Only spaces: the server refuses it with its message, on the same question, and writes nothing.
    page.keyboard.type("   ")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.locator(".message-error").inner_text() == "The answer is empty: type an answer."
    assert question_on(page) == first
    assert Label.objects.count() == 0
    assert Lease.objects.get().status == Lease.Status.ACTIVE

    # Typing stops at the limit; Enter submits; the next question comes with the box focused again.
    page.fill("#answer", "")
    page.keyboard.type("  Drink   coffee and a very long tail")
    assert page.input_value("#answer") == "  Drink   coffee and"  # 20 characters
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.wait_for_selector("form.label-form input#answer")
    second = question_on(page)
    assert second in QUESTIONS and second != first
    assert page.evaluate("document.activeElement.id") == "answer"
    page.keyboard.type("Banana")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.wait_for_selector("form.label-form input#answer")
    stored = dict(Label.objects.values_list("prompt__text", "value"))
    assert stored == {first: "Drink coffee and", second: "Banana"}  # trimmed, spaces collapsed


def test_the_text_box_fits_a_phone(live_server, new_page, researcher, make_user):
    campaign = free_text(researcher)
    make_user("sam")
    page = new_page(**PHONE)
    sign_in(page, live_server.url, "sam")
    page.goto(f"{live_server.url}/w/{campaign.slug}/next/")
    page.wait_for_selector("form.label-form input#answer")
    assert no_horizontal_scroll(page)
    box = page.locator("#answer").bounding_box()
    assert box["width"] >= 200 and box["x"] + box["width"] <= 390
