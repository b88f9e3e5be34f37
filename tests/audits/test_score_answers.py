"""ProtoQA scoring (``audits.engine.protoqa_scoring`` and ``manage.py score_answers``).

The exact-match scores are checked against the official evaluator's own output on the dev set
(shared/datasets/protoqa/reference_scores, made with iesl/protoqa-evaluator; see its PROVENANCE.md),
per question and as means, for both released prediction files. KL and the Hungarian assignment are
checked on small hand-worked examples; WordNet matching (skipped when the database is absent) on
hand-checked synonym pairs and on the dev set, where it can only add matches.
"""

from __future__ import annotations

import csv
import doctest
import io
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from scipy.stats import entropy

import audits.engine.protoqa_scoring as protoqa
from audits.engine import wordnet
from audits.engine.protoqa_scoring import (
    RANKED_KEYS,
    ProtoQAFormatError,
    probeval_kl,
    read_answers,
    read_targets,
    score_protoqa,
    score_question,
    wordnet_available,
    wordnet_match,
)

from .conftest import REPO, dataset

PREDICTIONS = {"human": "dev.predictions.human.jsonl", "gpt2finetuned": "dev.predictions.gpt2finetuned.json"}
#: the evaluator's metric names → ours
METRIC_NAMES = {f"Max Answers - {k}": f"max_answers@{k}" for k in (*protoqa.MAX_ANSWERS_K, None)} | {
    f"Max Incorrect - {k}": f"max_incorrect@{k}" for k in (*protoqa.MAX_INCORRECT_K, None)
}
METRIC_NAMES["Set Intersection (exact)"] = "set_intersection"


def needs_wordnet():
    reason = wordnet_available()
    if reason:
        pytest.skip(f"WordNet matching unavailable: {reason}")


@pytest.fixture(scope="module")
def dev_targets():
    return read_targets(dataset("protoqa", "dev", "dev.crowdsourced.jsonl"))


def reference(name: str):
    """The evaluator's per-question scores {(metric, qid): score} and means {metric: mean} for one file."""
    per_q, means = {}, {}
    with open(dataset("protoqa", "reference_scores", "dev_crowdsourced_exact_match_per_question.csv")) as fh:
        for r in csv.DictReader(fh):
            if r["predictions"] == name and r["metric"] in METRIC_NAMES:
                per_q[METRIC_NAMES[r["metric"]], r["question_id"]] = float(r["score"])
    with open(dataset("protoqa", "reference_scores", "dev_crowdsourced_exact_match_means.csv")) as fh:
        for r in csv.DictReader(fh):
            if r["predictions"] == name and r["metric"] in METRIC_NAMES:
                means[METRIC_NAMES[r["metric"]]] = float(r["mean_score_over_52_questions"])
    return per_q, means


def run_command(*args) -> dict:
    out = io.StringIO()
    call_command("score_answers", *map(str, args), "--format", "json", stdout=out, stderr=io.StringIO())
    return json.loads(out.getvalue())


# --- the official evaluator's numbers ---------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PREDICTIONS))
def test_dev_scores_equal_the_official_evaluator(name):
    per_q, means = reference(name)
    assert len(per_q) == 10 * 52 and set(means) == set(RANKED_KEYS)  # all ten official metrics
    result = run_command(
        dataset("protoqa", "dev", "dev.crowdsourced.jsonl"), dataset("protoqa", "dev", PREDICTIONS[name])
    )
    assert result["n_questions"] == 52 and result["matching"] == "exact"
    assert set(result["metrics"]) == set(RANKED_KEYS)
    for (metric, qid), want in per_q.items():
        assert result["questions"][qid][metric] == pytest.approx(want, abs=1e-12), (metric, qid)
    for metric, want in means.items():
        assert result["metrics"][metric] == pytest.approx(want, abs=1e-12), metric


