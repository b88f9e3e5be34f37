"""Free-text systems on a live campaign (issue 14, "Scoring systems"): ranked answer lists and samples
uploaded in the browser and the API, scored against the campaign's final answer clusters as ProtoQA's
evaluator scores them. ProtoQA's dev set, imported with its expert clusters, gives the official
reference scores through the product's path: import → clusters → leaderboard."""

import csv
import json

import pytest

from audits.engine.protoqa_scoring import read_answers, read_targets, score_protoqa
from audits.models import System
from audits.selectors import systems as selectors
from audits.services import systems as services
from tests.audits.conftest import dataset
from tests.audits.live.free_text import protoqa_dev_campaign
from tests.helpers import signed_in

pytestmark = pytest.mark.django_db

DEV = ("protoqa", "dev")


@pytest.fixture
def dev_campaign(researcher):
    return protoqa_dev_campaign(researcher, experts=True)


def reference_means(name: str) -> dict:
    path = dataset("protoqa", "reference_scores", "dev_crowdsourced_exact_match_means.csv")
    with open(path, encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["predictions"] == name]
    assert len(rows) == 10, rows  # ProtoQA's ten official metrics
    names = {"Max Answers - ": "max_answers@", "Max Incorrect - ": "max_incorrect@"}
    names["Set Intersection (exact)"] = "set_intersection"
    out = {}
    for r in rows:
        key = r["metric"]
        for official, ours in names.items():
            key = key.replace(official, ours)
        out[key] = float(r["mean_score_over_52_questions"])
    return out


def test_the_leaderboard_gives_the_official_scores_of_both_dev_files(dev_campaign, researcher):
    campaign, _ = dev_campaign
    files = {"human": "dev.predictions.human.jsonl", "gpt2finetuned": "dev.predictions.gpt2finetuned.json"}
    for name, filename in files.items():
        path = dataset(*DEV, filename)
        services.system_upload(campaign=campaign, name=name, data=path.read_bytes(), filename=filename, by=researcher)
    board = selectors.leaderboard(campaign=campaign)
    assert board["kind"] == "answers" and board["reason"] is None and board["n_prompts"] == 52
    assert board["ranking"] == ["human", "gpt2finetuned"]
    for name in files:
        metrics = board["systems"][name]["metrics"]
        for key, value in reference_means(name).items():
            assert metrics[key] == pytest.approx(value, abs=1e-12), (name, key)
    [pair] = board["pairs"]
    assert pair["across_prompts"]["distinguishable"] is True
    assert pair["across_prompts"]["p"] < 0.001
    assert pair["across_prompts"]["verdict"].startswith("the instrument separates human and gpt2finetuned")


def test_samples_add_probeval_kl_equal_to_the_offline_scorer(dev_campaign, researcher, tmp_path):
    campaign, path = dev_campaign
    ranked = dataset(*DEV, "dev.predictions.human.jsonl")
    # A system's "samples": its ranked list with the first answer repeated three times.
    samples = {qid: [answers[0]] * 3 + answers for qid, answers in read_answers(ranked).items() if answers}
    services.system_upload(
        campaign=campaign,
        name="sampler",
        data=ranked.read_bytes(),
        filename=ranked.name,
        by=researcher,
        samples=json.dumps(samples).encode(),
        samples_filename="samples.json",
    )
    board = selectors.leaderboard(campaign=campaign)
    offline = score_protoqa(read_targets(path), read_answers(ranked), samples)
    assert board["systems"]["sampler"]["metrics"]["probeval_kl"] == pytest.approx(
        offline["metrics"]["probeval_kl"], abs=1e-12
    )


def test_bad_answer_files_are_refused_by_line_and_nothing_is_written(dev_campaign, researcher):
    campaign, _ = dev_campaign
    cases = {
        b'{"r1q1": ["a"]}\n{"nope": ["b"]}\n': "line 2: question id 'nope' is not in the targets",
        b'{"r1q1": "shower"}\n': "line 1: question 'r1q1': answers must be a list of strings",
        b'{"r1q1": ["a"]}\n{broken\n': "line 2: bad JSON",
        b"\xff\xfe": "not UTF-8",
    }
    for data, message in cases.items():
        with pytest.raises(Exception) as excinfo:
            services.system_upload(campaign=campaign, name="bad", data=data, filename="bad.jsonl", by=researcher)
        text = " ".join(excinfo.value.messages)
        assert "Nothing was uploaded" in text and message in text, (data, text)
    with pytest.raises(Exception) as excinfo:
        services.system_upload(
            campaign=campaign,
            name="bad",
            data=b'{"r1q1": ["a"]}',
            filename="ok.json",
            by=researcher,
            samples=b'{"r1q1": ["a"]}\n{"zzz": ["b"]}',
            samples_filename="s.jsonl",
        )
    assert "samples" in excinfo.value.message_dict
    assert not System.objects.filter(campaign=campaign).exists()


def test_page_and_api_take_ranked_lists_and_samples(dev_campaign, researcher):
    campaign, _ = dev_campaign
    client = signed_in(researcher)
    ranked = dataset(*DEV, "dev.predictions.human.jsonl")
    with open(ranked, "rb") as fh:
        response = client.post(f"/audits/{campaign.slug}/systems/", {"name": "human", "file": fh})
    assert response.status_code == 302
    page = client.get(f"/audits/{campaign.slug}/systems/").content.decode()
    assert 'id="leaderboard-table"' in page and "Max Answers@1" in page and "0.791" in page
    body = {"name": "api", "predictions": {"r1q1": ["shower", "eat breakfast"]}, "samples": {"r1q1": ["shower"]}}
    response = client.post(f"/api/v1/campaigns/{campaign.slug}/systems/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    stored = System.objects.get(campaign=campaign, name="api")
    assert stored.predictions == {"r1q1": ["shower", "eat breakfast"]} and stored.samples == {"r1q1": ["shower"]}
    bad = {"name": "api2", "predictions": {"r1q1": ["x"], "r9q9": ["y"]}}
    response = client.post(f"/api/v1/campaigns/{campaign.slug}/systems/", bad, content_type="application/json")
    assert response.status_code == 400
    assert "r9q9" in json.dumps(response.json()["error"]["fields"]["predictions"])
