"""Control prompts in a real browser (headless Chromium): a researcher marks prompts as controls on the
campaign page (an id that is no prompt of the campaign is refused, naming it), sets the campaign to
serve them first, and a worker labels one on the usual task page; the campaign page then counts the
control's label. Each test leaves screenshots in its ``tmp_path``."""

import pytest

from annotation import services
from annotation.models import Label, Prompt
from tests.helpers import PHONE, no_horizontal_scroll, page_problems, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_researcher_marks_controls_and_a_worker_labels_one_unaware(
    live_server, new_page, make_campaign, make_user, researcher, tmp_path
):
    campaign = make_campaign(3, k=2)
    page = new_page(**PHONE)
    problems = page_problems(page)  # the refused marking's page answers 400, on purpose
    sign_in(page, live_server.url, "researcher")
    page.goto(f"{live_server.url}/campaigns/{campaign.slug}/")
    section = page.locator("#controls")
    assert "No control prompts yet." in section.inner_text()
    assert "Controls are not served" in section.inner_text()

    form = section.locator("form.control-form")
    form.locator("textarea[name=external_ids]").fill("p0\nnot-a-prompt")
    form.locator("input[name=control][value='1']").check()
    form.locator("button[type=submit]").click()
    page.wait_for_selector("text=Nothing was changed")
    assert "'not-a-prompt' is not a prompt of this campaign." in page.inner_text("#controls")
    assert not Prompt.objects.filter(is_control=True).exists()
    page.locator("#controls").screenshot(path=tmp_path / "controls-refused.png")

    form = page.locator("#controls form.control-form")
    form.locator("textarea[name=external_ids]").fill("p0")
    form.locator("button[type=submit]").click()
    page.wait_for_url(f"{live_server.url}/campaigns/{campaign.slug}/#controls")
    assert "1 prompt made controls." in page.inner_text("main")
    assert [p.external_id for p in Prompt.objects.filter(is_control=True)] == ["p0"]
    assert "p0" in page.locator("#controls .control-list").inner_text()
    assert no_horizontal_scroll(page)
    page.locator("#controls").screenshot(path=tmp_path / "controls-marked.png")

    services.campaign_update(campaign=campaign, control_first=1)
    page.reload()
    served = " ".join(page.inner_text("#controls").split())
    assert "Served to every worker: their first prompt, while they have controls left" in served

    make_user("wren")
    worker_page = new_page(**PHONE)
    worker_problems = page_problems(worker_page)
    sign_in(worker_page, live_server.url, "wren")
    worker_page.goto(f"{live_server.url}/w/{campaign.slug}/next/")
    worker_page.wait_for_selector("form.label-form")
    # The usual task page: the prompt's text, the answers, nothing that says "control".
    assert "control" not in worker_page.inner_text("main").lower()
    worker_page.screenshot(path=tmp_path / "control-task.png", full_page=True)
    worker_page.locator("button.choice-button").first.click()
    worker_page.wait_for_selector("text=Saved. You have labeled 1 so far.")
    label = Label.objects.get()
    assert label.is_control and label.prompt.external_id == "p0" and label.slot_id is None

    page.reload()
    assert "p0 1 label" in " ".join(page.locator("#controls .control-list").inner_text().split())
    assert problems == [] and worker_problems == []
