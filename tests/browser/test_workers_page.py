"""The workers page beside the audit in a real browser (headless Chromium), at 1280×800 and on a phone
(390×844): a spammer who answers 1 to every prompt is found by filtering on the audit's straight-lining
flag, ticked with another worker and both blocked in one action; the worker's own page lists their
labels. The table fits a laptop's width with the flags in view; on the phone each worker is a card and
nothing scrolls sideways. Screenshots go to ``tmp_path``."""

import pytest

from annotation import services
from annotation.models import Activity, Participation
from audits import services as audit_services
from tests.helpers import PHONE, label_all, no_horizontal_scroll, page_problems, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
DESKTOP = {"viewport": {"width": 1280, "height": 800}}


def fits(page, width: int) -> bool:
    """Nothing wider than the screen: ``no_horizontal_scroll``, and the page no wider than ``width`` (a phone's
    browser widens its window to a page too wide, which that check alone would miss)."""
    return no_horizontal_scroll(page) and page.evaluate("document.documentElement.scrollWidth") <= width


@pytest.mark.parametrize("screen", ["desktop", "phone"])
def test_a_spammer_is_found_by_their_flag_and_blocked_in_bulk(
    live_server, new_page, make_campaign, researcher, tmp_path, screen
):
    campaign = make_campaign(24, k=3)
    careful = [services.worker_get_or_create(channel="sim", external_id=f"careful-{n}") for n in "ab"]
    for worker in careful:
        while not isinstance(lease := services.lease_acquire(campaign=campaign, worker=worker), services.NothingLeft):
            services.label_submit(
                lease_id=lease.pk, worker=worker, value=lease.prompt.gold, client_token=f"t{lease.pk}"
            )
    spammer = services.worker_get_or_create(channel="prolific", external_id="5f3a9c0e12ab34cd56ef7890")
    label_all(campaign, spammer, value=1)
    audit_services.audit_refresh(campaign_id=campaign.pk)

    options = DESKTOP if screen == "desktop" else PHONE
    width = options["viewport"]["width"]
    page = new_page(**options)
    problems = page_problems(page, http=True)
    sign_in(page, live_server.url, "researcher")
    page.goto(f"{live_server.url}/campaigns/{campaign.slug}/workers/")
    spam_row = page.locator(f"tbody.worker-row[data-worker='{spammer.public_id}']")
    assert "straight-lining" in spam_row.locator(".worker-flags").inner_text()
    # Its straight-lining flag (this test's labels come within milliseconds, so a "too fast" may stand beside it)
    assert spam_row.locator(".worker-flags .flag-straight_lining").is_visible()
    assert fits(page, width)
    if screen == "desktop":  # the whole table in its card: no column cut off, the flags in view
        assert page.evaluate(
            "(() => { const t = document.querySelector('.workers-table');"
            " return t.scrollWidth <= t.parentElement.clientWidth; })()"
        )
        flags = spam_row.locator(".col-flags").bounding_box()
        assert flags["x"] + flags["width"] <= 1280
    page.screenshot(path=tmp_path / f"workers-{screen}.png", full_page=True)

    page.select_option("select[name=flag]", "straight_lining")
    page.click(".worker-filters button:has-text('Show')")
    page.wait_for_url("**flag=straight_lining**")
    rows = page.locator("tbody.worker-row")
    assert rows.count() == 1 and rows.first.get_attribute("data-worker") == spammer.public_id
    page.check(f"input[name=workers][value='{spammer.public_id}']")
    # Another worker, from the unfiltered list: the filter is lifted, the box ticked there.
    page.click("text=Every worker")
    page.wait_for_selector(f"tbody.worker-row[data-worker='{careful[0].public_id}']")
    page.check(f"input[name=workers][value='{careful[0].public_id}']")
    page.check(f"input[name=workers][value='{spammer.public_id}']")
    page.select_option("#bulk-act select[name=action]", "block")
    page.fill("#bulk-act input[name=reason]", "Same answer to every prompt.")
    page.click("#bulk-act button:has-text('Act on the ticked workers')")
    page.wait_for_selector(".message-success")
    assert spammer.public_id in page.inner_text(".message-success")
    blocked = Participation.objects.filter(campaign=campaign, blocked_at__isnull=False)
    assert set(blocked.values_list("worker_id", flat=True)) == {spammer.pk, careful[0].pk}
    assert Activity.objects.filter(campaign=campaign, verb="worker.block").count() == 2
    assert page.locator(f"tbody.worker-row[data-worker='{spammer.public_id}'] .worker-state.blocked").is_visible()

    page.select_option("select[name=status]", "blocked")
    page.click(".worker-filters button:has-text('Show')")
    page.wait_for_url("**status=blocked**")
    assert page.locator("tbody.worker-row").count() == 2
    assert fits(page, width)
    page.screenshot(path=tmp_path / f"workers-blocked-{screen}.png", full_page=True)

    page.click(f"tbody.worker-row[data-worker='{spammer.public_id}'] a.worker-id")
    page.wait_for_url(f"**/campaigns/{campaign.slug}/workers/{spammer.pk}/")
    assert page.locator("tr.worker-label").count() == 24
    labels = page.inner_text(".worker-labels-table")
    assert "right" in labels and "wrong" in labels and "Statement number" in labels
    assert "straight-lining" in page.inner_text("#numbers")
    assert "Blocked" in page.inner_text("#history") and "Same answer to every prompt." in page.inner_text("#history")
    assert fits(page, width)
    page.screenshot(path=tmp_path / f"worker-{screen}.png", full_page=True)
    assert problems == []
