"""Issue 21, "Free text for a small lab", in a real browser (headless Chromium) on a laptop and on a phone:
a researcher alone turns their free-text campaign (answers collected) to the single clustering protocol on
its edit page, clusters one prompt in the answers workspace (marking an answer invalid by keyboard), is
told it is saved, finds the prompt clustered on the answers page and the uploaded system scored on the
systems page and the card, each saying no agreement was measured. The database is checked at each step."""

import json

import pytest
from playwright.sync_api import expect

from annotation.models import Activity, Campaign, Label
from audits.models import AnswerClustering
from audits.selectors import leaderboard
from audits.services.systems import system_upload
from tests.audits.live.free_text import free_text_campaign
from tests.helpers import no_horizontal_scroll, page_problems, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

QUESTIONS = {
    "q1": ("Name something you drink in the morning.", ["coffee", "coffee", "Coffee", "tea", "tea", "asdf"]),
    "q2": ("Name a pet.", ["dog", "cat"]),
}
NOTE = "single annotator, no agreement measured"


@pytest.mark.parametrize("viewport", [(1280, 800), (390, 844)], ids=["laptop", "phone"])
def test_a_solo_researcher_clusters_a_prompt_and_reads_the_scores(
    live_server, new_page, researcher, viewport, tmp_path
):
    campaign = free_text_campaign(researcher, QUESTIONS)
    assert campaign.clustering_protocol == Campaign.ClusteringProtocol.DOUBLE_BLIND
    ranked = json.dumps({"q1": ["coffee", "tea"], "q2": ["dog"]}).encode()
    system_upload(campaign=campaign, name="baseline", data=ranked, filename="ranked.json", by=researcher)
    width, height = viewport
    page = new_page(viewport={"width": width, "height": height})
    problems = page_problems(page)
    base = live_server.url
    sign_in(page, base, "researcher")

    # The protocol, on the campaign's edit page.
    page.goto(f"{base}/campaigns/{campaign.slug}/edit/")
    assert no_horizontal_scroll(page)
    page.select_option("#id_clustering_protocol", "single")
    with page.expect_navigation():
        page.click("button:has-text('Save')")
    expect(page.locator(".message-success")).to_have_text("Campaign saved.")
    campaign.refresh_from_db()
    assert campaign.clustering_protocol == "single"
    assert Activity.objects.filter(campaign=campaign, verb="campaign.edited").get().detail == {
        "clustering_protocol": "single"
    }

    # Before any clustering: nothing to rank, and the page says why in the protocol's words.
    page.goto(f"{base}/audits/{campaign.slug}/systems/")
    expect(page.locator("#leaderboard-empty")).to_contain_text("no prompt has a final (saved) clustering")

    # The workspace opens on Chorus's proposal; the researcher marks "asdf" invalid by keyboard and saves.
    page.goto(f"{base}/audits/{campaign.slug}/answers/q1/")
    expect(page.locator("#role-line")).to_contain_text("your save is this prompt's final clustering")
    assert no_horizontal_scroll(page)
    page.locator('#board .answer[data-value="asdf"]').click()
    page.keyboard.press("x")
    with page.expect_navigation():
        page.click("#save-button")
    expect(page.locator(".message-success")).to_have_text(
        "Saved as version 1 (2 clusters). It is this prompt's final clustering."
    )
    final = AnswerClustering.objects.get(campaign=campaign)
    values = dict(Label.objects.filter(prompt=final.prompt).values_list("id", "value"))
    assert (final.role, final.version, final.author) == ("adjudicated", 1, researcher)
    assert sorted(set(final.assignment.values())) == ["coffee", "tea"]
    assert [values[pk] for pk in final.invalid] == ["asdf"]
    assert page.inner_text('#history li[data-version="1"]').startswith("Final by researcher v1")
    assert "current" in page.inner_text('#history li[data-version="1"]')
    page.screenshot(path=tmp_path / "workspace.png", full_page=True)
    assert Activity.objects.filter(campaign=campaign, verb="clustering.saved").count() == 1

    # The answers page: q1 clustered (final), its numbers from the saved clustering; q2 not yet.
    page.goto(f"{base}/audits/{campaign.slug}/answers/")
    q1 = page.locator('#answers-table tr[data-prompt="q1"]')
    expect(q1.locator("td").nth(1)).to_have_text("researcher")  # clustered by
    expect(q1.locator("td").nth(2)).to_have_text("yes (v1)")  # final
    assert "not clustered yet" not in q1.inner_text() and "(proposed)" not in q1.inner_text()
    assert q1.locator("td").nth(5).inner_text().strip() == "2"  # clusters (top share: coffee 3 of 5)
    expect(page.locator('#answers-table tr[data-prompt="q2"]')).to_contain_text("not clustered yet")
    expect(page.locator("#answers-summary")).to_contain_text(f"1 clustered (final; {NOTE})")
    assert no_horizontal_scroll(page)
    page.screenshot(path=tmp_path / "answers.png", full_page=True)

    # The systems page scores the system against that clustering, and says no agreement was measured.
    page.goto(f"{base}/audits/{campaign.slug}/systems/")
    board = leaderboard(campaign=campaign)
    assert board["n_prompts"] == 1 and board["agreement_note"] == NOTE
    score = board["systems"]["baseline"]["metrics"]["max_answers@10"]
    row = page.locator('#leaderboard-table tr[data-system="baseline"]')
    expect(row.locator(".score")).to_have_text(f"{score:.3f}")
    expect(page.locator("#agreement-note")).to_have_text(NOTE)
    assert no_horizontal_scroll(page)
    page.screenshot(path=tmp_path / "systems.png", full_page=True)

    page.goto(f"{base}/audits/{campaign.slug}/card/")
    expect(page.locator('[data-field="clustering"]')).to_contain_text(NOTE)
    assert no_horizontal_scroll(page)
    assert problems == []
