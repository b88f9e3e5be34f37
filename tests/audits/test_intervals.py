"""Crossed-bootstrap intervals of the six numbers (``audits.engine.intervals``)."""

from __future__ import annotations

import numpy as np
import pytest

from audits.engine import LabelMatrix, noise_audit
from audits.engine.agreement import krippendorff_alpha
from audits.engine.intervals import ALPHA_METHOD, BOOTSTRAP_METHOD, alpha_interval, noise_intervals
from audits.engine.noise import NOISE_KEYS


def crowd(rng, n=30, m=100, k=5, sd_worker=0.8, sd_prompt=1.5):
    """A known crossed model: label ~ Bernoulli(logistic(0.2 + a_worker + b_prompt)), k workers per
    prompt drawn from a crowd of n (the sparse design of crowdsourcing)."""
    a, b = rng.normal(0, sd_worker, n), rng.normal(0, sd_prompt, m)
    w = np.argpartition(rng.random((m, n)), k, axis=1)[:, :k].ravel()  # k distinct workers per prompt
    p = np.repeat(np.arange(m), k)
    v = (rng.random(w.size) < 1 / (1 + np.exp(-(0.2 + a[w] + b[p])))).astype(float)
    return LabelMatrix.from_triples(w, p, v)


def test_same_seed_same_intervals_and_the_dict_states_the_method():
    m = crowd(np.random.default_rng(0))
    a = noise_intervals(m, n_resamples=300, seed=11).to_dict()
    assert a == noise_intervals(m, n_resamples=300, seed=11).to_dict()
    assert a != noise_intervals(m, n_resamples=300, seed=12).to_dict()
    assert a["method"] == BOOTSTRAP_METHOD and a["level"] == 0.95 and a["n_resamples"] == 300
    est = noise_audit(m)
    for key in NOISE_KEYS:
        lo, hi = a[key]
        assert lo <= getattr(est, key) <= hi, key


def test_blocking_does_not_change_the_draws(monkeypatch):
    import audits.engine.intervals as iv

    m = crowd(np.random.default_rng(1))
    whole = noise_intervals(m, n_resamples=50, seed=3).bounds
    monkeypatch.setattr(iv, "_CELLS_PER_BLOCK", 7 * (m.n_workers + m.n_prompts))  # blocks of 7 resamples
    blocked = noise_intervals(m, n_resamples=50, seed=3).bounds
    for key in NOISE_KEYS:
        assert blocked[key] == pytest.approx(whole[key], rel=1e-12), key


def test_bad_arguments():
    m = crowd(np.random.default_rng(0))
    with pytest.raises(ValueError, match="n_resamples"):
        noise_intervals(m, n_resamples=0)
    with pytest.raises(ValueError, match="level"):
        noise_intervals(m, level=1.5)


def test_coverage_on_a_known_crossed_model():
    """Coverage of the true value by simulation: 200 seeded crowds from one crossed model.

    The true value of each number is its expectation under the model and design, estimated from 600
    further crowds (its Monte Carlo error, ~0.1 % of the value, is far inside every interval). With
    200 crowds a coverage estimate has a binomial SD of 0.015 at 0.95, and the crossed bootstrap is
    approximate for SDs of a sparse crossed design (no exact bootstrap exists: McCullagh 2000), so
    each coverage must lie in [0.85, 1]: at least 6 SDs below nominal fails. The plain pigeonhole
    bootstrap (every number from product-weighted labels) fails it: it covered pattern noise in
    1–9 % of such crowds. Measured here (100 resamples each): level noise 0.865 (30 workers: the SD
    of few worker means is biased low and the percentile interval does not correct it), pattern
    noise 0.91 / 0.925, system noise 1.0 / 0.975, residual 0.955.
    """
    rng = np.random.default_rng(2024)
    truth = {k: [] for k in NOISE_KEYS}
    for _ in range(600):
        a = noise_audit(crowd(rng))
        for k in NOISE_KEYS:
            truth[k].append(getattr(a, k))
    true = {k: float(np.mean(v)) for k, v in truth.items()}
    hits = dict.fromkeys(NOISE_KEYS, 0)
    n_sets = 200
    for s in range(n_sets):
        bounds = noise_intervals(crowd(rng), n_resamples=100, seed=s).bounds
        for k in NOISE_KEYS:
            hits[k] += bounds[k][0] <= true[k] <= bounds[k][1]
    coverage = {k: h / n_sets for k, h in hits.items()}
    assert all(0.85 <= c <= 1.0 for c in coverage.values()), coverage


# ---------------------------------------------------------------------------------- Krippendorff's alpha
def rated_crowd(rng, n=30, m=100, k=5, sd_worker=0.5, sd_prompt=1.2, sd_noise=0.8, missing=0.0):
    """Ratings 1–5 from a known crossed model: round(3 + a_worker + b_prompt + e), clipped, k workers per
    prompt drawn from a crowd of n; ``missing`` drops that share of labels at random."""
    a, b = rng.normal(0, sd_worker, n), rng.normal(0, sd_prompt, m)
    w = np.argpartition(rng.random((m, n)), k, axis=1)[:, :k].ravel()
    p = np.repeat(np.arange(m), k)
    v = np.clip(np.round(3 + a[w] + b[p] + rng.normal(0, sd_noise, w.size)), 1, 5)
    keep = rng.random(w.size) >= missing
    return LabelMatrix.from_triples(w[keep], p[keep], v[keep])


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_alpha_estimate_is_krippendorffs_alpha(level):
    """With every multiplicity 1 the weighted coincidences are Krippendorff's: the estimate equals the
    ``krippendorff`` package's α (through the engine) on unbalanced designs with missing labels."""
    rng = np.random.default_rng(5)
    for _ in range(3):
        m = rated_crowd(rng, n=12, m=40, k=4, missing=0.2)
        iv = alpha_interval(m, alpha_level=level, n_resamples=20, seed=0)
        assert iv.estimate == pytest.approx(krippendorff_alpha(m, level=level).value, rel=1e-10, abs=1e-12)
        lo, hi = iv.bounds
        assert lo < hi and iv.n_defined == 20


