"""Quality rules and worker quality in a real browser (headless Chromium): a researcher adds a rule on
the campaign page (a bad threshold is refused, naming it), deactivates it; the dashboard's workers
table shows each worker's live quality numbers and the flags in words. Each test leaves a screenshot
in its ``tmp_path``."""

import re

import pytest

from annotation.models import QualityRule
from annotation.services.rules import rule_create
from tests.audits.live.test_quality_rules import ALWAYS_ONE, HONEST, TOO_FAST, crowd_campaign, run_crowd
from tests.helpers import PHONE, page_problems, share_session, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_researcher_adds_a_rule_fixes_a_bad_threshold_and_deactivates_it(
    live_server, new_page, make_campaign, researcher, tmp_path
):
    campaign = make_campaign(4)
    page = new_page(**PHONE)
    problems = page_problems(page)  # the refused rule's page answers 400, on purpose
    sign_in(page, live_server.url, "researcher")
    page.goto(f"{live_server.url}/campaigns/{campaign.slug}/")
    rules = page.locator("#quality-rules")
    assert "No rules yet" in rules.inner_text()

    form = rules.locator("form.rule-form")
    form.locator("select[name=metric]").select_option("control_accuracy")
    # The number field's own min/max would stop the browser from sending 1.5; a script (or an old
    # browser) can, and the server must refuse it by name.
    form.locator("input[name=threshold]").evaluate("input => { input.removeAttribute('max'); input.value = '1.5'; }")
    form.locator("input[name=min_labels]").fill("10")
    form.locator("select[name=action]").select_option("recollect")
    form.locator("button[type=submit]").click()
    page.wait_for_selector("text=The rule was not added")
    assert "The threshold is a share between 0 and 1; got 1.5." in page.inner_text("#quality-rules")
    assert not QualityRule.objects.exists()
    page.screenshot(path=tmp_path / "rule-refused.png", full_page=True)

    form = page.locator("#quality-rules form.rule-form")
    form.locator("input[name=threshold]").fill("0.6")
    form.locator("button[type=submit]").click()
    page.wait_for_url(f"{live_server.url}/campaigns/{campaign.slug}/#quality-rules")
    rule = QualityRule.objects.get()
    assert (rule.metric, rule.threshold, rule.min_labels, rule.action, rule.active) == (
        "control_accuracy",
        0.6,
        10,
        "recollect",
        True,
    )
    item = page.locator(f"#quality-rules li[data-rule='{rule.pk}']")
    assert " ".join(item.inner_text().split()).startswith(
        "When control accuracy is below 0.60 after at least 10 controls: exclude, block and re-collect their labels."
    )
    # the rule's line fits a phone's width: nothing to scroll sideways
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.screenshot(path=tmp_path / "rule-added.png", full_page=True)

    item.locator("button", has_text="Deactivate").click()
    page.wait_for_selector(f"#quality-rules li[data-rule='{rule.pk}'].inactive")
    assert "Deactivated." in page.locator(f"#quality-rules li[data-rule='{rule.pk}']").inner_text()
    rule.refresh_from_db()
    assert rule.active is False
    assert problems == []


def test_the_dashboard_shows_each_workers_quality_and_the_flags_in_words(
    live_server, new_page, client, make_campaign, researcher, tmp_path
):
    from playwright.sync_api import expect

    campaign = crowd_campaign(make_campaign, n_prompts=40, n_controls=20)
    rule_create(campaign=campaign, by=researcher, metric="straight_lining", threshold=0.9, min_labels=10, action="flag")
    records = run_crowd(campaign, [HONEST] * 5 + [ALWAYS_ONE, TOO_FAST], seed=21)
    always, fast = (next(r for r in records if r.kind == kind) for kind in (ALWAYS_ONE, TOO_FAST))

    client.force_login(researcher)
    page = new_page(viewport={"width": 1400, "height": 900})
    share_session(page.context, client, live_server.url)
    problems = page_problems(page, http=True)
    page.goto(f"{live_server.url}/audits/{campaign.slug}/")
    expect(page.locator("#workers-body tr")).to_have_count(len(records))
    expect(page.locator("th.controls-only")).to_be_visible()  # the campaign has controls

    def row(record):
        return page.locator("#workers-body tr", has=page.locator("td", has_text=record.worker.public_id))

    def cell(record, label):
        return row(record).locator(f'td[data-label="{label}"]')

    expect(row(fast).locator(".flag-too-fast")).to_have_text(
        re.compile(r"^too fast: median 0\.\d s per label, \d+ % of the campaign's median of \d+\.\d s$")
    )
    expect(cell(always, "bias (95 % interval)")).to_have_text(
        re.compile(r"^\+0\.\d\d \[\+0\.\d\d, \+0\.\d\d\] \(N = \d+\)$")
    )
    expect(cell(always, "most frequent answer")).to_have_text(re.compile(r"^1: 100 %$"))
    expect(cell(always, "control accuracy")).to_have_text(re.compile(r"^0\.\d\d \[0\.\d\d, [01]\.\d\d\] \(N = \d+\)$"))
    expect(cell(fast, "time")).to_have_text(re.compile(r"^0\.\d s \(0\.\d\d×\)$"))
    expect(page.locator("#campaign-median")).to_have_text(re.compile(r"^\d+\.\d s$"))
    # the controls' cut-off for this campaign: 20 control prompts, so min(power cut-off 10, 20)
    expect(page.locator("#min-controls")).to_have_text("10")
    for record in records:
        if record.kind == HONEST:
            assert row(record).locator(".flag-too-fast, .flag-control-accuracy").count() == 0
    page.locator("section.card", has=page.locator("#workers-body")).screenshot(path=tmp_path / "dashboard-workers.png")
    assert problems == []
