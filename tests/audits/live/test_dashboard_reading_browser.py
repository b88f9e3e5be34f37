"""The dashboard explains itself, in headless Chromium: empty chart areas say why, the demo's
spammers are flagged in words, the page and its guide fit a 390 px phone, and an unchanged feed is
answered 304 while the page keeps counting the numbers' age.

Set ``CHORUS_DASHBOARD_SCREENSHOTS`` to a folder to keep the screenshots (desktop, phone, guide).
"""

import os
import re
from pathlib import Path

import pytest

from audits import services as audit_services
from audits.engine.glossary import NUMBERS
from tests.audits.live.labeling import label_one_each
from tests.helpers import page_problems, share_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
NO_LABELS = "No labels yet — the charts appear after the first labels arrive."
CHARTS = [
    "chart-history",
    "chart-accuracy",
    "chart-scatter",
    "chart-min-noise",
    "chart-min-prompts",
    "chart-max-noise",
    "chart-max-prompts",
]


def signed_in_page(new_page, live_server, client, user, **options):
    client.force_login(user)
    page = new_page(**options)
    share_session(page.context, client, live_server.url)
    return page, page_problems(page)


def screenshots(tmp_path) -> Path:
    folder = Path(os.environ.get("CHORUS_DASHBOARD_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def page_width(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


def test_empty_chart_areas_say_why(new_page, live_server, client, researcher, make_campaign, enqueued):
    from playwright.sync_api import expect

    campaign = make_campaign(6, k=3)
    page, problems = signed_in_page(new_page, live_server, client, researcher)
    page.goto(f"{live_server.url}/audits/{campaign.slug}/")
    expect(page.locator("#freshness")).to_have_text("No labels yet.")
    for chart_id in CHARTS:
        expect(page.locator(f'.chart-empty[data-chart="{chart_id}"]')).to_have_text(NO_LABELS)
    assert page.evaluate("Object.keys(Chart.instances).length") == 0
    expect(page.locator("#workers-body")).to_have_text("No labels yet.")

    # labels and a live audit, no full audit yet: the history is drawn, the rest waits for the full audit
    label_one_each(campaign, [1, 0, 1, 1])
    audit_services.audit_refresh(campaign_id=campaign.pk)
    expect(page.locator("#audited-labels")).to_have_text("4", timeout=10_000)
    expect(page.locator('.chart-empty[data-chart="chart-history"]')).to_be_hidden()
    for chart_id in CHARTS[1:]:
        expect(page.locator(f'.chart-empty[data-chart="{chart_id}"]')).to_contain_text("Waiting for the full audit")
    assert page.evaluate("Object.values(Chart.instances).map(c => c.canvas.id)") == ["chart-history"]
    assert not problems, problems


def test_the_demo_dashboard_flags_its_spammers_and_fits_a_phone(
    new_page, live_server, client, researcher, demo, tmp_path
):
    from playwright.sync_api import expect

    campaign, personalities = demo
    shots = screenshots(tmp_path)
    url = f"{live_server.url}/audits/{campaign.slug}/"
    page, problems = signed_in_page(new_page, live_server, client, researcher, viewport=DESKTOP)
    page.goto(url)
    expect(page.locator("#audited-labels")).to_have_text("300", timeout=10_000)
    page.wait_for_function("() => Object.keys(Chart.instances).length >= 7", timeout=10_000)

    # every number carries its definition, direction, reference values and a link to the guide
    for m in NUMBERS:
        card = page.locator(f"#number-{m.key}")
        expect(card.locator(".number-definition")).to_have_text(m.definition)
        expect(card.locator(".number-direction")).to_have_text(m.direction)
        expect(card.locator(".number-typical")).to_contain_text(m.typical)
        assert card.locator("a.guide-link").get_attribute("href") == f"/audits/guide/#{m.anchor}"
        expect(card.locator(f'[data-number="{m.key}"]')).to_have_text(re.compile(r"^-?\d\.\d{4}$|^undefined$"))

    # the two same-answer workers, flagged in words; careful workers carry no flag
    spammers = sorted(w for w, p in personalities.items() if p.same_answer)
    straight = page.locator("#workers-body tr", has=page.locator(".flag-straight-lining"))
    expect(straight).to_have_count(2)
    assert sorted(straight.locator("td:first-child").all_text_contents()) == spammers
    for text in straight.locator(".flag-straight-lining").all_text_contents():
        assert re.fullmatch(
            r"straight-lining: answers 1 \(Plausible\) to 100 % of 20 prompts \(the other workers: \d+ %\)", text
        ), text
    careful = [w for w, p in personalities.items() if p.name in ("careful", "steady")]
    for worker in careful:
        row = page.locator("#workers-body tr", has=page.locator("td:first-child", has_text=worker))
        expect(row.locator("td.flags")).to_have_text("")
    expect(page.locator("th.gold-only")).to_be_visible()  # the demo's prompts have gold
    expect(page.locator("#min-scored")).to_have_text("15")
    # yes/no labels: α (nominal), AC1, and Cohen's (mean over pairs) and Fleiss' κ
    expect(page.locator("#agreement-body tr")).to_have_count(4)
    expect(page.locator('#agreement-body tr[data-key="alpha_nominal"] td').nth(3)).to_have_text(
        "60 prompts, 300 labels"
    )
    page.screenshot(path=str(shots / "dashboard-desktop.png"), full_page=True)

    # a 390 px phone: the page never scrolls sideways; the workers table stacks each worker into a small
    # card, the agreement table scrolls inside its box if it must
    phone, phone_problems = signed_in_page(
        new_page, live_server, client, researcher, viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True
    )
    phone.goto(url)
    expect(phone.locator("#audited-labels")).to_have_text("300", timeout=10_000)
    phone.wait_for_function("() => Object.keys(Chart.instances).length >= 7", timeout=10_000)
    assert page_width(phone) <= PHONE["width"], page_width(phone)
    for table in ("workers", "agreement"):
        box = phone.locator(f'.table-scroll[aria-label="{table.capitalize()}"]')
        size = box.evaluate("b => [b.clientWidth, b.scrollWidth, b.getBoundingClientRect().right]")
        assert size[2] <= PHONE["width"], (table, size)
    workers = phone.locator('.table-scroll[aria-label="Workers"]').evaluate("b => [b.clientWidth, b.scrollWidth]")
    assert workers[1] <= workers[0], workers  # stacked: nothing to scroll to, the flags are in view
    spam = phone.locator("#workers-body tr", has=phone.locator(".flag-straight-lining")).first
    assert spam.locator("td.flags").evaluate("td => td.getBoundingClientRect().right") <= PHONE["width"]
    assert spam.locator("td").nth(1).evaluate("td => getComputedStyle(td, '::before').content") == '"labels"'
    phone.screenshot(path=str(shots / "dashboard-phone.png"), full_page=True)

    # the guide, linked from the dashboard, fits the phone too
    phone.locator("#number-pattern_noise_mod a.guide-link").click()
    phone.wait_for_url(f"{live_server.url}/audits/guide/#pattern-noise")
    expect(phone.locator("h1")).to_have_text("How to read the noise audit")
    expect(phone.locator("#pattern-noise .formula").first).to_contain_text("PNorig = SD over prompts")
    assert page_width(phone) <= PHONE["width"], page_width(phone)
    phone.screenshot(path=str(shots / "guide-phone.png"), full_page=True)
    page.goto(f"{live_server.url}/audits/guide/")
    page.screenshot(path=str(shots / "guide-desktop.png"), full_page=True)
    assert not problems and not phone_problems, problems + phone_problems


def test_an_unchanged_feed_is_answered_304_and_the_page_keeps_counting(
    new_page, live_server, client, researcher, make_campaign, enqueued
):
    from playwright.sync_api import expect

    campaign = make_campaign(6, k=3)
    label_one_each(campaign, [1, 0, 1])
    audit_services.audit_refresh(campaign_id=campaign.pk)
    page, problems = signed_in_page(new_page, live_server, client, researcher)
    feed = []
    page.on("response", lambda r: "/data.json" in r.url and feed.append((r.status, r.headers.get("etag"))))
    page.goto(f"{live_server.url}/audits/{campaign.slug}/")
    expect(page.locator("#audited-labels")).to_have_text("3", timeout=10_000)
    page.wait_for_function("() => Number(document.getElementById('dashboard').dataset.unchanged) >= 2", timeout=15_000)
    first = page.locator("#freshness").text_content()
    page.wait_for_timeout(2500)
    later = page.locator("#freshness").text_content()
    assert first != later and later.startswith("Numbers from "), (first, later)  # the age moves on without new data
    assert feed[0][0] == 200 and {status for status, _ in feed[1:]} == {304}, feed
    assert len({tag for _, tag in feed}) == 1
    # a new label and its snapshot: a 200 again, drawn in place
    label_one_each(campaign, [0])
    audit_services.audit_refresh(campaign_id=campaign.pk)
    expect(page.locator("#audited-labels")).to_have_text("4", timeout=10_000)
    assert feed[-1][0] == 200 and feed[-1][1] != feed[0][1]
    assert not problems, problems
