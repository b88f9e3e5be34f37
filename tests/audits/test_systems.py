"""Systems scored against the crowd: per-rater accuracy or Spearman, paired t-tests, per-partition
and per-group tables with intervals (``audits.engine.systems``, ``compare_systems``)."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from django.core.management import call_command
from scipy import stats

from audits.engine import LabelMatrix, compare_systems, read_labels
from audits.engine.systems import grouped_spearman, per_rater_scores, prediction_metric, system_scores

from .conftest import wordsim_labels


def ratings_matrix(seed=0, n_raters=8, n_items=40):
    """Integer ratings 0-10 (many ties), each rater on a random 60 % of the items."""
    rng = np.random.default_rng(seed)
    truth = rng.uniform(0, 10, n_items)
    w, p, v = [], [], []
    for r in range(n_raters):
        for j in np.flatnonzero(rng.random(n_items) < 0.6):
            w.append(f"r{r}")
            p.append(f"i{j}")
            v.append(float(np.clip(np.round(truth[j] + rng.normal(0, 2)), 0, 10)))
    return LabelMatrix.from_triples(w, p, v, rescale=(0, 10)), truth


def test_grouped_spearman_equals_scipy_with_ties():
    rng = np.random.default_rng(3)
    g = rng.integers(0, 7, 400)
    x, y = rng.integers(0, 5, 400).astype(float), rng.integers(0, 4, 400).astype(float)
    rho, n = grouped_spearman(g, x, y, 8)
    for k in range(7):
        assert rho[k] == pytest.approx(stats.spearmanr(x[g == k], y[g == k]).statistic, abs=1e-12)
        assert n[k] == (g == k).sum()
    assert np.isnan(rho[7]) and n[7] == 0


def per_rater_reference(m, preds):
    """Per rater, scipy's Spearman between the system's scores and the rater's raw ratings."""
    out = {}
    for i, wid in enumerate(m.worker_ids):
        sel = m.worker == i
        x = [preds[m.prompt_ids[j]] for j in m.prompt[sel]]
        out[wid] = stats.spearmanr(x, m.raw[sel]).statistic
    return out


def test_per_rater_spearman_and_paired_test_equal_scipy():
    m, truth = ratings_matrix()
    rng = np.random.default_rng(1)
    a = {f"i{j}": float(t + rng.normal(0, 1)) for j, t in enumerate(truth)}
    b = {f"i{j}": float(t + rng.normal(0, 4)) for j, t in enumerate(truth)}
    assert prediction_metric(m, a, b) == "spearman"
    scored = per_rater_scores(m, a, b)
    ref_a, ref_b = per_rater_reference(m, a), per_rater_reference(m, b)
    np.testing.assert_allclose(scored.scores[0], [ref_a[w] for w in m.worker_ids], atol=1e-12)
    np.testing.assert_allclose(scored.scores[1], [ref_b[w] for w in m.worker_ids], atol=1e-12)
    res = compare_systems(m, a, b)
    ref = stats.ttest_rel([ref_a[w] for w in m.worker_ids], [ref_b[w] for w in m.worker_ids])
    assert res.metric == "spearman" and res.n_raters == m.n_workers and res.df == m.n_workers - 1
    assert res.t == pytest.approx(ref.statistic, rel=1e-10) and res.p == pytest.approx(ref.pvalue, rel=1e-10)
    s = res.summary_a
    vals = [ref_a[w] for w in m.worker_ids]
    assert (s["min"], s["max"]) == pytest.approx((min(vals), max(vals)))
    assert (s["mean"], s["sd"]) == pytest.approx((np.mean(vals), np.std(vals, ddof=1)))


