"""Clustering a prompt's answers in a real browser (headless Chromium): two researchers cluster the same
prompt independently from the proposal (dragging one answer, moving others by keyboard, marking one
invalid, undoing once, saving), their agreement appears, and a third adjudicates from one of them.
The saved versions are checked in the database. Screenshots go to ``tmp_path``."""

import json

import pytest

from annotation.models import Label
from audits.engine import clustering as engine
from audits.models import AnswerClustering
from audits.selectors import clustering as selectors
from audits.services import clustering as services
from tests.audits.live.free_text import free_text_campaign, protoqa_dev_campaign
from tests.helpers import page_problems, share_session, signed_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ANSWERS = ["coffee", "coffee", "Coffee", "tea", "tea", "green tea", "juice", "asdf", "orange juice"]


def answer(page, value):
    return page.locator(f'#board .answer[data-value="{value}"]')


def cluster(page, name):
    return page.locator(f'#board .cluster-box:has(input.cluster-name[value="{name}"])')


def key_of(page, name) -> str:
    return cluster(page, name).locator(".cluster-key").inner_text()


def open_as(new_page, live_server, user, url):
    page = new_page(viewport={"width": 1200, "height": 900})
    share_session(page.context, signed_in(user), live_server.url)
    problems = page_problems(page)
    page.goto(live_server.url + url)
    return page, problems


def saved(page):
    with page.expect_navigation():
        page.click("#save-button")


def groups_of(clustering) -> dict:
    """{cluster name: sorted answers} and the sorted invalid answers, from the database."""
    values = dict(Label.objects.filter(prompt=clustering.prompt).values_list("id", "value"))
    out = {}
    for pk, name in clustering.assignment.items():
        out.setdefault(name, []).append(values[int(pk)])
    return {name: sorted(v) for name, v in out.items()}, sorted(values[pk] for pk in clustering.invalid)


