"""Importing a published study in headless Chromium, at 1280×800 and on a phone (390×844): from the home
page, WordSim-353's first set (153 pairs × 13 raters, continuous 0–10 ratings) becomes an imported study
whose campaign page says what it is and whose card shows the interval α of the offline command; a file
with a bad line is refused, naming it, and stores nothing. No console error, no sideways scrolling."""

import pytest

from annotation.models import Campaign
from tests.audits.conftest import wordsim_labels, write_csv
from tests.helpers import PHONE, no_horizontal_scroll, page_problems, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LAPTOP = {"viewport": {"width": 1280, "height": 800}}


@pytest.mark.parametrize("screen", [LAPTOP, PHONE], ids=["1280x800", "390x844"])
def test_a_researcher_imports_wordsim_as_a_study(live_server, new_page, researcher, tmp_path, screen):
    labels = wordsim_labels(tmp_path, sets=("set1",))
    bad = write_csv(tmp_path / "bad.csv", ["worker", "prompt", "value"], [("r1", "p1", "7"), ("r1", "p2", "11")])
    page = new_page(**screen)
    problems = page_problems(page, http=False)
    sign_in(page, live_server.url, "researcher")
    page.click("text=Import a study")
    page.wait_for_url(f"{live_server.url}/campaigns/new/study/")
    assert no_horizontal_scroll(page)

    def fill(title: str, path):
        page.fill("input[name=title]", title)
        page.set_input_files("input[name=labels]", str(path))
        page.select_option("select[name=schema]", "rating")
        page.fill("input[name=scale_min]", "0")
        page.fill("input[name=scale_max]", "10")
        page.fill("input[name=scale_step]", "continuous")
        with page.expect_navigation():
            page.click("button:has-text('Import study')")

    fill("Bad file", bad)
    assert "line 3: value:" in page.inner_text("body") and "11" in page.inner_text("body")
    assert not Campaign.objects.filter(title="Bad file").exists()
    page.screenshot(path=tmp_path / "refused.png", full_page=True)

    fill("WordSim-353, set 1", labels)
    campaign = Campaign.objects.get(title="WordSim-353, set 1")
    page.wait_for_url(f"{live_server.url}/campaigns/{campaign.slug}/")
    body = page.inner_text("body")
    assert "Imported 1989 labels of 13 workers on 153 prompts" in body and "An imported study" in body
    assert no_horizontal_scroll(page)
    page.screenshot(path=tmp_path / "study.png", full_page=True)

    page.goto(f"{live_server.url}/audits/{campaign.slug}/card/")
    assert page.locator('[data-field="alpha"]').inner_text() == "0.666"
    assert no_horizontal_scroll(page)
    page.screenshot(path=tmp_path / "card.png", full_page=True)
    assert problems == []
