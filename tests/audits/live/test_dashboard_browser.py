"""The dashboard in headless Chromium: new numbers appear while simulated workers label, no reload.

Real everything: the page is served by a live server, the labels come from a separate web-side
process (production settings, Redis), the snapshots from a real Celery worker.
"""
import os

import pytest
from django.conf import settings

from audits.models import AuditSnapshot
from tests.audits.live.live import NO_SWEEP, CeleryWorker, Submitter, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.services, pytest.mark.django_db(transaction=True)]

def test_the_dashboard_shows_new_numbers_without_a_reload(
    chromium, live_server, client, researcher, make_campaign, services_redis, workdir, tmp_path
):
    from playwright.sync_api import expect

    worker = CeleryWorker(services_redis, workdir, **NO_SWEEP)
    worker.start()
    submitter = Submitter(services_redis)
    try:
        campaign = make_campaign(40, k=3)
        client.force_login(researcher)
        context = chromium.new_context()
        host = live_server.url.split("//", 1)[1].split(":")[0]
        context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                              "domain": host, "path": "/"}])
        page = context.new_page()
        problems = []
        page.on("console", lambda m: m.type == "error" and "Failed to load resource" not in m.text and problems.append(m.text))
        page.on("response", lambda r: r.status >= 400 and not r.url.endswith("/favicon.ico")
                and problems.append(f"{r.status} {r.url}"))
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.goto(f"{live_server.url}/audits/{campaign.slug}/")
        expect(page.locator("#freshness")).to_have_text("No labels yet.", timeout=10_000)
        page.evaluate("window.__sameDocument = 42")

        submitter.ask(cmd="submit", campaign=campaign.pk, n=30, workers=8)
        expect(page.locator("#audited-labels")).to_have_text("30", timeout=20_000)
        snapshot = AuditSnapshot.objects.get(campaign=campaign, kind="cheap", watermark=30)
        ln = snapshot.data["level_noise"]
        expected = "undefined" if ln is None else f"{ln:.4f}"
        expect(page.locator('[data-number="level_noise"]')).to_have_text(expected)
        expect(page.locator("#progress-text")).to_contain_text("30 of 120 labels")
        expect(page.locator("#workers-body tr")).to_have_count(8)

        # More labels: the numbers move again, still in the same document.
        submitter.ask(cmd="submit", campaign=campaign.pk, n=20, workers=8)
        expect(page.locator("#audited-labels")).to_have_text("50", timeout=20_000)
        # The full audit lands too: its downloads appear and the accuracy chart is drawn.
        wait_for(lambda: AuditSnapshot.objects.filter(campaign=campaign, kind="full").exists(), timeout=30, what="a full audit")
        expect(page.locator("#download-json")).to_be_visible(timeout=10_000)
        assert page.evaluate("window.__sameDocument") == 42, "the page reloaded"
        assert page.evaluate("typeof Chart") == "function"
        assert page.evaluate("Object.keys(Chart.instances).length") >= 2
        page.screenshot(path=os.environ.get("CHORUS_DASHBOARD_SCREENSHOT", str(tmp_path / "dashboard.png")), full_page=True)
        assert not problems, problems  # no CSP violation, no script error
    finally:
        submitter.stop()
        worker.stop()
