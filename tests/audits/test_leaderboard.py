"""Several systems on one label matrix (``audits.engine.leaderboard``): scores, ranking, and every
pair's tests across raters (paired t) and across prompts (exact McNemar, paired bootstrap of the
Spearman difference), checked against scipy and by hand; WordSim-353 ranks two graded systems."""

from __future__ import annotations

import doctest
import json

import numpy as np
import pytest
from scipy import stats

from audits.engine import LabelMatrix, read_labels
from audits.engine import leaderboard as leaderboard_module
from audits.engine.leaderboard import bootstrap_spearman_difference, leaderboard, mcnemar_exact
from audits.engine.partitions import modal_labels

from .conftest import wordsim_labels


def binary_matrix(seed=0, n_raters=9, n_items=60, flip=0.2):
    """Binary labels: each rater labels a random 70 % of the items, flipping the truth with ``flip``."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n_items)
    w, p, v = [], [], []
    for r in range(n_raters):
        for j in np.flatnonzero(rng.random(n_items) < 0.7):
            w.append(f"r{r}")
            p.append(f"i{j}")
            v.append(int(truth[j] if rng.random() > flip else 1 - truth[j]))
    gold = {f"i{j}": int(truth[j]) for j in range(0, n_items, 2)}
    return LabelMatrix.from_triples(w, p, v, gold=gold), truth


def system(truth, accuracy, seed):
    rng = np.random.default_rng(seed)
    return {f"i{j}": int(t if rng.random() < accuracy else 1 - t) for j, t in enumerate(truth)}


def test_mcnemar_equals_a_hand_computation():
    a = np.array([1, 1, 1, 1, 0, 1, 0, 1, 1, 0, 1, 1], bool)
    b = np.array([1, 0, 0, 1, 0, 0, 1, 0, 1, 0, 0, 1], bool)
    # discordant: A alone right on prompts 1, 2, 5, 7, 10 (5); B alone right on prompt 6 (1)
    r = mcnemar_exact(a, b)
    assert (r["only_a"], r["only_b"], r["n"]) == (5, 1, 12)
    # two-sided exact binomial: 2 · P(X ≤ 1 | n = 6, ½) = 2 · 7/64
    assert r["p"] == pytest.approx(14 / 64) == stats.binomtest(5, 6, 0.5).pvalue
    assert r["distinguishable"] is False
    assert mcnemar_exact(a, a)["p"] == 1.0


def test_accuracy_pairs_equal_scipy_and_a_naive_count():
    m, truth = binary_matrix()
    systems = {"strong": system(truth, 0.95, 1), "weak": system(truth, 0.6, 2), "same": system(truth, 0.95, 1)}
    board = leaderboard(m, systems)
    json.dumps(board, allow_nan=False)
    assert board["metric"] == "accuracy" and board["ranking"][-1] == "weak"
    assert board["systems"]["strong"]["rank"] == board["systems"]["same"]["rank"] == 1
    modal = dict(zip(m.prompt_ids.tolist(), modal_labels(m).tolist()))
    ids = [pid for pid, v in modal.items() if not np.isnan(v)]
    pair = next(p for p in board["pairs"] if {p["a"], p["b"]} == {"strong", "weak"})
    right = {n: np.array([systems[n][i] == modal[i] for i in ids]) for n in ("strong", "weak")}
    a, b = (right[pair["a"]], right[pair["b"]])
    only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
    prompts = pair["across_prompts"]
    assert (prompts["only_a"], prompts["only_b"]) == (only_a, only_b)
    assert prompts["p"] == pytest.approx(stats.binomtest(only_a, only_a + only_b, 0.5).pvalue, rel=1e-12)
    assert prompts["verdict"].startswith(
        "the instrument separates strong and weak: strong scores higher (exact McNemar"
    )

    # per rater, by hand: the share of the rater's labels the system matches
    per = {n: {} for n in systems}
    for w in m.worker_ids.tolist():
        mine = m.worker_ids[m.worker] == w
        labels = dict(zip(m.prompt_ids[m.prompt[mine]].tolist(), m.value[mine].tolist()))
        for n in systems:
            per[n][w] = np.mean([systems[n][i] == v for i, v in labels.items()])
    for n in systems:
        assert board["systems"][n]["per_rater_scores"] == pytest.approx(per[n], rel=1e-12)
        s = np.array(list(per[n].values()))
        summary = board["systems"][n]["per_rater"]
        assert (summary["min"], summary["max"]) == (s.min(), s.max())
        assert summary["mean"] == pytest.approx(s.mean()) and summary["sd"] == pytest.approx(s.std(ddof=1))
    workers = sorted(per["strong"])
    t = stats.ttest_rel([per[pair["a"]][w] for w in workers], [per[pair["b"]][w] for w in workers])
    raters = pair["across_raters"]
    assert raters["t"] == pytest.approx(t.statistic, rel=1e-12) and raters["p"] == pytest.approx(t.pvalue, rel=1e-12)
    twins = next(p for p in board["pairs"] if {p["a"], p["b"]} == {"strong", "same"})
    assert twins["across_prompts"]["p"] == 1.0
    assert twins["across_prompts"]["verdict"].startswith("cannot tell")
    assert (twins["a"], twins["b"]) == ("same", "strong")  # equal scores rank by name
    assert twins["across_raters"]["verdict"] == (
        "cannot tell same and strong apart at this resolution: they score the same (paired t-test across raters)"
    )


def test_alternative_truths_are_scored_like_gold():
    m, truth = binary_matrix(seed=3)
    s = system(truth, 0.8, 4)
    flipped = {pid: 1 - int(truth[int(pid[1:])]) for pid in m.prompt_ids.tolist()}
    board = leaderboard(m, {"s": s}, truths={"anti": flipped})
    cell = board["systems"]["s"]["truths"]["anti"]
    agree = [s[pid] == flipped[pid] for pid in m.prompt_ids.tolist()]
    assert (cell["n"], cell["correct"]) == (len(agree), sum(agree))
    lo, hi = cell["ci_wilson"]
    assert lo < cell["score"] < hi


def graded_matrix(seed=0, n_raters=8, n_items=50):
    rng = np.random.default_rng(seed)
    truth = rng.uniform(0, 10, n_items)
    w, p, v = [], [], []
    for r in range(n_raters):
        for j in np.flatnonzero(rng.random(n_items) < 0.8):
            w.append(f"r{r}")
            p.append(f"i{j}")
            v.append(float(np.clip(np.round(truth[j] + rng.normal(0, 2)), 0, 10)))
    return LabelMatrix.from_triples(w, p, v, rescale=(0, 10)), truth


def test_per_rater_spearman_equals_scipy_per_rater():
    m, truth = graded_matrix()
    rng = np.random.default_rng(7)
    systems = {
        n: {f"i{j}": float(t + rng.normal(0, sd)) for j, t in enumerate(truth)} for n, sd in (("a", 1), ("b", 4))
    }
    board = leaderboard(m, systems)
    assert board["metric"] == "spearman" and board["reference"] == "mean"
    for n in systems:
        for w, rho in board["systems"][n]["per_rater_scores"].items():
            mine = m.worker_ids[m.worker] == w
            ids = m.prompt_ids[m.prompt[mine]].tolist()
            expected = stats.spearmanr([systems[n][i] for i in ids], m.raw[mine]).statistic
            assert rho == pytest.approx(expected, abs=1e-12)


def test_bootstrap_equals_scipy_on_each_resample():
    rng = np.random.default_rng(11)
    ref = np.round(rng.uniform(0, 5, 40))  # ties in the reference
    a, b = ref + rng.normal(0, 1, 40), np.round(ref + rng.normal(0, 2, 40))
    r = bootstrap_spearman_difference(a, b, ref, resamples=200, seed=5)
    idx = np.random.default_rng(5).integers(0, 40, size=(200, 40))
    diffs = np.array([stats.spearmanr(a[i], ref[i]).statistic - stats.spearmanr(b[i], ref[i]).statistic for i in idx])
    naive_p = min(1.0, 2 * min((1 + (diffs <= 0).sum()) / 201, (1 + (diffs >= 0).sum()) / 201))
    assert r["p"] == pytest.approx(naive_p) and r["ci"] == pytest.approx(np.quantile(diffs, [0.025, 0.975]).tolist())
    observed = stats.spearmanr(a, ref).statistic - stats.spearmanr(b, ref).statistic
    assert r["difference"] == pytest.approx(observed, abs=1e-12)
    assert bootstrap_spearman_difference(a[:3], b[:3], ref[:3])["p"] is None


def test_wordsim353_the_better_graded_system_wins(tmp_path):
    m = read_labels(wordsim_labels(tmp_path), rescale=(0, 10))
    means = np.bincount(m.prompt, weights=m.raw) / m.prompt_counts
    rng = np.random.default_rng(0)
    good = {pid: round(float(x + rng.normal(0, 0.5)), 2) for pid, x in zip(m.prompt_ids, means)}
    poor = {pid: round(float(x + rng.normal(0, 3.0)), 2) for pid, x in zip(m.prompt_ids, means)}
    board = leaderboard(m, {"poor": poor, "good": good})
    assert board["metric"] == "spearman" and board["ranking"] == ["good", "poor"]
    good_rho = board["systems"]["good"]["overall"]["mean"]["score"]
    assert good_rho == pytest.approx(stats.spearmanr([good[p] for p in m.prompt_ids], means).statistic, abs=1e-12)
    (pair,) = board["pairs"]
    assert (pair["a"], pair["b"]) == ("good", "poor")
    assert pair["across_raters"]["verdict"].startswith("the instrument separates good and poor: good scores higher")
    assert pair["across_prompts"]["verdict"].startswith("the instrument separates good and poor: good scores higher")
    assert pair["across_prompts"]["difference"] > 0 and pair["across_prompts"]["ci"][0] > 0


def test_no_systems_and_an_unscored_system():
    m, truth = binary_matrix()
    assert leaderboard(m, {})["ranking"] == []
    board = leaderboard(m, {"s": system(truth, 0.9, 1), "elsewhere": {"zz": 1}})
    assert board["ranking"] == ["s", "elsewhere"] and board["systems"]["elsewhere"]["rank"] is None
    assert board["pairs"][0]["across_prompts"]["verdict"].startswith("cannot tell")  # no common prompt: p = 1


def test_docstring_examples():
    result = doctest.testmod(leaderboard_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


def test_graded_systems_are_ranked_against_a_truths_raw_ratings():
    m, truth = graded_matrix(seed=2)
    rng = np.random.default_rng(3)
    s = {f"i{j}": float(t + rng.normal(0, 1)) for j, t in enumerate(truth)}
    rounded = {f"i{j}": int(np.clip(np.round(t), 0, 10)) for j, t in enumerate(truth)}
    cell = leaderboard(m, {"s": s}, truths={"rounded": rounded})["systems"]["s"]["truths"]["rounded"]
    ids = [p for p in m.prompt_ids.tolist()]
    expected = stats.spearmanr([s[p] for p in ids], [rounded[p] for p in ids]).statistic
    assert cell["n"] == len(ids) and cell["score"] == pytest.approx(expected, abs=1e-12)
