"""The dashboard in headless Chromium, at 1280x800 and on a 390x844 phone: its tables fit without
scrolling sideways with the flags in view, workers show their standing (blocked, excluded, flagged)
with counts and link to their worker page, and the page polls its feed only while it is seen.

The demo's campaign and crowd replayed through the real services (``demo``), both audits computed;
the task bodies run here (``enqueued`` stands in for the broker); the page is served by a live server.
"""

import os
import re

import pytest
from django.urls import reverse

from annotation.models import Worker
from annotation.services.quality import worker_act
from tests.helpers import PHONE, page_problems, share_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Every table container of the dashboard fits its card: nothing to scroll sideways inside it either.
OVERFLOWING = """() => [...document.querySelectorAll('#dashboard .table-scroll')]
  .filter(box => !box.closest('[hidden]') && box.scrollWidth > box.clientWidth + 1)
  .map(box => box.getAttribute('aria-label') + ': ' + box.scrollWidth + ' > ' + box.clientWidth)"""
# Pretend the tab is hidden (or seen again): what the browser does when the researcher switches tabs.
VISIBILITY = """hidden => {
  Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => hidden ? 'hidden' : 'visible'});
  Object.defineProperty(document, 'hidden', {configurable: true, get: () => hidden});
  document.dispatchEvent(new Event('visibilitychange'));
}"""


@pytest.fixture
def standing(demo, researcher):
    """The demo campaign with one worker blocked, one flagged by the researcher and one excluded."""
    campaign, personalities = demo
    names = sorted(personalities)
    workers = [Worker.objects.get(channel="sim", external_id=name.split(":", 1)[1]) for name in names[:3]]
    for kind, worker in zip(("block", "flag", "exclude"), workers):
        worker_act(kind=kind, campaign=campaign, worker=worker, by=researcher, reason=f"{kind} for the test")
    return campaign, dict(zip(("blocked", "flagged", "excluded"), workers))


def _open(new_page, live_server, client, researcher, campaign, **context):
    page = new_page(**context)
    client.force_login(researcher)
    share_session(page.context, client, live_server.url)
    problems = page_problems(page, http=True)
    page.goto(f"{live_server.url}{reverse('audit_dashboard', args=[campaign.slug])}")
    page.wait_for_selector("#workers-body tr[data-worker]")
    return page, problems


def _shot(page, name, tmp_path):
    folder = os.environ.get("CHORUS_DASHBOARD_SCREENSHOTS")
    page.screenshot(path=os.path.join(folder or str(tmp_path), f"{name}.png"), full_page=True)
    # No screenshot of one row: a poll may rebuild the rows between finding one and taking it (the whole page
    # and the cards below show them).
    for table in ("workers", "agreement"):
        card = page.locator("section.card", has=page.locator(f"#{table}-body"))
        card.screenshot(path=os.path.join(folder or str(tmp_path), f"{name}-{table}.png"))


def test_at_1280_the_tables_fit_with_the_flags_and_standing_in_view(
    new_page, live_server, client, researcher, standing, enqueued, tmp_path
):
    from playwright.sync_api import expect

    campaign, workers = standing
    page, problems = _open(new_page, live_server, client, researcher, campaign, viewport={"width": 1280, "height": 800})
    expect(page.locator("#download-json")).to_be_visible()  # the full audit is drawn too
    _shot(page, "dashboard-1280", tmp_path)
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    assert page.evaluate(OVERFLOWING) == []
    # every flag of every worker is on screen horizontally (within the window's width)
    flags = page.locator("#workers-body .flag")
    assert flags.count() > 0
    right = page.evaluate("document.documentElement.clientWidth")
    for box in flags.evaluate_all("nodes => nodes.map(n => n.getBoundingClientRect().toJSON())"):
        assert box["width"] > 0 and 0 <= box["left"] and box["right"] <= right, box
    # standing: a badge per worker who has one, the counts above the table
    for word, worker in workers.items():
        row = page.locator(f'#workers-body tr[data-worker-pk="{worker.pk}"]')
        expect(row.locator(f".badge-{word}")).to_have_text(word)
        link = row.locator("a.worker-link")
        expect(link).to_have_attribute("href", f"/campaigns/{campaign.slug}/workers/{worker.pk}/")
    expect(page.locator("#standing-counts")).to_have_text(
        "12 workers: 1 blocked, 1 excluded from the audit, 1 flagged."
    )
    flagged = page.locator(f'#workers-body tr[data-worker-pk="{workers["flagged"].pk}"] .badge-flagged')
    expect(flagged).to_have_attribute("title", "flag for the test")
    # what the page says is in words: no raw timestamp, no key_with_underscores, no "1 workers"
    said = page.evaluate("document.querySelector('#dashboard').innerText")
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:", said), re.search(r".{40}\d{4}-\d\d-\d\dT.{20}", said)
    assert not re.search(r"\b[a-z]+_[a-z_]+\b", said), re.findall(r".{30}\b[a-z]+_[a-z_]+\b.{10}", said)
    assert not re.search(r"\b1 (workers|labels|prompts)\b", said)
    # a flag's reason opens under its name
    outlier = page.locator("#workers-body details.flag").first
    assert outlier.locator(".flag-why").is_hidden()
    outlier.locator("summary").click()
    expect(outlier.locator(".flag-why")).to_be_visible()
    assert page.evaluate(OVERFLOWING) == []

    # the widest table: every optional column (controls, Dawid–Skene skill) and more flags, with the feed's
    # rows widened on their way to the page
    page.route(f"**{reverse('audit_dashboard_data', args=[campaign.slug])}*", _widest)
    page.reload()
    expect(page.locator("th.controls-only")).to_be_visible()
    expect(page.locator("th.skill-only")).to_be_visible()
    expect(page.locator("#workers-body .flag-control-accuracy").first).to_be_visible()
    _shot(page, "dashboard-1280-widest", tmp_path)
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    assert page.evaluate(OVERFLOWING) == []
    for box in flags.evaluate_all("nodes => nodes.map(n => n.getBoundingClientRect().toJSON())"):
        assert box["width"] > 0 and 0 <= box["left"] and box["right"] <= right, box
    assert not problems, problems