def test_alpha_on_categories_without_numbers():
    m = LabelMatrix.from_triples(
        list("abcabcabc"), [1, 1, 1, 2, 2, 2, 3, 3, 3], list("xxyyyxzzz"), binarize={"x": 1, "y": 0, "z": 0}
    )
    assert m.raw_levels is not None
    iv = alpha_interval(m, n_resamples=30)
    assert iv.estimate is not None and iv.estimate == pytest.approx(krippendorff_alpha(m).value)
    undefined = alpha_interval(m, alpha_level="interval", n_resamples=30)
    assert undefined.estimate is None and undefined.bounds is None and "nominal" in undefined.reason


def test_alpha_undefined_cases_name_the_reason():
    one_value = LabelMatrix.from_triples(list("abab"), [1, 1, 2, 2], [1, 1, 1, 1])
    assert "one distinct value" in alpha_interval(one_value, n_resamples=10).reason
    single = LabelMatrix.from_triples(list("ab"), [1, 2], [0, 1])
    iv = alpha_interval(single, n_resamples=10)
    assert iv.estimate is None and iv.bounds is None and "two or more labels" in iv.reason


def test_a_worker_drawn_twice_is_never_paired_with_itself():
    """Two workers, each prompt labeled by both: a resample drawing worker 0 twice (and worker 1 not at
    all) leaves one distinct worker per prompt, so no pair and no α (pairing the copies would report
    perfect agreement). Drawing both once gives the plain α."""
    from audits.engine.intervals import _alpha_draws

    m = LabelMatrix.from_triples([0, 1, 0, 1, 0, 1], [0, 0, 1, 1, 2, 2], [1, 0, 1, 1, 0, 0])
    cats = np.array([0.0, 1.0])
    code = m.raw.astype(np.int64)
    w = np.array([[2.0, 0.0], [1.0, 1.0]])
    v = np.ones((2, 3))
    draws = _alpha_draws(w, v, m.worker, m.prompt, code, cats, "nominal")
    assert np.isnan(draws[0])
    assert draws[1] == pytest.approx(krippendorff_alpha(m).value)


def test_alpha_same_seed_same_interval_blocking_and_progress(monkeypatch):
    m = rated_crowd(np.random.default_rng(3))
    seen = []
    whole = alpha_interval(m, alpha_level="interval", n_resamples=60, seed=4)
    blocked = alpha_interval(m, alpha_level="interval", n_resamples=60, seed=4, block_size=7, progress=seen.append)
    assert blocked.bounds == pytest.approx(whole.bounds, rel=1e-12)
    assert seen == [7, 14, 21, 28, 35, 42, 49, 56, 60]
    assert alpha_interval(m, alpha_level="interval", n_resamples=60, seed=5).bounds != whole.bounds
    d = whole.to_dict()
    assert d["method"] == ALPHA_METHOD and d["n_resamples"] == 60 and d["seed"] == 4 and d["level"] == 0.95
    with pytest.raises(ValueError, match="alpha_level"):
        alpha_interval(m, alpha_level="cardinal")
    with pytest.raises(ValueError, match="n_resamples"):
        alpha_interval(m, n_resamples=0)


def test_noise_intervals_report_progress_per_block():
    m = crowd(np.random.default_rng(1))
    seen = []
    blocked = noise_intervals(m, n_resamples=25, seed=2, block_size=10, progress=seen.append)
    assert seen == [10, 20, 25]
    assert blocked.bounds == noise_intervals(m, n_resamples=25, seed=2).bounds


def test_alpha_interval_coverage_on_a_known_crossed_model():
    """Coverage of the true α by simulation: 100 seeded crowds of ratings from one crossed model.

    The true value is the mean of α over 300 further crowds of the same model and design (its Monte
    Carlo error, ~0.003, is far inside the intervals). With 100 crowds a coverage estimate has a
    binomial SD of ~0.02 at 0.95; the crossed bootstrap counts the worker and the prompt variance
    each with their interaction, so it is conservative (McCullagh 2000; Owen 2007): measured here
    (200 resamples each) coverage 0.99 with intervals ~1.4 times as wide as 3.92 SDs of α across
    crowds. The test asks for coverage of at least 0.90 and a mean width under twice that spread,
    so an interval that is too narrow or uselessly wide fails.
    """
    rng = np.random.default_rng(7)
    alphas = np.array([krippendorff_alpha(rated_crowd(rng), level="interval").value for _ in range(300)])
    true, spread = alphas.mean(), 3.92 * alphas.std()
    hits, widths = 0, []
    n_sets = 100
    for s in range(n_sets):
        lo, hi = alpha_interval(rated_crowd(rng), alpha_level="interval", n_resamples=200, seed=s).bounds
        hits += lo <= true <= hi
        widths.append(hi - lo)
    assert hits / n_sets >= 0.90
    assert np.mean(widths) < 2 * spread
