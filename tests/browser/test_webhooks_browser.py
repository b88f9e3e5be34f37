"""The webhooks page in headless Chromium: a researcher registers an endpoint (a local receiver), reads
its secret once, sends a test event that arrives signed, sees it in the delivery log, and disables the
endpoint; the page fits a phone."""

import pytest
from django.test import override_settings

from annotation.webhooks.models import Endpoint
from tests.helpers import PHONE, page_problems, sign_in
from tests.webhooks.test_webhooks import Receiver, verified

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_register_test_and_disable_an_endpoint(live_server, new_page, make_campaign, researcher, eager_celery):
    make_campaign(3, k=1)
    receiver = Receiver()
    try:
        with override_settings(CHORUS_WEBHOOKS_ALLOW_PRIVATE=True):
            page = new_page(viewport={"width": 1280, "height": 800})
            problems = page_problems(page)
            sign_in(page, live_server.url, "researcher")
            page.click("nav a:has-text('Webhooks')")
            page.fill("#id_url", receiver.url)
            page.check("input[value='prompt.completed']")
            page.check("input[value='campaign.completed']")
            page.click("button:has-text('Register the endpoint')")
            message = page.inner_text(".message")  # the secret, shown once
            endpoint = Endpoint.objects.get()
            assert endpoint.secret in message and endpoint.events == ["campaign.completed", "prompt.completed"]
            page.reload()
            assert endpoint.secret not in page.content()

            page.click("button:has-text('Send a test event')")
            page.wait_for_selector("table.webhook-deliveries tr.delivery-delivered")
            assert "ping" in page.inner_text("table.webhook-deliveries")
            ((headers, body),) = receiver.received
            assert verified(endpoint.secret, headers, body)

            page.click("button:has-text('Disable')")
            page.wait_for_selector(".webhook-endpoint .status-failed")
            endpoint.refresh_from_db()
            assert not endpoint.enabled

            phone = new_page(**PHONE)
            sign_in(phone, live_server.url, "researcher")
            phone.goto(f"{live_server.url}/webhooks/")
            assert phone.evaluate("document.documentElement.scrollWidth") <= 390
            assert problems == []
    finally:
        receiver.server.shutdown()
