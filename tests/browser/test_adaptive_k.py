"""Adaptive k in a real browser (headless Chromium, a phone's screen): a researcher sets a minimum and a
maximum k on the campaign form (a maximum below the minimum is refused, naming it), imports prompts,
reads the rule and the planner on the campaign page, prices the plan, and watches prompts stop while
workers label. Each test leaves screenshots in its ``tmp_path``."""

import pytest

from annotation.models import Campaign, Slot, StopDecision
from tests.helpers import PHONE, label_one, no_horizontal_scroll, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def watch(page) -> list:
    """Console errors, failed responses (the favicon's aside) and page errors, as they happen."""
    problems = []
    page.on(
        "console", lambda m: m.type == "error" and "Failed to load resource" not in m.text and problems.append(m.text)
    )
    page.on(
        "response",
        lambda r: r.status >= 400 and not r.url.endswith("/favicon.ico") and problems.append(f"{r.status} {r.url}"),
    )
    page.on("pageerror", lambda e: problems.append(str(e)))
    return problems


def test_a_researcher_sets_adaptive_k_reads_the_rule_and_prices_the_plan(
    live_server, new_page, researcher, make_worker, tmp_path
):
    page = new_page(**PHONE)
    problems = watch(page)
    sign_in(page, live_server.url, "researcher")
    page.goto(f"{live_server.url}/campaigns/new/")
    page.fill("input[name=title]", "Plausible or not")
    page.fill("input[name=k]", "3")
    page.fill("input[name=k_max]", "2")
    page.fill("input[name=stop_confidence]", "0.95")
    page.click("button:has-text('Create campaign')")
    page.wait_for_selector("text=must be at least the least (k = 3)")
    assert not Campaign.objects.exists()

    page.fill("input[name=k_max]", "5")
    page.click("button:has-text('Create campaign')")
    page.wait_for_selector(".message-success")
    campaign = Campaign.objects.get()
    assert (campaign.k, campaign.k_max, campaign.stop_confidence) == (3, 5, 0.95)
    prompts = tmp_path / "prompts.csv"
    prompts.write_text("id,text\n" + "".join(f"p{i},Statement {i}.\n" for i in range(6)))
    page.set_input_files("input[name=file]", str(prompts))
    page.click("button:has-text('Upload')")
    page.click("button:has-text('Import these 6 prompts')")  # after the file's preview
    page.wait_for_selector(".message-success")
    page.click("button:has-text('Launch')")
    page.wait_for_selector(".status-live")

    rule = page.locator("#adaptive-k")
    text = " ".join(rule.inner_text().split())
    assert "Adaptive k: every prompt gets at least 3 labels and at most 5" in text
    assert "A tie never stops before 5." in text
    assert [" ".join(row.inner_text().split()) for row in rule.locator("table.stop-thresholds tbody tr").all()] == [
        "3 — (one more label)",
        "4 4 or more of 4 alike",
        "5 5 or more of 5 alike",
    ]
    assert "the study's ComVE crowd" in text
    assert "(k = 3 to 5, adaptive)" in page.inner_text(".progress-text")
    assert no_horizontal_scroll(page)
    page.screenshot(path=tmp_path / "rule-and-plan.png", full_page=True)

    rule.locator("input[name=reward]").fill("0.10")
    rule.locator("button:has-text('Price the plan')").click()
    page.wait_for_selector("table.plan-cost")
    expected = page.locator("tr.plan-cost-expected").inner_text()
    most = page.locator("tr.plan-cost-most").inner_text()
    assert most.split() == ["At", "most", "30", "$3.00", "$0.60", "$3.60"]  # 6 prompts × 5 labels
    assert expected.startswith("Expected")
    assert no_horizontal_scroll(page)

    workers = [make_worker() for _ in range(4)]
    for worker in workers:
        for _ in range(6):
            label_one(campaign, worker, 1)  # unanimous: every prompt stops at 4
    page.reload()
    rows = [" ".join(row.inner_text().split()) for row in page.locator("table.plan-final-k tbody tr").all()]
    assert [row.split()[0] + " " + row.split()[-1] for row in rows] == ["3 0", "4 6", "5 0"]
    assert "the first 3 labels of the campaign's 6 prompts" in page.inner_text("#adaptive-k")
    assert "24 of 24 labels" in page.inner_text(".progress-text")
    assert Slot.objects.filter(campaign=campaign).count() == 24
    assert StopDecision.objects.filter(campaign=campaign, outcome="stop").count() == 6
    page.screenshot(path=tmp_path / "stopped.png", full_page=True)
    page.locator("#adaptive-k").screenshot(path=tmp_path / "adaptive-k.png")
    assert problems == []