def test_accuracy_per_rater_and_paired_test_equal_scipy():
    rng = np.random.default_rng(5)
    w = np.repeat(np.arange(12), 30)
    p = np.tile(np.arange(30), 12)
    v = (rng.random(w.size) < 0.6).astype(int)
    m = LabelMatrix.from_triples(w, p, v)
    a = {j: int(rng.random() < 0.8) for j in range(30)}
    b = {j: int(rng.random() < 0.3) for j in range(30)}
    assert prediction_metric(m, a, b) == "accuracy"
    res = compare_systems(m, a, b)
    sa = [np.mean([v[k] == a[p[k]] for k in np.flatnonzero(w == r)]) for r in range(12)]
    sb = [np.mean([v[k] == b[p[k]] for k in np.flatnonzero(w == r)]) for r in range(12)]
    ref = stats.ttest_rel(sa, sb)
    assert res.metric == "accuracy"
    assert res.t == pytest.approx(ref.statistic) and res.p == pytest.approx(ref.pvalue)
    assert [r["score_a"] for r in res.per_rater] == pytest.approx(sa)
    # the least significant difference is where the paired test turns significant
    d = np.subtract(sa, sb)
    t_at = res.resolution / (d.std(ddof=1) / np.sqrt(12))
    assert 2 * stats.t.sf(t_at, 11) == pytest.approx(0.05)


def test_metric_follows_the_schema_and_the_predictions():
    binary = LabelMatrix.from_triples(["a", "b", "a", "b"], [1, 1, 2, 2], [1, 0, 1, 1])
    assert prediction_metric(binary, {1: 1, 2: 0}) == "accuracy"
    assert prediction_metric(binary, {1: 0.8, 2: 0.1}) == "spearman"  # graded scores
    rated = LabelMatrix.from_triples(["a", "b", "a", "b"], [1, 1, 2, 2], [1, 4, 3, 2], binarize="1:0,2:0,3:1,4:1")
    assert prediction_metric(rated, {1: 4, 2: 1}) == "accuracy"  # in the schema: scored binarized
    assert prediction_metric(rated, {1: 3.7, 2: 1.2}) == "spearman"
    cats = LabelMatrix.from_triples(["a", "b"], [1, 1], ["yes!", "no!"], binarize={"yes!": 1, "no!": 0})
    with pytest.raises(ValueError, match="predictions"):
        prediction_metric(cats, {1: 0.4})


def test_identical_systems_cannot_be_told_apart():
    m, truth = ratings_matrix(seed=2)
    a = {f"i{j}": float(t) for j, t in enumerate(truth)}
    res = compare_systems(m, a, dict(a))
    assert res.distinguishable is False and res.verdict.startswith("cannot tell A and B apart")


# --------------------------------------------------------------------------------------- WordSim-353
def test_wordsim353_per_rater_spearman_ranks_the_systems_the_right_way(tmp_path):
    """The mean rating plus small noise is the better system; exact matches called it the worse one."""
    labels = wordsim_labels(tmp_path)
    m = read_labels(labels, rescale=(0, 10))
    means = np.bincount(m.prompt, weights=m.raw) / m.prompt_counts
    rng = np.random.default_rng(0)
    good = {pid: round(float(x + rng.normal(0, 0.5)), 2) for pid, x in zip(m.prompt_ids, means)}
    poor = {pid: round(float(x + rng.normal(0, 3.0)), 2) for pid, x in zip(m.prompt_ids, means)}
    for name, preds in (("good", good), ("poor", poor)):
        write = [(k, v) for k, v in preds.items()]
        with open(tmp_path / f"{name}.csv", "w", newline="") as fh:
            csv.writer(fh).writerows([("prompt", "prediction"), *write])
    out = io.StringIO()
    call_command(
        "audit",
        str(labels),
        "--rescale",
        "0:10",
        "--predictions",
        str(tmp_path / "poor.csv"),
        "--predictions-b",
        str(tmp_path / "good.csv"),
        "--sweep",
        "none",
        "--no-per-worker",
        "--no-agreement",
        "--bootstrap",
        "0",
        stdout=out,
    )
    r = json.loads(out.getvalue())
    sy = r["systems"]
    assert sy["metric"] == "spearman" and sy["n_raters"] == 29
    assert sy["mean_b"] > sy["mean_a"] and sy["p"] < 0.001 and sy["distinguishable"] is True
    assert "separates A and B: B scores higher" in sy["verdict"]
    ref = per_rater_reference(m, poor)
    for row in sy["per_rater"]:
        assert row["score_a"] == pytest.approx(ref[row["worker"]], abs=1e-12)
    assert r["system_scores"]["b"]["overall"]["mean"]["score"] > r["system_scores"]["a"]["overall"]["mean"]["score"]
    assert r["resolution"]["systems"]["paired"] is True and "intervals" not in r


