"""Rating scales on the worker's page (issue 22), at 1280x800 and 390x844: an 11-point scale's buttons
take digit keys and "t" for 10 and are 44 px touch targets on a phone; a half-point scale is a slider
with a number input, refused while untouched (no value is sent) and accepted once moved or typed."""

import json

import pytest

from annotation import services
from annotation.models import Label
from tests.helpers import PHONE, no_horizontal_scroll, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DESKTOP = {"viewport": {"width": 1280, "height": 800}}


def launched(researcher, n_prompts=2, **fields):
    fields.setdefault("k", 1)
    campaign = services.campaign_create(owner=researcher, title="Similarity", schema="rating", **fields)
    rows = [{"id": f"q{i}", "text": f"How similar are the words of pair {i}?"} for i in range(n_prompts)]
    data = "".join(json.dumps(row) + "\n" for row in rows).encode()
    services.prompts_import(campaign=campaign, data=data, filename="q.jsonl")
    return services.campaign_transition(campaign=campaign, action="launch")


def open_task(new_page, live_server, campaign, username, **context):
    page = new_page(**context)
    errors = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    sign_in(page, live_server.url, username)
    page.goto(f"{live_server.url}/w/{campaign.slug}/next/")
    page.wait_for_selector("form.label-form")
    return page, errors


def test_an_eleven_point_scale_takes_digit_keys_and_t_for_ten(live_server, new_page, researcher, make_user):
    campaign = launched(researcher, scale_min=0, scale_max=10, scale_anchors=["unrelated", "synonyms"])
    make_user("kim")
    page, errors = open_task(new_page, live_server, campaign, "kim", **DESKTOP)
    assert "(t for 10)" in page.inner_text(".keyboard-help")
    assert [page.locator("button.choice-button kbd").nth(i).inner_text() for i in range(11)] == [*"0123456789", "t"]
    buttons = [page.locator("button.choice-button").nth(i).bounding_box() for i in range(11)]
    assert len({round(b["y"]) for b in buttons}) == 1  # one row on a desktop
    with page.expect_navigation():
        page.keyboard.press("7")
    page.wait_for_selector("form.label-form")
    with page.expect_navigation():
        page.keyboard.press("t")
    assert sorted(Label.objects.values_list("value", flat=True)) == [7, 10]
    assert no_horizontal_scroll(page) and errors == []


def test_a_phone_gives_an_eleven_point_scale_44_px_targets_in_two_rows(live_server, new_page, researcher, make_user):
    campaign = launched(researcher, scale_min=0, scale_max=10, scale_anchors=["unrelated", "synonyms"])
    make_user("pia")
    page, errors = open_task(new_page, live_server, campaign, "pia", **PHONE)
    buttons = [page.locator("button.choice-button").nth(i).bounding_box() for i in range(11)]
    assert all(b["width"] >= 44 and b["height"] >= 44 for b in buttons), buttons
    assert all(b["x"] >= 0 and b["x"] + b["width"] <= 390 for b in buttons)
    assert len({round(b["y"]) for b in buttons}) == 2  # rows of six
    assert no_horizontal_scroll(page) and errors == []
    with page.expect_navigation():
        page.tap("button.choice-button >> text=10")
    assert Label.objects.get().value == 10


@pytest.mark.parametrize("context", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_an_untouched_slider_is_refused_then_moved_or_typed_it_is_taken(
    live_server, new_page, researcher, make_user, context
):
    campaign = launched(researcher, scale_min=0, scale_max=10, scale_step=0.5, scale_anchors=["unrelated", "same"])
    make_user("sol")
    page, errors = open_task(new_page, live_server, campaign, "sol", **context)
    posts = []
    page.on("request", lambda request: posts.append(request.url) if request.method == "POST" else None)
    assert page.locator("input.rating-number").input_value() == ""
    page.click("button.submit-button")
    refusal = page.locator(".slider-refusal")
    refusal.wait_for(state="visible")
    assert "Move the slider or type a number" in refusal.inner_text()
    assert not [url for url in posts if "/task/" in url and not url.endswith("/heartbeat/")]
    assert not Label.objects.exists()
    for selector in ("input.rating-slider", "input.rating-number", "button.submit-button"):
        box = page.locator(selector).bounding_box()
        assert box["height"] >= 44 and box["x"] + box["width"] <= context["viewport"]["width"], selector
    assert no_horizontal_scroll(page)

    # The keyboard: an arrow moves the slider (its first press takes the value it shows, 5), a
    # second moves it one step; typing a number sets it.
    page.focus("input.rating-slider")
    page.keyboard.press("ArrowRight")
    assert page.locator("input.rating-number").input_value() in ("5", "5.5")
    page.fill("input.rating-number", "7.5")
    assert page.locator("input.rating-slider").input_value() == "7.5"
    assert refusal.is_hidden()
    with page.expect_navigation():
        page.click("button.submit-button")
    assert Label.objects.get().value == 7.5
    assert errors == []


def test_a_digit_typed_on_a_slider_page_goes_into_the_number(live_server, new_page, researcher, make_user):
    campaign = launched(researcher, scale_min=0, scale_max=100, scale_step=None)
    make_user("dee")
    page, errors = open_task(new_page, live_server, campaign, "dee", **DESKTOP)
    page.locator(".prompt-text").click()  # focus away from the slider
    page.keyboard.type("42.5")
    assert page.locator("input.rating-number").input_value() == "42.5"
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert Label.objects.get().value == 42.5 and errors == []


@pytest.mark.parametrize("context", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_dashboard_labels_both_views_of_a_mapped_scale(live_server, new_page, researcher, make_user, context):
    from audits import services as audit_services

    campaign = launched(
        researcher, n_prompts=4, k=3, scale_min=1, scale_max=4, binarization={"1": 0, "2": 0, "3": 1, "4": 1}
    )
    for i in range(3):
        worker = services.worker_get_or_create(channel="sim", external_id=f"w{i}")
        for j in range(4):
            lease = services.lease_acquire(campaign=campaign, worker=worker)
            services.label_submit(lease_id=lease.pk, worker=worker, value=1 + (i + j) % 4, client_token=f"{i}{j}")
    audit_services.audit_refresh(campaign_id=campaign.pk)
    unit = audit_services.audit_full(campaign_id=campaign.pk).data["unit_scale"]
    page = new_page(**context)
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    sign_in(page, live_server.url, "researcher")
    page.goto(f"{live_server.url}/audits/{campaign.slug}/")
    assert page.inner_text("#audit-scale") == "0/1, binarized by the map"
    view = page.locator("#unit-scale-view")
    view.wait_for(state="visible")
    ln = unit["level_noise"]
    assert "On the unit scale ((value − 1) / (4 − 1))" in view.inner_text()
    assert (f"{ln:.4f}" if ln is not None else "undefined") in view.inner_text()
    assert no_horizontal_scroll(page) and errors == []
