"""Issue 14 end to end, in a real browser (headless Chromium): a researcher creates a free-text campaign with
answer length limits, imports three prompts and launches it; six workers type their answers (k = 6); two
researchers cluster a prompt independently (a drag, a keyboard move, an invalid answer) and their agreement
appears; a third adjudicates every prompt while the dashboard, left open, follows; the researcher uploads a
ranked-answers system with samples and reads the leaderboard; ``score_answers`` on the downloaded
answers.jsonl and the uploaded files gives the page's numbers. The database is checked at each step."""

import io
import json

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from annotation.models import Campaign, Label, Prompt
from audits.engine import clustering as engine
from audits.models import AnswerClustering, System
from audits.selectors import clustering as clustering_selectors
from audits.selectors import leaderboard
from tests.helpers import page_problems, share_session, sign_in, signed_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Worker i types ANSWERS[question][i]: the same answers every run, whatever order the prompts come in.
ANSWERS = {
    "Name something you drink in the morning.": ["coffee", "Coffee", "tea", "green tea", "juice", "asdf"],
    "Name a pet.": ["dog", "dog", "cat", "cat", "hamster", "dog"],
    "Name a colour.": ["red", "blue", "red", "green", "Red", "red"],
}
IDS = {"Name something you drink in the morning.": "q1", "Name a pet.": "q2", "Name a colour.": "q3"}
K = 6
RANKED = {"q1": ["coffee", "tea", "juice"], "q2": ["cat", "dog"], "q3": ["blue", "red", "green"]}
SAMPLES = {"q1": ["coffee", "coffee", "tea"], "q2": ["dog", "dog", "cat"], "q3": ["red", "red", "blue"]}
METRICS = ("max_answers@1", "max_answers@3", "max_answers@5", "max_answers@10", "max_incorrect@1")


def open_as(new_page, live_server, user, path):
    page = new_page(viewport={"width": 1200, "height": 900})
    share_session(page.context, signed_in(user), live_server.url)
    problems = page_problems(page)
    page.goto(live_server.url + path)
    return page, problems


def answer(page, value):
    return page.locator(f'#board .answer[data-value="{value}"]')


def cluster(page, name):
    return page.locator(f'#board .cluster-box:has(input.cluster-name[value="{name}"])')


def saved(page):
    with page.expect_navigation():
        page.click("#save-button")


def groups_of(clustering) -> tuple[dict, list]:
    """{cluster name: sorted answers} and the sorted invalid answers, from the database."""
    values = dict(Label.objects.filter(prompt=clustering.prompt).values_list("id", "value"))
    out = {}
    for pk, name in clustering.assignment.items():
        out.setdefault(name, []).append(values[int(pk)])
    return {name: sorted(v) for name, v in out.items()}, sorted(values[pk] for pk in clustering.invalid)


def create_and_launch(page, base) -> Campaign:
    page.goto(f"{base}/campaigns/new/")
    page.fill("#id_title", "Morning answers")
    page.select_option("#id_schema", "free_text")
    page.fill("#id_answer_min_length", "2")
    page.fill("#id_answer_max_length", "30")
    page.fill("#id_k", str(K))
    with page.expect_navigation():
        page.click("button:has-text('Create campaign')")
    campaign = Campaign.objects.get(title="Morning answers")
    assert (campaign.schema, campaign.k, campaign.answer_min_length, campaign.answer_max_length) == (
        "free_text",
        K,
        2,
        30,
    )
    data = "".join(json.dumps({"id": IDS[text], "text": text}) + "\n" for text in ANSWERS).encode()
    page.set_input_files(
        "input[name=file]", {"name": "questions.jsonl", "mimeType": "application/json", "buffer": data}
    )
    page.click("button:has-text('Upload')")
    page.click("button:has-text('Import these 3 prompts')")  # after the file's preview
    page.wait_for_selector(".message-success")
    assert page.inner_text(".message-success") == "Imported 3 prompts from questions.jsonl."
    page.click("button:has-text('Launch')")
    page.wait_for_selector(".status-live")
    campaign.refresh_from_db()
    assert campaign.status == "live"
    assert dict(Prompt.objects.filter(campaign=campaign).values_list("text", "external_id")) == IDS
    return campaign


def work(new_page, live_server, user, campaign, i):
    """Worker ``i`` types their answer to each prompt they are given, Enter after each, until none is left."""
    page, problems = open_as(new_page, live_server, user, f"/w/{campaign.slug}/next/")
    for _ in ANSWERS:
        page.wait_for_selector("form.label-form input#answer")
        assert page.get_attribute("#answer", "maxlength") == "30"
        page.keyboard.type(ANSWERS[page.locator(".prompt-text").inner_text().strip()][i])
        with page.expect_navigation():
            page.keyboard.press("Enter")
    assert page.locator("form.label-form").count() == 0  # nothing left for this worker
    assert problems == []
    page.close()


