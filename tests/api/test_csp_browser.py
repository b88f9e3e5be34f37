"""In headless Chromium: our pages and the API docs load nothing from other sites and break no rule of
the content security policy (Chromium reports every blocked script, style or request on the console)."""

import pytest

from annotation import services
from tests.helpers import share_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def visit(page, url: str) -> tuple[list[str], list[str]]:
    """Load ``url``; return (URLs of requests to other origins, CSP violations reported)."""
    origin = url.split("/", 3)[:3]
    foreign, violations = [], []
    page.on(
        "request",
        lambda request: (
            foreign.append(request.url)
            if request.url.split("/", 3)[:3] != origin and not request.url.startswith("data:")
            else None
        ),
    )
    page.on(
        "console",
        lambda message: violations.append(message.text) if "Content Security Policy" in message.text else None,
    )
    page.goto(url)
    page.wait_for_load_state("networkidle")
    return foreign, violations


def test_the_api_docs_render_from_our_own_files(page, live_server):
    foreign, violations = visit(page, f"{live_server.url}/api/docs/")
    page.wait_for_selector(".opblock", timeout=15_000)
    assert page.locator(".opblock").count() >= 20  # one block per operation: the UI really rendered
    assert foreign == [] and violations == []


def test_pages_break_no_policy_rule(new_page, live_server, make_campaign, researcher, make_user, client):
    campaign = make_campaign(3)
    worker = make_user("browser-worker")
    lease = services.lease_acquire(campaign=campaign, worker=services.worker_for_user(user=worker))
    pages = {
        None: ["/", "/accounts/login/", "/accounts/signup/", f"/w/{campaign.slug}/"],
        researcher: ["/", f"/campaigns/{campaign.slug}/", "/campaigns/new/", f"/audits/{campaign.slug}/"],
        worker: [f"/w/{campaign.slug}/task/{lease.pk}/"],
    }
    for user, paths in pages.items():
        for path in paths:
            browser_page = new_page()
            if user is not None:
                client.force_login(user)
                share_session(browser_page.context, client, live_server.url)
            foreign, violations = visit(browser_page, f"{live_server.url}{path}")
            assert foreign == [] and violations == [], (path, foreign, violations)