def test_json_output_shape_with_samples(dev_targets):
    # the human answers as "samples" of the GPT-2 system: the keys the brief fixes, one KL per question
    d = dataset("protoqa", "dev")
    result = run_command(
        d / "dev.crowdsourced.jsonl", d / PREDICTIONS["gpt2finetuned"], "--samples", d / PREDICTIONS["human"]
    )
    assert set(result) == {"n_questions", "matching", "metrics", "questions"}
    assert list(result["metrics"]) == [*RANKED_KEYS, "probeval_kl"]
    kls = [q["probeval_kl"] for q in result["questions"].values()]
    assert result["metrics"]["probeval_kl"] == pytest.approx(np.mean(kls))
    samples = read_answers(d / PREDICTIONS["human"])
    q = dev_targets["r1q1"]
    assert kls[0] == pytest.approx(probeval_kl(q.clusters, samples["r1q1"]))


def test_markdown_table(dev_targets):
    d = dataset("protoqa", "dev")
    out = io.StringIO()
    call_command(
        "score_answers",
        str(d / "dev.crowdsourced.jsonl"),
        str(d / PREDICTIONS["human"]),
        "--format",
        "markdown",
        stdout=out,
    )
    text = out.getvalue()
    assert "52 questions, exact matching" in text
    assert "| max_answers@1 | 0.7910 |" in text  # the evaluator's mean 0.79099…


# --- hand-worked examples -------------------------------------------------------------------


def test_hungarian_assignment_beats_greedy():
    # "y" is in both clusters (possible in live data). Greedy by rank gives y→A (5) and nothing for
    # x: 5 of the best 8. The optimal assignment sends y→B (3) and x→A (5): 8 of 8.
    clusters = {"A": (5, ("x", "y")), "B": (3, ("y",))}
    s = score_question(clusters, ["y", "x"])
    assert s["max_answers@1"] == 1.0  # y alone → A: 5 of the top cluster's 5
    assert s["max_answers@3"] == 1.0  # 8 of the two clusters' 8
    assert s["max_incorrect@1"] == 1.0


def test_max_incorrect_stops_at_the_kth_wrong_answer():
    clusters = {"A": (5, ("x",)), "B": (3, ("y",)), "C": (2, ("w",))}
    ranked = [" X ", "z", "y", "q", "w"]  # " X " normalises to "x"; z and q match nothing
    s = score_question(clusters, ranked)
    assert s["max_incorrect@1"] == 0.5  # x, z (1st wrong): 5 of all 10
    assert s["max_incorrect@3"] == 1.0  # only two wrong: all answers count
    assert s["max_answers@1"] == 1.0 and s["max_answers@3"] == 0.8  # x, z, y: 8 of the top three's 10
    # a repeat of a matched cluster does not count as wrong (the evaluator's limit_total_wrong)
    assert score_question(clusters, ["x", "x", "y"])["max_incorrect@1"] == 0.8


def test_no_cut_off_and_set_intersection_hand_worked():
    # Clusters A (5 workers), B (3), C (2), D (1): 11 workers, 4 clusters. The list x, z, q, r, w hits A and C
    # with three wrong answers between them. No cut-off: A + C = 7 of 11, under either name (wrong answers
    # stop nothing); Max Incorrect@1 stops at z: 5 of 11. Set Intersection counts clusters: A and C, 2 of 4.
    clusters = {"A": (5, ("x",)), "B": (3, ("y",)), "C": (2, ("w",)), "D": (1, ("v",))}
    s = score_question(clusters, ["x", "z", "q", "r", "w"])
    assert s["max_answers@None"] == s["max_incorrect@None"] == 7 / 11
    assert s["max_incorrect@1"] == 5 / 11
    assert s["set_intersection"] == 0.5
    # a cluster matched twice counts once: one-to-one assignment
    assert score_question(clusters, ["x", "x"])["set_intersection"] == 0.25