def _widest(route):
    """The feed with every worker answering controls, a Dawid–Skene skill and the quality flags."""
    response = route.fetch()
    body = response.json()
    rows = (body.get("changed") or body).get("workers") or []
    for row in rows:
        row.update(n_controls=24, n_correct=17, control_accuracy=0.708, control_ci=[0.508, 0.851], ds_skill=0.912)
        row.update(median_seconds=12.3, speed_ratio=0.21, bias=-0.123, bias_ci=[-0.234, -0.012], n_compared=140)
        row["flags"] = row["flags"] + [
            {
                "kind": "control_accuracy",
                "text": "control accuracy 0.71 [0.51, 0.85] after 24 controls (the other workers: 0.93)",
            },
            {"kind": "too_fast", "text": "too fast: median 1.2 s per label, 21 % of the campaign's median of 5.8 s"},
        ]
    route.fulfill(response=response, json=body)


def test_on_a_phone_the_workers_are_cards_and_nothing_scrolls_sideways(
    new_page, live_server, client, researcher, standing, enqueued, tmp_path
):
    from playwright.sync_api import expect

    campaign, workers = standing
    page, problems = _open(new_page, live_server, client, researcher, campaign, **PHONE)
    page.wait_for_function("() => document.querySelectorAll('#agreement-body tr[data-key]').length")
    _shot(page, "dashboard-390", tmp_path)
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    assert page.evaluate(OVERFLOWING) == []
    row = page.locator(f'#workers-body tr[data-worker-pk="{workers["blocked"].pk}"]')
    assert row.evaluate("tr => getComputedStyle(tr).display") == "block"  # a card, its cells stacked
    expect(row.locator(".badge-blocked")).to_be_visible()
    assert not problems, problems


def test_the_page_polls_only_while_it_is_seen(new_page, live_server, client, researcher, demo, enqueued):
    campaign, _ = demo
    page, problems = _open(new_page, live_server, client, researcher, campaign, viewport={"width": 1280, "height": 800})
    feed = reverse("audit_dashboard_data", args=[campaign.slug])
    polls = []
    page.on("request", lambda r: feed in r.url and polls.append(r.url))
    page.wait_for_timeout(4500)  # every 2 s while seen
    assert len(polls) >= 2, polls
    assert all("since=" in url for url in polls)  # the delta feed
    page.evaluate(VISIBILITY, True)
    page.wait_for_timeout(500)  # a poll already on its way may still land
    hidden_from = len(polls)
    page.wait_for_timeout(5000)
    assert len(polls) == hidden_from, polls[hidden_from:]
    page.evaluate(VISIBILITY, False)
    page.wait_for_timeout(1000)  # seen again: a poll at once, not after the next 2 s
    assert len(polls) == hidden_from + 1, polls[hidden_from:]
    page.wait_for_timeout(4500)
    assert len(polls) >= hidden_from + 3  # and polling again
    assert not problems, problems