# --------------------------------------------------------------------------------------- ComVE partitions
def naive_table(m, preds, k=5):
    """Per partition: accuracy against the modal label and gold, Wilson intervals, pooled z-tests."""
    by_prompt: dict = {}
    for j, v in zip(m.prompt.tolist(), m.value.tolist()):
        by_prompt.setdefault(j, []).append(v)
    rows: dict = {}
    for j, vals in by_prompt.items():
        pid = m.prompt_ids[j]
        if len(vals) != k or pid not in preds:
            continue
        ones = sum(vals)
        d = int(min(ones, k - ones))
        row = rows.setdefault(d, {"modal": [0, 0], "gold": [0, 0]})
        if ones * 2 != k:
            row["modal"][0] += preds[pid] == (1.0 if ones * 2 > k else 0.0)
            row["modal"][1] += 1
        if not np.isnan(m.gold[j]):
            row["gold"][0] += preds[pid] == m.gold[j]
            row["gold"][1] += 1
    return rows


def z_pooled(x1, n1, x2, n2):
    pool = (x1 + x2) / (n1 + n2)
    z = (x1 / n1 - x2 / n2) / np.sqrt(pool * (1 - pool) * (1 / n1 + 1 / n2))
    return z, 2 * stats.norm.sf(abs(z))


def test_comve_partition_table_equals_a_naive_reimplementation(comve_labels, comve_gold):
    m = read_labels(comve_labels, gold=comve_gold)
    rng = np.random.default_rng(7)
    # a synthetic system: gold where there is gold, flipped on 15 % of prompts; else a coin
    preds = {}
    for j, pid in enumerate(m.prompt_ids):
        g = m.gold[j]
        guess = float(rng.random() < 0.5) if np.isnan(g) else g
        preds[pid] = 1.0 - guess if rng.random() < 0.15 else guess
    table = system_scores(m, preds, k=5)
    naive = naive_table(m, preds)
    assert table["metric"] == "accuracy" and table["k"] == 5
    assert set(table["partitions"]) == {"0", "1", "2"}
    for d, row in naive.items():
        got = table["partitions"][str(d)]
        for ref in ("modal", "gold"):
            x, n = row[ref]
            assert (got[ref]["correct"], got[ref]["n"]) == (x, n)
            assert got[ref]["score"] == pytest.approx(x / n)
            ci = stats.binomtest(int(x), n).proportion_ci(0.95, method="wilson")
            assert got[ref]["ci_wilson"] == pytest.approx([ci.low, ci.high], abs=1e-12)
            half = stats.norm.ppf(0.975) * np.sqrt(x / n * (1 - x / n) / n)
            assert got[ref]["ci_normal"] == pytest.approx([x / n - half, x / n + half], abs=1e-12)
    for t in table["tests"]:
        (x1, n1), (x2, n2) = naive[int(t["a"])][t["reference"]], naive[int(t["b"])][t["reference"]]
        z, p = z_pooled(x1, n1, x2, n2)
        assert (t["z"], t["p"]) == pytest.approx((z, p), rel=1e-9)
    assert len(table["tests"]) == 6 and table["groups"] is None
    # the study's finding: a system is right far more often on unanimous prompts than on noisy ones
    assert table["partitions"]["0"]["modal"]["score"] > table["partitions"]["2"]["modal"]["score"]


def test_scores_per_group():
    w = ["a", "b", "c"] * 4
    p = [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]
    v = [1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 1, 1]
    g = ["x"] * 6 + ["y"] * 6
    m = LabelMatrix.from_triples(w, p, v, group=g, gold={1: 1, 2: 0, 3: 0, 4: 1})
    t = system_scores(m, {1: 1, 2: 1, 3: 1, 4: 1})
    assert t["groups"]["x"]["modal"]["correct"] == 1 and t["groups"]["x"]["modal"]["n"] == 2
    assert t["groups"]["y"]["modal"]["correct"] == 2 and t["groups"]["y"]["gold"]["correct"] == 1
    assert t["overall"]["gold"]["n"] == 4 and t["overall"]["gold"]["correct"] == 2
