"""Variance components of a crossed design and the instrument's resolution (``audits.engine.variance``)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from audits.engine import LabelMatrix
from audits.engine.variance import resolution, variance_components

SIGMA = {"worker": 0.5**2, "prompt": 1.0**2, "residual": 0.7**2}


def crossed(rng, n=60, m=200, k=6):
    """y = 3 + a_worker + b_prompt + e, k of n workers per prompt (unbalanced: workers' counts vary)."""
    a = rng.normal(0, np.sqrt(SIGMA["worker"]), n)
    b = rng.normal(0, np.sqrt(SIGMA["prompt"]), m)
    # k distinct workers per prompt, busier workers more often (top k of Gumbel-perturbed log weights)
    keys = np.log(np.linspace(1, 3, n)) - np.log(-np.log(rng.random((m, n))))
    w = np.argpartition(-keys, k, axis=1)[:, :k].ravel()
    p = np.repeat(np.arange(m), k)
    y = 3 + a[w] + b[p] + rng.normal(0, np.sqrt(SIGMA["residual"]), w.size)
    return LabelMatrix.from_triples(w, p, y)


def test_recovers_known_components():
    """The moment estimates are unbiased: their mean over 100 simulated crowds is within 4 standard
    errors (of that mean) of the true components."""
    rng = np.random.default_rng(7)
    est = {k: [] for k in SIGMA}
    for _ in range(100):
        vc = variance_components(crossed(rng))
        for k in SIGMA:
            est[k].append(vc[k])
    for k, true in SIGMA.items():
        x = np.asarray(est[k])
        assert abs(x.mean() - true) < 4 * x.std(ddof=1) / np.sqrt(x.size), (k, x.mean(), true)
        assert abs(x.mean() - true) < 0.1 * true


def test_balanced_design_equals_two_way_anova():
    rng = np.random.default_rng(1)
    n, m = 7, 11
    y = rng.normal(size=(n, m)) + rng.normal(size=(n, 1)) + 2 * rng.normal(size=(1, m))
    w, p = np.repeat(np.arange(n), m), np.tile(np.arange(m), n)
    vc = variance_components(LabelMatrix.from_triples(w, p, y.ravel()))
    grand = y.mean()
    ms_w = m * ((y.mean(axis=1) - grand) ** 2).sum() / (n - 1)
    ms_p = n * ((y.mean(axis=0) - grand) ** 2).sum() / (m - 1)
    resid = y - y.mean(axis=1, keepdims=True) - y.mean(axis=0, keepdims=True) + grand
    ms_e = (resid**2).sum() / ((n - 1) * (m - 1))
    assert vc["residual"] == pytest.approx(ms_e, rel=1e-10)
    assert vc["worker"] == pytest.approx((ms_w - ms_e) / m, rel=1e-10)
    assert vc["prompt"] == pytest.approx((ms_p - ms_e) / n, rel=1e-10)
    assert sum(vc["share"].values()) == pytest.approx(1.0)


def test_singular_design_says_why():
    m = LabelMatrix.from_triples(["a", "b", "c"], [1, 2, 3], [1.0, 2.0, 3.0])
    vc = variance_components(m)
    assert vc["worker"] is None and "singular" in vc["reason"]


def test_prompt_resolution_is_the_least_significant_difference():
    rng = np.random.default_rng(3)
    m = crossed(rng)
    res = resolution(m)["prompts"]
    # the pooled within-prompt SD, and the t-test between two prompts at exactly that difference
    var = [np.var(m.value[m.prompt == j], ddof=1) for j in range(m.n_prompts)]
    assert res["within_sd"] == pytest.approx(np.sqrt(np.mean(var)))  # k = 6 everywhere: a plain mean
    t = res["least_significant"] / (res["within_sd"] * np.sqrt(2 / 6))
    assert 2 * stats.t.sf(t, res["df"]) == pytest.approx(0.05)
    assert res["k"] == 6 and res["detectable_80"] > res["least_significant"]
    # the within-prompt variance holds the worker and residual components
    assert res["within_sd"] ** 2 == pytest.approx(SIGMA["worker"] + SIGMA["residual"], rel=0.15)
