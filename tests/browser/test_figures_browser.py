"""The study's tables and figures in a real browser (headless Chromium), at 1280×800 and on a phone
(390×844): the figures, groups and compare pages and the dashboard show their SVGs and tables without
a horizontal scroll and without a console error. Each page leaves a screenshot in ``tmp_path``."""

import json
import random

import pytest

from annotation import services
from audits import services as audit_services
from audits.models import AuditSnapshot
from audits.selectors.figures import TABLE_COLUMNS, figures_data
from tests.helpers import PHONE, page_problems, share_session, signed_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DESKTOP = {"viewport": {"width": 1280, "height": 800}}


@pytest.fixture
def grouped(researcher):
    """A campaign of 30 prompts in three groups, with gold, k = 3, labeled by eight workers of differing
    care and volume (seeded, in turns), with both audits computed."""
    rng = random.Random(13)
    lines = [
        json.dumps({"id": f"p{i}", "text": f"Statement {i}", "gold": i % 2, "group": ("home", "travel", "work")[i % 3]})
        for i in range(30)
    ]
    campaign = services.campaign_create(owner=researcher, title="Grouped statements with a rather long title", k=3)
    services.prompts_import(campaign=campaign, data="\n".join(lines).encode(), filename="p.jsonl")
    campaign = services.campaign_transition(campaign=campaign, action="launch")
    gold = dict(campaign.prompts.values_list("pk", "gold"))
    crowd = [
        [services.worker_get_or_create(channel="sim", external_id=f"w{n}"), care, volume]
        for n, (care, volume) in enumerate(
            zip((0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.6, 0.55), (30, 25, 20, 15, 10, 8, 6, 4))
        )
    ]
    while crowd:
        for entry in list(crowd):
            worker, care, left = entry
            lease = services.lease_acquire(campaign=campaign, worker=worker)
            if left == 0 or isinstance(lease, services.NothingLeft):
                if not isinstance(lease, services.NothingLeft):
                    services.lease_release(lease_id=lease.pk, worker=worker)
                crowd.remove(entry)
                continue
            value = gold[lease.prompt_id] if rng.random() < care else 1 - gold[lease.prompt_id]
            services.label_submit(lease_id=lease.pk, worker=worker, value=value, client_token=f"t{lease.pk}")
            entry[2] -= 1
    audit_services.audit_refresh(campaign_id=campaign.pk)
    audit_services.audit_full(campaign_id=campaign.pk)
    return campaign


@pytest.mark.parametrize("device", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_pages_fit_the_screen_and_show_their_figures(live_server, new_page, researcher, grouped, device, tmp_path):
    data = figures_data(campaign=grouped)
    assert sum(1 for r in data["regressions"] if r["band"]) >= 6  # the band is drawn, not only the points
    n_figures = len(data["regressions"]) + 2 + 1  # Fig. 6 panels, two box plots, Fig. 4
    page = new_page(**device)
    problems = page_problems(page, http=True)
    share_session(page.context, signed_in(researcher), live_server.url)
    base = f"{live_server.url}/audits"
    width = device["viewport"]["width"]

    page.goto(f"{base}/{grouped.slug}/figures/")
    svgs = page.locator("svg[role=img]")
    assert svgs.count() == n_figures
    for i in range(n_figures):
        box = svgs.nth(i).bounding_box()
        assert box and box["width"] > 200 and box["height"] > 100 and box["x"] + box["width"] <= width + 0.5, box
    svgs.first.scroll_into_view_if_needed()
    assert svgs.first.is_visible()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.screenshot(path=tmp_path / "figures.png", full_page=True)

    page.goto(f"{base}/{grouped.slug}/groups/")
    assert page.locator("#groups-table tbody tr").count() == 3
    assert page.locator("#groups-table tbody tr[data-group=travel] th").inner_text() == "travel"
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.screenshot(path=tmp_path / "groups.png", full_page=True)

    page.goto(f"{base}/compare/")
    page.locator(f"input[name=campaigns][value='{grouped.slug}']").check()
    page.locator("form.compare-form button[type=submit]").click()
    page.wait_for_selector("#compare-table")
    assert page.locator(f"#compare-table tr[data-campaign='{grouped.slug}'] td").count() == len(TABLE_COLUMNS) + 1
    # the study's system noise in its own labeled column, right after the specification's
    headings = page.locator("#compare-table thead th").all_inner_texts()
    at = headings.index("System noise (study)")
    assert headings[at - 1] == "System noise, original"
    report = AuditSnapshot.objects.filter(campaign=grouped, kind="full").latest("watermark").data
    cell = page.locator(f"#compare-table tr[data-campaign='{grouped.slug}'] > *").nth(at).inner_text()
    assert cell == f"{report['system_noise_study']:.3f}"
    assert report["system_noise_study"] == pytest.approx(
        (report["level_noise"] ** 2 + report["pattern_noise_orig"] ** 2) ** 0.5, rel=1e-12
    )
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.screenshot(path=tmp_path / "compare.png", full_page=True)

    page.goto(f"{base}/{grouped.slug}/")
    summary = AuditSnapshot.objects.filter(campaign=grouped, kind="full").latest("watermark").data["accuracy_summary"]
    page.wait_for_function("() => document.getElementById('acc-others').textContent !== '—'", timeout=10_000)
    assert page.locator("#acc-others").inner_text().startswith(f"{summary['pooled_accuracy']:.3f}")
    assert page.locator("#acc-gold").is_visible()
    for link in ("figures", "groups", "compare", "systems", "card"):
        assert page.locator(f"#link-{link}").count() == 1
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.screenshot(path=tmp_path / "dashboard.png", full_page=True)
    assert problems == []