def test_probeval_kl_hand_worked():
    # clusters a (3 workers: "cat") and b (1: "dog"); samples "Cat", "cat" → a, "fish" → unmatched.
    # human + 1 = (4, 2, 1)/7; model + 1 = (2+1, 0+1, 1+1)/6 = (3, 1, 2)/6
    # KL = 4/7 ln((4/7)/(1/2)) + 2/7 ln((2/7)/(1/6)) + 1/7 ln((1/7)/(1/3))
    #    = 0.0763037 + 0.1539990 − 0.1210426 = 0.1092601 nats
    clusters = {"a": (3, ("cat",)), "b": (1, ("dog",))}
    kl = probeval_kl(clusters, ["Cat", "cat", "fish"])
    assert kl == pytest.approx(0.1092601, abs=1e-7)
    assert kl == pytest.approx(entropy([4, 2, 1], [3, 1, 2]))  # scipy normalises and uses nats
    # samples in the crowd's proportions and nothing unmatched: identical distributions, KL = 0
    assert probeval_kl(clusters, ["cat", "cat", "cat", "dog"]) == pytest.approx(0.0, abs=1e-15)
    # no samples: the uniform model (1, 1, 1)/3
    assert probeval_kl(clusters, []) == pytest.approx(entropy([4, 2, 1], [1, 1, 1]))


def test_missing_predictions_are_scored_empty(tmp_path):
    targets = tmp_path / "t.jsonl"
    rows = [
        {"metadata": {"id": qid}, "question": {"normalized": "q"}, "answers": {"raw": {}, "clusters": clusters}}
        for qid, clusters in [
            ("q1", {"q1.0": {"count": 4, "answers": ["x"]}}),
            ("q2", {"q2.0": {"count": 1, "answers": ["y"]}}),
        ]
    ]
    targets.write_text("".join(json.dumps(r) + "\n" for r in rows))
    preds = tmp_path / "p.json"
    preds.write_text(json.dumps({"q1": ["x"]}))
    err = io.StringIO()
    out = io.StringIO()
    call_command("score_answers", str(targets), str(preds), stdout=out, stderr=err)
    result = json.loads(out.getvalue())
    assert result["questions"]["q2"]["max_answers@1"] == 0.0 and result["metrics"]["max_answers@1"] == 0.5
    assert "1 of 2 questions have no predictions" in err.getvalue()


def test_engine_doctests():
    result = doctest.testmod(protoqa, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


# --- malformed input --------------------------------------------------------------------------


def target_line(qid="q1", **over) -> str:
    obj = {
        "metadata": {"id": qid},
        "question": {"normalized": "name a pet."},
        "answers": {"raw": {"cat": 3}, "clusters": {f"{qid}.0": {"count": 3, "answers": ["cat"]}}},
    }
    obj.update(over)
    return json.dumps(obj)


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([target_line(), '{"metadata": '], r"t.jsonl line 2: bad JSON"),
        ([target_line(), target_line("q2", metadata={})], r"line 2: missing metadata.id"),
        ([target_line(answers={"raw": {}})], r"line 1: missing answers.clusters"),
        ([target_line(answers={"clusters": {"c": {"count": "3", "answers": ["cat"]}}})], r"line 1: cluster 'c': count"),
        ([target_line(answers={"clusters": {"c": {"count": 3, "answers": "cat"}}})], r"line 1: cluster 'c': answers"),
        ([target_line(), target_line()], r"line 2: question id 'q1' repeats"),
        (["[1, 2]"], r"line 1: expected a JSON object"),
    ],
)
def test_malformed_targets(tmp_path, lines, message):
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ProtoQAFormatError, match=message):
        read_targets(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"q1": ["cat"]}\n{"q2": ["dog"\n', r"p.jsonl line 2: bad JSON"),
        ('{"q1": ["cat"]}\n\n{"q9": ["dog"]}\n', r"line 3: question id 'q9' is not in the targets"),
        ('{"q1": "cat"}\n', r"line 1: question 'q1': answers must be a list of strings"),
        ('{"q1": ["cat", null]}\n', r"line 1: question 'q1': answers must be a list"),
        ('{"q1": ["cat"]}\n{"q1": ["dog"]}\n', r"line 2: question id 'q1' appears twice"),
        ('["cat"]\n', r"line 1: expected a JSON object"),
        ('{\n  "q1": ["cat"],\n  "q2": ["dog" "x"]\n}\n', r"line 3: bad JSON"),  # a broken pretty-printed object
    ],
)
def test_malformed_predictions(tmp_path, text, message):
    path = tmp_path / "p.jsonl"
    path.write_text(text)
    with pytest.raises(ProtoQAFormatError, match=message):
        read_answers(path, known_ids={"q1", "q2"})