def test_a_free_text_campaign_from_creation_to_the_leaderboard(live_server, new_page, researcher, make_user, tmp_path):
    base = live_server.url
    page = new_page(viewport={"width": 1200, "height": 900})
    sign_in(page, base, "researcher")
    campaign = create_and_launch(page, base)

    # Six workers, k = 6: every worker answers every prompt once.
    for i in range(K):
        work(new_page, live_server, make_user(f"worker{i}"), campaign, i)
    stored = {
        (text, worker): value
        for text, worker, value in Label.objects.filter(campaign=campaign).values_list(
            "prompt__text", "worker__user__username", "value"
        )
    }
    assert stored == {(text, f"worker{i}"): ANSWERS[text][i] for text in ANSWERS for i in range(K)}

    # The researcher proposes clusters for every prompt on the answers page.
    alice, bob, carol = make_user("alice"), make_user("bob"), make_user("carol")
    campaign.collaborators.add(alice, bob, carol)
    page.goto(f"{base}/audits/{campaign.slug}/answers/")
    with page.expect_navigation():
        page.click("button:has-text('Propose clusters for every prompt')")
    assert AnswerClustering.objects.filter(campaign=campaign, role="proposal").count() == 3
    q1 = campaign.prompts.get(external_id="q1")
    proposal = AnswerClustering.objects.get(prompt=q1, role="proposal")
    assert groups_of(proposal) == (
        {"coffee": ["Coffee", "coffee"], "tea": ["green tea", "tea"], "juice": ["juice"], "asdf": ["asdf"]},
        [],
    )

    # Alice and Bob cluster q1 independently: one drag, one keyboard move, one invalid answer each.
    url = f"/audits/{campaign.slug}/answers/q1/"
    alice_page, problems = open_as(new_page, live_server, alice, url)
    answer(alice_page, "juice").drag_to(cluster(alice_page, "tea"))
    answer(alice_page, "green tea").click()
    alice_page.keyboard.press("n")
    answer(alice_page, "asdf").click()
    alice_page.keyboard.press("x")
    saved(alice_page)
    assert problems == []
    bob_page, problems = open_as(new_page, live_server, bob, url)
    assert "alice" not in bob_page.inner_text("#history")  # double-blind
    answer(bob_page, "asdf").drag_to(bob_page.locator("#board .invalid-box"))
    answer(bob_page, "green tea").click()
    bob_page.keyboard.press("n")
    answer(bob_page, "Coffee").click()
    bob_page.keyboard.press("x")
    saved(bob_page)
    assert problems == []
    mine, theirs = (AnswerClustering.objects.get(prompt=q1, author=u) for u in (alice, bob))
    assert (mine.role, mine.version, mine.based_on, theirs.based_on) == ("independent", 1, proposal, proposal)
    assert groups_of(mine) == (
        {"coffee": ["Coffee", "coffee"], "tea": ["juice", "tea"], "green tea": ["green tea"]},
        ["asdf"],
    )
    assert groups_of(theirs) == (
        {"coffee": ["coffee"], "tea": ["tea"], "green tea": ["green tea"], "juice": ["juice"]},
        ["Coffee", "asdf"],
    )
    # The agreement appears, as the engine computes it over the six answers.
    ids = list(Label.objects.filter(prompt=q1).order_by("id").values_list("id", flat=True))
    a, b = (clustering_selectors.cluster_labels(c, ids) for c in (mine, theirs))
    blanc, ari = engine.blanc(a, b), engine.adjusted_rand(a, b)
    text = bob_page.inner_text("#agreement")
    assert f"BLANC {blanc:.3f}" in text and f"adjusted Rand {ari:.3f}" in text and "alice and bob" in text
    # On q2 and q3 they keep the proposal as it is (two saves), so those can be adjudicated too.
    for user in (alice, bob):
        for qid in ("q2", "q3"):
            other, problems = open_as(new_page, live_server, user, f"/audits/{campaign.slug}/answers/{qid}/")
            saved(other)
            assert problems == []
            other.close()
    assert AnswerClustering.objects.filter(campaign=campaign, role="independent").count() == 6

    # The dashboard, left open, says why there is no full audit and follows the adjudication live.
    dash, dash_problems = open_as(new_page, live_server, researcher, f"/audits/{campaign.slug}/")
    expect(dash.locator("#free-text-progress")).to_contain_text("0 adjudicated")
    assert "free-text answers are audited by their clusters" in dash.inner_text("#skip-reason")
    assert all(section.is_hidden() for section in dash.locator("section.binary-only").all())
    assert dash.locator("#download-json").is_hidden() and dash.locator("#download-md").is_hidden()  # no full audit
    assert "18 answers on 3 of 3 prompts · 3 proposed, 3 clustered by two researchers" in dash.inner_text(
        "#free-text-progress"
    )

    # Carol adjudicates every prompt: q1 from Alice's clustering, merging "green tea" back into "tea".
    carol_page, problems = open_as(new_page, live_server, carol, url)
    assert "adjudicating" in carol_page.inner_text("#role-line")
    with carol_page.expect_navigation():
        carol_page.locator("#other-clusterings details", has_text="by alice").get_by_text("start from this").click()
    answer(carol_page, "green tea").click()
    carol_page.keyboard.press("m")
    carol_page.keyboard.press(cluster(carol_page, "tea").locator(".cluster-key").inner_text())
    saved(carol_page)
    for qid in ("q2", "q3"):
        carol_page.goto(f"{base}/audits/{campaign.slug}/answers/{qid}/")
        assert "adjudicating" in carol_page.inner_text("#role-line")
        saved(carol_page)
    assert problems == []
    finals = {c.prompt.external_id: c for c in AnswerClustering.objects.filter(campaign=campaign, role="adjudicated")}
    assert set(finals) == {"q1", "q2", "q3"} and all(c.author == carol for c in finals.values())
    assert groups_of(finals["q1"]) == ({"coffee": ["Coffee", "coffee"], "tea": ["green tea", "juice", "tea"]}, ["asdf"])

    # The dashboard moved without a reload: three adjudicated, and the numbers of answers_overview.
    expect(dash.locator("#free-text-progress")).to_contain_text("3 adjudicated", timeout=10_000)
    summary = clustering_selectors.answers_overview(campaign=campaign)["summary"]
    entropy = summary.distribution["entropy_bits"]
    row = dash.locator('#free-text-body tr[data-key="entropy_bits"] td')
    assert row.all_inner_texts() == [
        "3",
        f"{entropy['mean']:.3f}",
        f"{entropy['median']:.3f}",
        f"{entropy['q1']:.3f}–{entropy['q3']:.3f}",
    ]
    divided = dash.locator("#free-text-divided li a").all_inner_texts()
    assert divided == [p for p, _, _ in summary.most_divided]
    dash.screenshot(path=tmp_path / "dashboard.png", full_page=True)
    assert dash_problems == []

    # The researcher uploads a ranked-answers system with samples and reads the leaderboard.
    page.goto(f"{base}/audits/{campaign.slug}/systems/")
    form = page.locator("#upload-form")
    form.locator("input[name=name]").fill("baseline")
    ranked = "".join(json.dumps({qid: answers}) + "\n" for qid, answers in RANKED.items()).encode()
    form.locator("input[name=file]").set_input_files(
        {"name": "ranked.jsonl", "mimeType": "application/json", "buffer": ranked}
    )
    form.locator("input[name=samples]").set_input_files(
        {"name": "samples.json", "mimeType": "application/json", "buffer": json.dumps(SAMPLES).encode()}
    )
    with page.expect_navigation():
        form.locator("button[type=submit]").click()
    system = System.objects.get(campaign=campaign, name="baseline")
    assert (system.predictions, system.samples) == (RANKED, SAMPLES)
    board = leaderboard(campaign=campaign)
    assert board["kind"] == "answers" and board["n_prompts"] == 3
    metrics = board["systems"]["baseline"]["metrics"]
    cells = page.locator('#leaderboard-table tr[data-system="baseline"] td').all_inner_texts()
    assert cells[3:6] == [f"{metrics[m]:.3f}" for m in METRICS[:3]]
    assert cells[6].startswith(f"{metrics['max_answers@10']:.3f} [") and cells[7] == f"{metrics['max_incorrect@1']:.3f}"
    assert cells[10:12] == [f"{metrics['max_answers@None']:.3f}", f"{metrics['set_intersection']:.3f}"]
    assert cells[-1] == f"{metrics['probeval_kl']:.3f}"

    # answers.jsonl and the uploaded files, scored offline, give the page's numbers.
    page.goto(f"{base}/audits/{campaign.slug}/answers/")
    with page.expect_download() as download:
        page.click("text=Adjudicated clusters (ProtoQA JSONL)")
    targets = tmp_path / "answers.jsonl"
    download.value.save_as(targets)
    assert [json.loads(line)["metadata"]["id"] for line in targets.read_text().splitlines()] == ["q1", "q2", "q3"]
    (tmp_path / "ranked.jsonl").write_bytes(ranked)
    (tmp_path / "samples.json").write_text(json.dumps(SAMPLES))
    out = io.StringIO()
    call_command(
        "score_answers",
        str(targets),
        str(tmp_path / "ranked.jsonl"),
        "--samples",
        str(tmp_path / "samples.json"),
        "--format",
        "json",
        stdout=out,
    )
    offline = json.loads(out.getvalue())["metrics"]
    for key in (*METRICS, "probeval_kl"):
        assert offline[key] == pytest.approx(metrics[key], abs=1e-12), key
    # By hand, each top answer's cluster over the largest cluster: q1 coffee 2 of tea's 3, q2 cat 2 of dog's
    # 3, q3 blue 1 of red's 4 (red, red, red, Red).
    assert offline["max_answers@1"] == pytest.approx((2 / 3 + 2 / 3 + 1 / 4) / 3)
