"""Acting on workers in a real browser (headless Chromium, a phone's screen): from the campaign page to its
workers page, a researcher excludes a worker (a missing reason is refused, naming it), re-collects
another's labels after a page that asks first, and undoes a quality rule's block; the log shows who, when,
why and the numbers; the blocked worker is told so on their own page. Screenshots go to ``tmp_path``."""

import pytest

from annotation import services
from annotation.models import Label, Participation, WorkerAction
from annotation.services.quality import worker_act
from annotation.services.rules import rule_create
from tests.helpers import PHONE, label_one, no_horizontal_scroll, page_problems, share_session, sign_in, signed_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _row_opened(page, public_id: str):
    """The worker's rows in the workers table, their fold (the numbers in full and the form) opened."""
    row = page.locator(f"tbody.worker-row[data-worker='{public_id}']")
    row.locator("summary").click()
    return row


def test_a_researcher_excludes_recollects_and_undoes_from_the_workers_page(
    live_server, new_page, make_campaign, make_user, researcher, tmp_path
):
    campaign = make_campaign(6, k=3)
    careless = services.worker_get_or_create(channel="sim", external_id="careless")
    spammer_user = make_user("spammer")
    spammer = services.worker_for_user(user=spammer_user)
    for _ in range(2):
        label_one(campaign, careless)
        label_one(campaign, spammer)
    rule = rule_create(
        campaign=campaign, by=researcher, metric="straight_lining", threshold=0.9, min_labels=2, action="block"
    )
    automatic = worker_act(
        kind="block",
        campaign=campaign,
        worker=careless,
        rule=rule,
        reason="answers 1 to 100 % of 2 labels",
        numbers={"top_share": 1.0, "rule_count": 2},
    )

    page = new_page(**PHONE)
    problems = page_problems(page)  # the refused action's page answers 400, on purpose
    sign_in(page, live_server.url, "researcher")
    page.goto(f"{live_server.url}/campaigns/{campaign.slug}/")
    assert "1 action logged" in page.inner_text("#worker-actions")
    page.click("#worker-actions >> text=Workers and action log")
    page.wait_for_url(f"{live_server.url}/campaigns/{campaign.slug}/workers/")
    entry = page.locator(f"li.worker-action[data-action='{automatic.pk}']")
    text = " ".join(entry.inner_text().split())
    assert "Blocked: sim:careless" in text and f"by the rule “{rule}”" in text
    assert "Why: answers 1 to 100 % of 2 labels" in text and "top share: 1 · rule count: 2" in text
    assert no_horizontal_scroll(page)
    page.screenshot(path=tmp_path / "workers.png", full_page=True)

    row = _row_opened(page, spammer.public_id)
    row.locator("select[name=action]").select_option("exclude")
    # The browser would not send an empty reason (the field is required); a script can, and is refused.
    row.locator("input[name=reason]").evaluate("input => input.removeAttribute('required')")
    row.get_by_role("button", name=f"Act on {spammer.public_id}").click()
    page.wait_for_selector(".worker-action-errors")
    assert "reason: This field is required." in page.inner_text(".worker-action-errors")
    assert not Participation.objects.filter(worker=spammer, excluded_at__isnull=False).exists()

    row = _row_opened(page, spammer.public_id)
    row.locator("select[name=action]").select_option("exclude")
    row.locator("input[name=reason]").fill("Answers before reading.")
    row.get_by_role("button", name=f"Act on {spammer.public_id}").click()
    page.wait_for_selector(f"tbody.worker-row[data-worker='{spammer.public_id}'] .worker-state.excluded")
    newest = " ".join(page.locator("li.worker-action").first.inner_text().split())
    assert newest.startswith(f"Excluded from the audit: {spammer.public_id}") and "by researcher" in newest
    assert "Why: Answers before reading." in newest

    row = _row_opened(page, spammer.public_id)
    row.locator("select[name=action]").select_option("recollect")
    row.locator("input[name=reason]").fill("Spam after all.")
    row.get_by_role("button", name=f"Act on {spammer.public_id}").click()
    page.wait_for_selector(".recollect-confirmation")
    assert "The voids cannot be undone." in page.inner_text(".recollect-confirmation")
    page.screenshot(path=tmp_path / "recollect-confirm.png", full_page=True)
    page.click("text=Void their labels and re-collect")
    page.wait_for_selector("li.worker-action[data-kind='recollect']")
    assert "labels voided: 2" in page.inner_text("li.worker-action[data-kind='recollect']")
    assert not Label.objects.counted().filter(worker=spammer).exists()

    page.locator(f"li.worker-action[data-action='{automatic.pk}'] button", has_text="Undo").click()
    page.wait_for_selector(f"li.worker-action[data-action='{automatic.pk}'] .action-undone")
    assert "by researcher" in page.inner_text(f"li.worker-action[data-action='{automatic.pk}'] .action-undone")
    assert WorkerAction.objects.filter(kind="unblock", numbers__undoes=automatic.pk).exists()
    assert no_horizontal_scroll(page)
    page.screenshot(path=tmp_path / "log.png", full_page=True)
    assert problems == []

    worker_page = new_page(**PHONE)
    share_session(worker_page.context, signed_in(spammer_user), live_server.url)
    worker_page.goto(f"{live_server.url}/w/{campaign.slug}/next/")
    assert "stopped giving you prompts" in worker_page.inner_text(".nothing-left")
    worker_page.screenshot(path=tmp_path / "blocked-worker.png", full_page=True)
