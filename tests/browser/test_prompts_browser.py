"""The prompts page and a prompt's page in a real browser (headless Chromium), on a laptop's screen and a
phone's: from the campaign page to the list, search and filter, retire a ticked prompt and see it marked,
open a prompt's page with its labels, bring a prompt back from its page. No console error, and the page
never scrolls sideways. Screenshots go to ``tmp_path``."""

import pytest

from annotation import services
from annotation.models import Prompt
from tests.helpers import PHONE, jsonl, label_one, no_horizontal_scroll, page_problems, sign_in, sim_worker

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LAPTOP = {"viewport": {"width": 1280, "height": 800}}


@pytest.mark.parametrize("screen", [LAPTOP, PHONE], ids=["1280x800", "390x844"])
def test_a_researcher_finds_and_retires_prompts(live_server, new_page, make_campaign, researcher, tmp_path, screen):
    campaign = make_campaign(0, launch=False, k=2)
    long_text = "A rather long statement that a phone must wrap rather than widen the page for, " * 3
    rows = [
        {"id": f"p{i}", "text": f"Statement {i}. {long_text}", "gold": i % 2, "group": "animals" if i < 3 else "tools"}
        for i in range(6)
    ]
    services.prompts_import(campaign=campaign, data=jsonl(*rows), filename="p.jsonl")
    campaign = services.campaign_transition(campaign=campaign, action="launch")
    labeled = label_one(campaign, sim_worker(), value=1).prompt

    page = new_page(**screen)
    problems = page_problems(page, http=True)
    sign_in(page, live_server.url, "researcher")
    page.goto(f"{live_server.url}/campaigns/{campaign.slug}/")
    page.click(".campaign-links >> text=Prompts")
    page.wait_for_url(f"{live_server.url}/campaigns/{campaign.slug}/prompts/")
    assert page.locator("tr.prompt-row").count() == 6
    assert no_horizontal_scroll(page)
    page.screenshot(path=tmp_path / "prompts.png", full_page=True)

    page.select_option("select[name=group]", "tools")
    page.fill("input[name=search]", "statement 4")
    with page.expect_navigation():
        page.click("button:has-text('Filter')")
    page.wait_for_selector("tr.prompt-row[data-prompt='p4']")
    assert page.locator("tr.prompt-row").count() == 1

    with page.expect_navigation():
        page.click("text=Clear")
    page.select_option("select[name=retired]", "false")
    with page.expect_navigation():
        page.click("button:has-text('Filter')")
    # One unlabeled prompt and the labeled one (the draw decides which that is: never the target).
    target = "p5" if labeled.external_id == "p4" else "p4"
    page.check(f"tr.prompt-row[data-prompt='{target}'] input[name=prompts]")
    page.check(f"tr.prompt-row[data-prompt='{labeled.external_id}'] input[name=prompts]")
    with page.expect_navigation():
        page.click("button:has-text('Retire the selected')")
    page.wait_for_selector(".message")
    assert "Nothing was changed" in page.inner_text("body") and "counted label" in page.inner_text("body")
    assert not Prompt.objects.filter(retired_at__isnull=False).exists()

    page.check(f"tr.prompt-row[data-prompt='{target}'] input[name=prompts]")
    with page.expect_navigation():
        page.click("button:has-text('Retire the selected')")
    page.wait_for_selector("text=1 prompt retired.")
    # The list keeps its filters: retired prompts are filtered out now.
    assert page.locator(f"tr.prompt-row[data-prompt='{target}']").count() == 0
    page.select_option("select[name=retired]", "true")
    with page.expect_navigation():
        page.click("button:has-text('Filter')")
    page.wait_for_selector(f"tr.prompt-row.retired[data-prompt='{target}']")
    assert page.inner_text(f"tr.prompt-row[data-prompt='{target}'] .prompt-status") == "retired"
    assert no_horizontal_scroll(page)
    page.screenshot(path=tmp_path / "prompts-retired.png", full_page=True)

    with page.expect_navigation():
        page.click(f"tr.prompt-row[data-prompt='{target}'] .prompt-id a")
    page.wait_for_selector(f"h1:has-text('Prompt {target}')")
    assert "retired since" in page.inner_text(".prompt-card")
    with page.expect_navigation():
        page.click("button:has-text('Bring it back')")
    page.wait_for_selector("text=1 prompt brought back.")
    assert page.inner_text(".prompt-status").startswith("open")
    assert Prompt.objects.get(campaign=campaign, external_id=target).retired_at is None

    page.goto(f"{live_server.url}/campaigns/{campaign.slug}/prompts/{labeled.pk}/")
    assert page.locator("tr.prompt-label").count() == 1
    assert "It has counted labels, so it stays" in page.inner_text(".prompt-card")
    assert no_horizontal_scroll(page)
    page.screenshot(path=tmp_path / "prompt.png", full_page=True)
    assert problems == []
