"""The instrument card in headless Chromium: press "Compute intervals", watch the run wait, then see
its intervals appear in the same document (polled by static/js/card.js, no reload), with no console
error and nothing blocked by the CSP.

The task runs in this process: the enqueue (the edge of the process) starts a thread that waits a
moment, so the page sees the run waiting first, then computes with the real service.
"""

import threading
from unittest import mock

import numpy as np
import pytest
from django.db import connection
from django.template.defaultfilters import floatformat

from audits.models import BootstrapRun
from audits.services import bootstrap_compute
from audits.tasks import bootstrap_task
from tests.audits.live.card_campaigns import rating_campaign
from tests.helpers import PHONE, page_problems, share_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def ratings(seed: int = 3, n_prompts: int = 60, raters: int = 5) -> dict[str, list[int]]:
    """0–10 ratings from a crossed model: prompt effect, rater effect, noise."""
    rng = np.random.default_rng(seed)
    prompt, rater = rng.normal(5, 2.5, n_prompts), rng.normal(0, 0.7, raters)
    values = np.clip(np.rint(prompt[:, None] + rater[None, :] + rng.normal(0, 1.2, (n_prompts, raters))), 0, 10)
    return {f"q{i}": [int(v) for v in row] for i, row in enumerate(values)}


@pytest.fixture
def worker_in_a_thread():
    """``bootstrap_task.apply_async`` starts the service in a thread after 1.5 s, as a worker would."""
    threads = []

    def run(run_id):
        threading.Event().wait(1.5)
        try:
            bootstrap_compute(run_id=run_id)
        finally:
            connection.close()

    def apply_async(args=(), **options):
        thread = threading.Thread(target=run, args=(args[0],))
        thread.start()
        threads.append(thread)

    with mock.patch.object(bootstrap_task, "apply_async", apply_async):
        yield threads
    for thread in threads:
        thread.join(timeout=30)


def test_pressing_the_bootstrap_button_fills_in_the_intervals(
    chromium, live_server, client, researcher, worker_in_a_thread
):
    from playwright.sync_api import expect

    campaign = rating_campaign(researcher, ratings(), title="Card in a browser")
    client.force_login(researcher)
    context = chromium.new_context(**PHONE)
    share_session(context, client, live_server.url)
    page = context.new_page()
    problems = page_problems(page, http=True)
    page.goto(f"{live_server.url}/audits/{campaign.slug}/card/")
    expect(page.locator('[data-interval="alpha"]')).to_have_text("—")
    assert page.locator("#instrument-card svg[role=img]").count() == 1
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")  # fits a phone

    page.click("#bootstrap-button")
    page.wait_for_url("**/card/#bootstrap")
    page.evaluate("window.__sameDocument = 42")  # gone if the page reloaded
    expect(page.locator("#bootstrap-status")).to_have_text("Waiting for a worker…")
    expect(page.locator("#bootstrap-status")).to_contain_text("Done: 1000 resamples", timeout=30_000)

    run = BootstrapRun.objects.get(campaign=campaign)
    assert run.status == "done" and run.done_resamples == 1000
    alpha = page.locator('[data-interval="alpha"]').inner_text()
    lo, hi = run.data["alpha"]["interval"]
    assert alpha == f"{floatformat(lo, 3)} – {floatformat(hi, 3)}"
    level_lo, level_hi = run.data["noise"]["level_noise"]
    expect(page.locator('[data-interval="level_noise"]')).to_have_text(
        f"{floatformat(level_lo, 4)} – {floatformat(level_hi, 4)}"
    )
    assert "1,000 resamples (seed 0)" in page.locator("#bootstrap-about").inner_text()
    assert page.evaluate("window.__sameDocument") == 42
    assert page.locator("#bootstrap-progress").is_hidden()

    # A reload prints the same strings the poll filled in.
    page.reload()
    expect(page.locator('[data-interval="alpha"]')).to_have_text(alpha)
    assert problems == []
    context.close()
