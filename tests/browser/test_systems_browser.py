"""The systems page in headless Chromium: a researcher uploads two CSV files of predictions, sees the
leaderboard with its intervals and the pair's verdicts, then uploads a file with a bad row and sees
the row named above the form, nothing stored. Leaves screenshots in the test's ``tmp_path``."""

import pytest

from audits.models import System
from tests.audits.live.test_systems_live import GOOD, N_PROMPTS, POOR, csv_of, label_noisily
from tests.helpers import page_problems, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def upload(page, name: str, filename: str, data: bytes) -> None:
    form = page.locator("#upload-form")
    form.locator("input[name=name]").fill(name)
    form.locator("input[name=file]").set_input_files({"name": filename, "mimeType": "text/csv", "buffer": data})
    form.locator("button[type=submit]").click()


def test_upload_csv_see_the_leaderboard_and_a_row_error(live_server, page, make_campaign, researcher, tmp_path):
    campaign = make_campaign(N_PROMPTS, k=5)
    label_noisily(campaign)
    problems = page_problems(page)  # the refused upload answers 400, on purpose: no http check
    sign_in(page, live_server.url, "researcher")
    url = f"{live_server.url}/audits/{campaign.slug}/systems/"
    page.goto(url)
    assert "Nothing to rank yet: no systems uploaded yet." in page.inner_text("#leaderboard")

    upload(page, "good", "good.csv", csv_of(GOOD))
    page.wait_for_selector("text=System “good”: 20 predictions stored.")
    upload(page, "poor", "poor.csv", csv_of(POOR))
    page.wait_for_selector("text=System “poor”: 20 predictions stored.")
    rows = page.locator("#leaderboard-table tbody tr")
    assert rows.count() == 2
    first = rows.nth(0).inner_text()
    assert first.startswith("1\tgood\t20") and "[" in first and "n = " in first  # a score with its interval
    assert rows.nth(1).locator("td").nth(1).inner_text() == "poor"
    verdicts = page.inner_text("#pair-verdicts")
    assert "Across raters:" in verdicts and "Across prompts:" in verdicts
    assert "the instrument separates good and poor: good scores higher (exact McNemar" in verdicts
    assert page.locator(".partition-table").count() == 2
    page.screenshot(path=tmp_path / "leaderboard.png", full_page=True)

    upload(page, "bad", "bad.csv", b"prompt_id,prediction\np0,1\nmissing,1\np1,maybe\n")
    page.wait_for_selector("#upload-errors")
    errors = page.inner_text("#upload-errors")
    assert "Nothing was uploaded (2 problems)." in errors
    assert "line 3: unknown prompt id 'missing'" in errors
    assert "line 4: prediction 'maybe' is not a label of this campaign" in errors
    assert sorted(System.objects.values_list("name", flat=True)) == ["good", "poor"]
    assert page.locator("#leaderboard-table tbody tr").count() == 2  # the page still shows the board
    page.screenshot(path=tmp_path / "row-error.png", full_page=True)
    assert problems == [] or all("400" in p for p in problems), problems


def test_deleting_a_system_asks_first(live_server, page, make_campaign, researcher):
    campaign = make_campaign(N_PROMPTS, k=5)
    label_noisily(campaign)
    problems = page_problems(page)
    sign_in(page, live_server.url, "researcher")
    page.goto(f"{live_server.url}/audits/{campaign.slug}/systems/")
    upload(page, "good", "good.csv", csv_of(GOOD))
    page.wait_for_selector("text=System “good”: 20 predictions stored.")
    asked = []

    def answer(dialog, accept):
        asked.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    delete = page.locator("tr[data-system=good] button.danger")
    page.once("dialog", lambda d: answer(d, False))
    delete.click()
    page.wait_for_timeout(300)
    assert asked == ["Delete system “good” and its predictions? This cannot be undone."]
    assert System.objects.filter(name="good").exists()  # dismissed: nothing was sent
    page.once("dialog", lambda d: answer(d, True))
    delete.click()
    page.wait_for_selector("text=System “good” deleted.")
    assert not System.objects.filter(name="good").exists()
    assert problems == [], problems
