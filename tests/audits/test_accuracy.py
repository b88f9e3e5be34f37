"""Leave-one-out and gold accuracy, confidence intervals, noise-accuracy regression."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from audits import (
    LabelMatrix,
    gold_accuracy,
    least_squares,
    loo_accuracy,
    noise_accuracy_regression,
    normal_interval,
    wilson_interval,
    worker_noise,
)
from audits.engine.accuracy import Regression


@pytest.mark.parametrize("k, n", [(0, 1), (1, 1), (7, 10), (59, 60), (60, 60), (3, 250), (0, 5), (123, 200)])
def test_wilson_interval_matches_scipy_binomtest(k, n):
    lo, hi = wilson_interval(k, n)
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert lo == pytest.approx(ci.low, abs=1e-12) and hi == pytest.approx(ci.high, abs=1e-12)


def test_wilson_vectorised_and_nan_for_empty():
    lo, hi = wilson_interval(np.array([1, 0]), np.array([2, 0]))
    assert np.isnan(lo[1]) and np.isnan(hi[1])
    with pytest.raises(ValueError, match="confidence"):
        wilson_interval(1, 2, confidence=1.5)


def test_normal_interval_is_the_studys_formula():
    lo, hi = normal_interval(45, 50)
    p = 0.9
    half = 1.96 * np.sqrt(p * (1 - p) / 50)
    assert (lo, hi) == (pytest.approx(p - half), pytest.approx(p + half))
    # zero width at p = 1 (why the Wilson interval is also given)
    assert normal_interval(10, 10) == (1.0, 1.0)


def test_loo_accuracy_ties_and_lonely_prompts_are_skipped():
    #          p1: a=1 b=1 c=0 d=0   (each worker's others: 1-2 or 2-1 -> no tie)
    #          p2: a=1 b=0           (others: single label, never a tie)
    #          p3: c=1               (nobody else: skipped)
    w = ["a", "b", "c", "d", "a", "b", "c"]
    p = [1, 1, 1, 1, 2, 2, 3]
    v = [1, 1, 0, 0, 1, 0, 1]
    acc = loo_accuracy(LabelMatrix.from_triples(w, p, v), min_scored=2)
    assert acc.n_scored.tolist() == [2, 2, 1, 1]
    assert acc.n_correct.tolist() == [0, 0, 0, 0]
    assert acc.n_alone.tolist() == [0, 0, 1, 0]
    rows = acc.to_dict()
    assert set(rows[0]) == {"worker", "n_labels", "n_scored", "accuracy", "ci_normal", "ci_wilson"}
    assert [r["worker"] for r in rows] == ["a", "b", "c", "d"]  # by label count, then worker order
    assert acc.summary()["n_underpowered"] == 2


def test_loo_tie_among_four_others_is_skipped():
    w = list("abcde")
    v = [1, 1, 0, 0, 1]  # for a, b and e (the 1s) the other four split 2-2; c and d see 3-1
    acc = loo_accuracy(LabelMatrix.from_triples(w, [1] * 5, v))
    assert acc.n_ties.tolist() == [1, 1, 0, 0, 1]
    assert acc.n_scored.tolist() == [0, 0, 1, 1, 0]
    assert acc.n_correct.tolist() == [0, 0, 0, 0, 0]
    assert [r["worker"] for r in acc.to_dict()] == ["c", "d"]


def test_gold_accuracy_and_underpowered_flag():
    w = ["a"] * 70 + ["b"] * 10
    p = list(range(70)) + list(range(10))
    v = [1] * 63 + [0] * 7 + [1] * 10
    gold = {i: 1 for i in range(70)}
    acc = gold_accuracy(LabelMatrix.from_triples(w, p, v, gold=gold))
    assert acc.n_scored.tolist() == [70, 10]
    assert acc.accuracy.tolist() == [0.9, 1.0]
    assert acc.underpowered.tolist() == [False, True]
    lo, hi = acc.ci_wilson[1]
    assert hi == pytest.approx(1.0, abs=1e-15) and lo < 0.75


def test_regression_matches_linregress_and_reports_f():
    rng = np.random.default_rng(3)
    w, p, v = [], [], []
    for i in range(12):
        for j in rng.choice(40, size=15, replace=False):
            w.append(f"w{i}")
            p.append(int(j))
            v.append(int(rng.random() < 0.3 + 0.05 * i))
    m = LabelMatrix.from_triples(w, p, v)
    wn, acc = worker_noise(m), loo_accuracy(m)
    regs = noise_accuracy_regression(wn, acc)
    ok = ~np.isnan(wn.level_noise) & ~np.isnan(acc.accuracy)
    ref = stats.linregress(wn.level_noise[ok], acc.accuracy[ok])
    r = regs["level_noise"]
    assert isinstance(r, Regression)
    assert r.slope == pytest.approx(ref.slope) and r.intercept == pytest.approx(ref.intercept)
    assert r.r2 == pytest.approx(ref.rvalue**2)
    n = int(ok.sum())
    f = r.r2 * (n - 2) / (1 - r.r2)
    assert r.f == pytest.approx(f)
    assert r.p == pytest.approx(stats.f.sf(f, 1, n - 2))  # the F test's p equals linregress's


@pytest.mark.parametrize("seed", range(20))
def test_least_squares_equals_scipy_linregress(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 300))
    x = rng.random(n)
    y = 2 - 3 * x if seed == 0 else 0.4 * x + rng.normal(0, rng.random(), n)  # seed 0: a perfect fit
    slope, intercept, r2, f, p, stderr = least_squares(x, y)
    ref = stats.linregress(x, y)
    assert slope == pytest.approx(ref.slope, rel=1e-12, abs=1e-12)
    assert intercept == pytest.approx(ref.intercept, rel=1e-12, abs=1e-12)
    assert r2 == pytest.approx(ref.rvalue**2, rel=1e-12, abs=1e-12)
    assert p == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-15)
    assert stderr == pytest.approx(ref.stderr, rel=1e-9, abs=1e-7)  # sqrt(1 − r²) magnifies rounding at r² ≈ 1
    assert p == pytest.approx(stats.f.sf(f, 1, n - 2), rel=1e-9, abs=1e-15)  # F = t², so one p for both tests


def test_regression_undefined_with_reason():
    m = LabelMatrix.from_triples(["a", "b"], [1, 1], [1, 1])
    regs = noise_accuracy_regression(worker_noise(m), loo_accuracy(m))
    assert all(r.slope is None and r.reason for r in regs.values())


def test_regression_undefined_when_every_worker_is_equally_accurate():
    # unanimous prompts (all 1 or all 0): every worker agrees with the others on every prompt
    w, p, v = [], [], []
    for i, prompts in enumerate([range(0, 6), range(2, 9), range(4, 12), range(5, 10)]):
        for j in prompts:
            w.append(f"w{i}"), p.append(j), v.append(int(j % 3 == 0))
    m = LabelMatrix.from_triples(w, p, v)
    acc = loo_accuracy(m)
    assert np.all(acc.accuracy == 1.0)
    reg = noise_accuracy_regression(worker_noise(m), acc)["level_noise"]
    assert reg.slope is None and reg.reason == "the accuracy is the same for every worker"