def test_prediction_shapes_read_alike(tmp_path):
    want = {"q1": ["cat", "dog"], "q2": []}
    shapes = {
        "one.json": json.dumps(want),
        "pretty.json": json.dumps(want, indent=2),
        "lines.jsonl": '{"q1": ["cat", "dog"]}\n{"q2": []}\n',
        "evaluator.jsonl": '{"question_id": "q1", "ranked_answers": ["cat", "dog"]}\n{"q2": []}\n',
    }
    for name, text in shapes.items():
        (tmp_path / name).write_text(text)
        assert read_answers(tmp_path / name, known_ids=want) == want, name


def test_command_error_is_one_line_with_exit_code_2(tmp_path):
    targets = tmp_path / "t.jsonl"
    targets.write_text(target_line() + "\n")
    preds = tmp_path / "p.jsonl"
    preds.write_text('{"q1": ["cat"]}\n{"zz": ["dog"]}\n')
    with pytest.raises(CommandError, match=r"p.jsonl line 2: question id 'zz' is not in the targets") as exc:
        call_command("score_answers", str(targets), str(preds))
    assert exc.value.returncode == 2
    # through manage.py: one line on stderr, no traceback
    env = {**os.environ, "CHORUS_VAR_DIR": os.environ.get("CHORUS_VAR_DIR", str(tmp_path / "var"))}
    proc = subprocess.run(
        [sys.executable, "manage.py", "score_answers", str(targets), str(preds)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["CommandError: p.jsonl line 2: question id 'zz' is not in the targets"]


def test_wordnet_absent_is_an_error_not_a_fallback(tmp_path, monkeypatch, request):
    monkeypatch.setenv("CHORUS_WORDNET_DIR", str(tmp_path / "no-wordnet"))
    wordnet.reader.cache_clear()
    request.addfinalizer(wordnet.reader.cache_clear)
    assert "WordNet database not found" in wordnet_available()
    targets = tmp_path / "t.jsonl"
    targets.write_text(target_line() + "\n")
    with pytest.raises(CommandError, match="WordNet database not found") as exc:
        call_command("score_answers", str(targets), str(targets), "--matching", "wordnet")
    assert exc.value.returncode == 2


# --- WordNet matching -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "target", "agree"),
    [
        ("car", "automobile", True),  # synset car.n.01
        ("kid", "child", True),  # child.n.01
        ("their age", "age", True),  # "their" is a stop word
        ("mobile phone", "cellphone", True),  # the collocation mobile_phone: cellular_telephone.n.01
        ("hot dog", "frankfurter", True),  # hotdog.n.02 via the collocation hot_dog
        ("the movies", "film", True),  # "movies" → movie (morphy) → movie.n.01, with film
        ("car", "banana", False),
        ("birthday date", "birthday", False),  # one of two parts: 0.5 rounds (half to even) to 0
    ],
)
def test_wordnet_hand_checked_pairs(answer, target, agree):
    needs_wordnet()
    assert wordnet_match(answer, target) is agree


def test_wordnet_scores_a_synonym_that_exact_matching_misses():
    needs_wordnet()
    clusters = {"c0": (6, ("car", "truck")), "c1": (4, ("bike",))}
    assert score_question(clusters, ["automobile"])["max_answers@1"] == 0.0
    assert score_question(clusters, ["automobile"], matching="wordnet")["max_answers@1"] == 1.0


@pytest.mark.parametrize("name", sorted(PREDICTIONS))
def test_wordnet_never_below_exact_on_dev(dev_targets, name):
    needs_wordnet()
    preds = read_answers(dataset("protoqa", "dev", PREDICTIONS[name]), known_ids=dev_targets)
    exact = score_protoqa(dev_targets, preds)
    wordnet = score_protoqa(dev_targets, preds, matching="wordnet")
    assert wordnet["matching"] == "wordnet"
    for qid, scores in exact["questions"].items():
        for key, value in scores.items():
            assert wordnet["questions"][qid][key] >= value - 1e-12, (qid, key)
    # and it does match more: every mean rises
    assert all(wordnet["metrics"][k] > exact["metrics"][k] for k in RANKED_KEYS)
    assert not any(math.isnan(v) for v in wordnet["metrics"].values())
