"""Instrument characteristics: item precision, reproducibility, telling two systems apart."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from audits import LabelMatrix, compare_systems, item_precision, reproducibility


def ratings(seed=0, shift=0.0, n_items=30, n_raters=6):
    rng = np.random.default_rng(seed)
    truth = np.linspace(1, 9, n_items)
    w, p, v = [], [], []
    for j, t in enumerate(truth):
        for r in range(n_raters):
            w.append(f"r{r}")
            p.append(f"item{j}")
            v.append(float(np.clip(np.round(t + shift + rng.normal(0, 1)), 0, 10)))
    return LabelMatrix.from_triples(w, p, v)


def test_item_precision_summary():
    m = ratings()
    ip = item_precision(m)
    per = {}
    for _w, p, v in zip(m.worker, m.prompt, m.raw):
        per.setdefault(int(p), []).append(v)
    sds = [np.std(per[j], ddof=1) for j in range(m.n_prompts)]
    np.testing.assert_allclose(ip.item_sd, sds, atol=1e-12)
    assert ip.mean_sd == pytest.approx(np.mean(sds)) and ip.sd_sd == pytest.approx(np.std(sds, ddof=1))
    d = ip.to_dict(max_points=10)
    assert d["scatter"]["sampled"] is True and len(d["scatter"]["mean"]) == 10


def test_reproducibility_of_two_runs():
    a, b = ratings(seed=1), ratings(seed=2)
    r = reproducibility(a, b, top=3)
    assert r.n_common == 30
    ma = [np.mean(a.raw[a.prompt == j]) for j in range(30)]
    mb = [np.mean(b.raw[b.prompt == j]) for j in range(30)]
    assert r.spearman_means == pytest.approx(stats.spearmanr(ma, mb).statistic)
    assert r.spearman_means > 0.9
    assert r.alpha_a is not None and r.alpha_b is not None
    assert len(r.moved) == 3
    assert abs(r.moved[0]["change"]) == pytest.approx(max(abs(x - y) for x, y in zip(mb, ma)))


def test_compare_systems_paired_t_test():
    rng = np.random.default_rng(5)
    w, p, v = [], [], []
    for r in range(20):
        for j in range(50):
            w.append(r)
            p.append(j)
            v.append(int(rng.random() < 0.5))
    m = LabelMatrix.from_triples(w, p, v)
    labels = {}
    for _wi, pi, x in zip(m.worker, m.prompt, m.value):
        labels.setdefault(int(pi), []).append(x)
    majority = {int(m.prompt_ids[j]): int(np.mean(labels[j]) >= 0.5) for j in labels}
    constant = {k: 1 for k in majority}
    res = compare_systems(m, majority, constant)
    sa = [
        np.mean([x == majority[int(m.prompt_ids[pi])] for wi, pi, x in zip(m.worker, m.prompt, m.value) if wi == r])
        for r in range(20)
    ]
    sb = [np.mean([x == 1 for wi, x in zip(m.worker, m.value) if wi == r]) for r in range(20)]
    ref = stats.ttest_rel(sa, sb)
    assert res.t == pytest.approx(ref.statistic) and res.p == pytest.approx(ref.pvalue)
    assert res.n_raters == 20 and res.df == 19
    same = compare_systems(m, majority, majority)
    assert same.distinguishable is False and "cannot tell" in same.verdict