def test_two_researchers_cluster_independently_and_a_third_adjudicates(
    live_server, new_page, researcher, make_user, tmp_path
):
    campaign = free_text_campaign(researcher, {"q1": ("Name something you drink in the morning.", ANSWERS)})
    alice, bob, carol = make_user("alice"), make_user("bob"), make_user("carol")
    campaign.collaborators.add(alice, bob, carol)
    prompt = campaign.prompts.get()
    proposal = services.clustering_propose(prompt=prompt)
    assert groups_of(proposal) == (
        {
            "coffee": ["Coffee", "coffee", "coffee"],
            "tea": ["green tea", "tea", "tea"],
            "juice": ["juice", "orange juice"],
            "asdf": ["asdf"],
        },
        [],
    )
    url = f"/audits/{campaign.slug}/answers/q1/"

    # Alice: drag, keyboard split, invalid, a wrong move undone, save.
    page, problems = open_as(new_page, live_server, alice, url)
    other_tab, _ = open_as(new_page, live_server, alice, url)  # loaded version 0 too
    assert "Keyboard" in page.inner_text("#keyboard-help")
    assert cluster(page, "coffee").locator(".cluster-count").inner_text() == "3"
    assert answer(page, "coffee").inner_text().split() == ["coffee", "×2"]  # identical strings shown once
    answer(page, "orange juice").drag_to(cluster(page, "coffee"))
    assert cluster(page, "coffee").locator(".cluster-count").inner_text() == "4"  # counts update live
    answer(page, "green tea").click()
    page.keyboard.press("n")
    answer(page, "asdf").click()
    page.keyboard.press("x")
    assert page.locator("#board .invalid-box .cluster-count").inner_text() == "1"
    answer(page, "juice").click()
    page.keyboard.press(key_of(page, "coffee"))
    assert cluster(page, "coffee").locator(".cluster-count").inner_text() == "5"
    page.keyboard.press("Control+z")
    assert cluster(page, "coffee").locator(".cluster-count").inner_text() == "4"
    page.screenshot(path=tmp_path / "alice.png", full_page=True)
    saved(page)
    assert "Your current version: 1." in page.inner_text("#workspace-status")
    assert "agreement" not in page.inner_text("#workspace-status").lower()
    assert problems == []
    # Her other tab, still on version 0, cannot overwrite version 1.
    answer(other_tab, "juice").click()
    other_tab.keyboard.press("x")
    other_tab.click("#save-button")
    other_tab.wait_for_selector("#workspace-errors:not([hidden])")
    assert "Version 1 of this clustering was saved" in other_tab.inner_text("#workspace-errors")
    assert "Not saved." in other_tab.inner_text("#workspace-message")
    mine = AnswerClustering.objects.get(author=alice)
    assert (mine.role, mine.version, mine.based_on) == ("independent", 1, proposal)
    assert groups_of(mine) == (
        {
            "coffee": ["Coffee", "coffee", "coffee", "orange juice"],
            "tea": ["tea", "tea"],
            "green tea": ["green tea"],
            "juice": ["juice"],
        },
        ["asdf"],
    )

    # Bob sees the proposal, not Alice's clustering; he drags to "New cluster", moves by key, renames and undoes.
    page, problems = open_as(new_page, live_server, bob, url)
    assert cluster(page, "juice").count() == 1 and "alice" not in page.inner_text("#history")
    answer(page, "asdf").click()
    page.keyboard.press("x")
    answer(page, "green tea").drag_to(page.locator("#board .new-box"))
    answer(page, "orange juice").click()
    page.keyboard.press(key_of(page, "tea"))
    cluster(page, "juice").locator("input.cluster-name").fill("juices")
    page.keyboard.press("Enter")
    assert cluster(page, "juices").count() == 1
    page.keyboard.press("Control+z")
    assert cluster(page, "juice").count() == 1
    saved(page)
    theirs = AnswerClustering.objects.get(author=bob)
    assert groups_of(theirs) == (
        {
            "coffee": ["Coffee", "coffee", "coffee"],
            "tea": ["orange juice", "tea", "tea"],
            "green tea": ["green tea"],
            "juice": ["juice"],
        },
        ["asdf"],
    )
    # The agreement appears, as the engine computes it over the nine answers.
    ids = list(Label.objects.filter(prompt=prompt).order_by("id").values_list("id", flat=True))
    a, b = selectors.cluster_labels(mine, ids), selectors.cluster_labels(theirs, ids)
    blanc, ari = engine.blanc(a, b), engine.adjusted_rand(a, b)
    assert 0 < ari < blanc < 1
    text = page.inner_text("#agreement")
    assert f"BLANC {blanc:.3f}" in text and f"adjusted Rand {ari:.3f}" in text and "alice and bob" in text
    assert problems == []
    overview = page.goto(live_server.url + f"/audits/{campaign.slug}/answers/")
    assert overview.status == 200
    assert page.inner_text('#answers-table tr[data-prompt="q1"] td.blanc') == f"{blanc:.3f}"

    # Carol adjudicates, starting from Alice's clustering, and merges "green tea" back into "tea" by keyboard.
    page, problems = open_as(new_page, live_server, carol, url)
    assert "adjudicating" in page.inner_text("#role-line")
    with page.expect_navigation():
        page.locator("#other-clusterings details", has_text="by alice").get_by_text("start from this").click()
    assert cluster(page, "coffee").locator(".cluster-count").inner_text() == "4"
    answer(page, "green tea").click()
    page.keyboard.press("m")
    page.keyboard.press(key_of(page, "tea"))
    assert cluster(page, "tea").locator(".cluster-count").inner_text() == "3"
    page.screenshot(path=tmp_path / "carol.png", full_page=True)
    saved(page)
    final = AnswerClustering.objects.get(role="adjudicated")
    assert (final.author, final.version, final.based_on) == (carol, 1, mine)
    assert groups_of(final) == (
        {
            "coffee": ["Coffee", "coffee", "coffee", "orange juice"],
            "tea": ["green tea", "tea", "tea"],
            "juice": ["juice"],
        },
        ["asdf"],
    )
    assert problems == []


def test_the_answers_page_of_protoqa_dev_shows_noise_filter_and_most_divided(
    live_server, new_page, researcher, tmp_path
):
    campaign, _ = protoqa_dev_campaign(researcher, experts=True)
    page, problems = open_as(new_page, live_server, researcher, f"/audits/{campaign.slug}/answers/")
    page.screenshot(path=tmp_path / "answers.png")
    assert page.locator("#answers-table tbody tr").count() == 52
    summary = selectors.answers_overview(campaign=campaign)["summary"]
    assert page.inner_text("#filter-report") == ("ProtoQA's quality filter: 2 of 52 prompts fail (r2q6, r2q47).")
    divided = page.locator("#most-divided li").all_inner_texts()
    assert [line.split(":")[0] for line in divided] == [qid for qid, _, _ in summary.most_divided]
    assert divided[0].endswith(
        f"entropy {summary.most_divided[0][1]:.2f} bits, top share {summary.most_divided[0][2]:.2f}"
    )
    with page.expect_download() as download:
        page.click("text=Adjudicated clusters (ProtoQA JSONL)")
    rows = [json.loads(line) for line in open(download.value.path()).read().splitlines()]
    assert len(rows) == 52 and sum(r["num"]["clusters"] for r in rows) == 541
    assert problems == []
