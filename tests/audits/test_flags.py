"""The worker flags' rules: the underpowered cut-off scaled to the campaign, and straight-lining."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from audits import LabelMatrix, full_report, gold_accuracy, loo_accuracy
from audits.engine.accuracy import MIN_SCORED_FLOOR, UNDERPOWERED_N, power_cutoff, wilson_interval
from audits.engine.flags import binomial_tail, straight_lining, straight_lining_binary


# ------------------------------------------------------------------------------ underpowered cut-off
@pytest.mark.parametrize(
    "m, cutoff",
    [(0, 10), (39, 10), (40, 10), (41, 11), (60, 15), (61, 16), (239, 60), (240, 60), (2000, 60), (10**6, 60)],
)
def test_the_cutoff_is_a_quarter_of_the_prompts_between_10_and_60(m, cutoff):
    assert power_cutoff(m) == cutoff


def test_the_cutoff_bounds_are_what_the_docstring_says_they_are():
    # 60: the study's, where the Wilson interval around 0.5 is about ±0.12
    lo, hi = wilson_interval(30, UNDERPOWERED_N)
    assert round(float(hi - 0.5), 2) == 0.12
    # 10: the least N with N·p ≥ 5 and N·(1 − p) ≥ 5 at p = 0.5
    assert MIN_SCORED_FLOOR == min(n for n in range(1, 100) if n * 0.5 >= 5)
    # the demo's 60 prompts: 15, interval about ±0.23
    lo, hi = wilson_interval(7.5, power_cutoff(60))
    assert round(float(hi - 0.5), 2) == 0.23
    with pytest.raises(ValueError, match="n_prompts"):
        power_cutoff(-1)


def test_accuracy_scales_its_cutoff_to_the_matrix_unless_given_one():
    # 60 prompts, 5 labels each: a worker scored on 20 is underpowered under the study's fixed 60,
    # not under the campaign's cut-off of 15
    rng = np.random.default_rng(0)
    w, p, v = [], [], []
    for j in range(60):
        for i in rng.choice(12, size=5, replace=False):
            w.append(f"w{i:02d}")
            p.append(j)
            v.append(int(rng.random() < 0.9) if j % 2 else int(rng.random() < 0.1))
    m = LabelMatrix.from_triples(w, p, v, gold={j: j % 2 for j in range(60)})
    auto, fixed = loo_accuracy(m), loo_accuracy(m, min_scored=60)
    assert auto.min_scored == 15 and fixed.min_scored == 60
    assert auto.summary()["min_scored_rule"] == "min(60, max(10, ⌈60 prompts / 4⌉))"
    assert fixed.summary()["min_scored_rule"] == "fixed"
    assert fixed.underpowered[fixed.n_scored > 0].all()  # the old behaviour: every worker
    assert not auto.underpowered[auto.n_scored >= 15].any() and (auto.n_scored >= 15).sum() >= 6
    # gold: scaled to the prompts that have gold
    half = LabelMatrix.from_triples(w, p, v, gold={j: j % 2 for j in range(0, 60, 2)})
    assert gold_accuracy(half).min_scored == power_cutoff(30) == 10
    report = full_report(m, sweeps=()).to_dict()
    assert report["accuracy_summary"]["min_scored_for_power"] == 15
    assert report["accuracy_gold_summary"]["min_scored_for_power"] == 15
    with pytest.raises(ValueError, match="min_scored"):
        loo_accuracy(m, min_scored=-3)


# ------------------------------------------------------------------------------ straight-lining
@pytest.mark.parametrize(
    "c, n, q",
    [(20, 20, 0.5), (18, 20, 0.5), (9, 10, 0.55), (95, 100, 0.9), (1, 1, 0.3), (300, 330, 0.62), (5, 5, 0.999)],
)
def test_binomial_tail_matches_scipy(c, n, q):
    assert binomial_tail(c, n, q) == pytest.approx(stats.binom.sf(c - 1, n, q), rel=1e-9, abs=1e-300)


def test_binomial_tail_edges():
    assert binomial_tail(0, 10, 0.5) == 1.0 and binomial_tail(11, 10, 0.5) == 0.0
    assert binomial_tail(3, 10, 0.0) == 0.0 and binomial_tail(3, 10, 1.0) == 1.0
    assert binomial_tail(5000, 5000, 0.5) == 0.0  # 2⁻⁵⁰⁰⁰ underflows quietly
    assert binomial_tail(4550, 5000, 0.9) == pytest.approx(stats.binom.sf(4549, 5000, 0.9), rel=1e-9)


def crowd(seed=1, n_prompts=60, positives=0.5, spammers=2, careful=8, per_spammer=20, k=5):
    """A demo-like crowd: careful workers answer the truth 90 % of the time; spammers always 1."""
    rng = np.random.default_rng(seed)
    truth = (rng.random(n_prompts) < positives).astype(int)
    workers = [f"spam{i}" for i in range(spammers)] + [f"careful{i}" for i in range(careful)]
    w, p, v = [], [], []
    for j in range(n_prompts):
        pool = [x for x in workers if not x.startswith("spam") or w.count(x) < per_spammer]
        for name in rng.choice(pool, size=k, replace=False):
            w.append(str(name))
            p.append(j)
            v.append(1 if name.startswith("spam") else int(truth[j] if rng.random() < 0.9 else 1 - truth[j]))
    return LabelMatrix.from_triples(w, p, v, gold=dict(enumerate(truth.tolist())))


def test_same_answer_workers_are_flagged_and_careful_ones_are_not():
    m = crowd()
    s = straight_lining(m)
    flagged = sorted(s.worker_ids[s.flagged].tolist())
    assert flagged == ["spam0", "spam1"]
    i = s.worker_ids.tolist().index("spam0")
    n = int(s.n_labels[i])
    assert n >= 10 and s.value[i] == 1.0 and s.share[i] == 1.0
    assert s.reason(i, {1.0: "Plausible"}).startswith(
        f"answers 1 (Plausible) to 100 % of {n} prompts (the other workers: "
    )


def test_careful_workers_on_a_skewed_campaign_are_not_flagged():
    # 95 % of the prompts are true: careful workers say 1 almost always, and so do the others
    m = crowd(seed=3, n_prompts=200, positives=0.95, spammers=0)
    s = straight_lining(m)
    assert (s.share[s.n_labels >= 10] >= 0.9).any()  # rules 1 and 2 alone would flag some
    assert not s.flagged.any()


def test_too_few_labels_or_a_mixed_worker_is_never_flagged():
    w = ["a"] * 9 + ["b"] * 20 + ["c"] * 20
    p = list(range(9)) + list(range(20)) * 2
    v = [1] * 9 + [j % 2 for j in range(20)] + [1] * 17 + [0] * 3  # a: 9 labels; c: 85 % ones
    s = straight_lining(LabelMatrix.from_triples(w, p, v))
    assert s.flagged.tolist() == [False, False, False]
    assert np.isnan(s.p_value).tolist() == [True, True, True]  # none passed rules 1 and 2, nothing computed
    lone = straight_lining(LabelMatrix.from_triples(["x"] * 12, list(range(12)), [1] * 12))
    assert not lone.flagged[0] and np.isnan(lone.others_share[0])  # nobody to compare with


def test_the_binary_statistics_give_the_matrix_result():
    for seed in range(5):
        m = crowd(seed=seed, spammers=seed % 3)
        full = straight_lining(m)
        ones = np.bincount(m.worker, weights=m.value, minlength=m.n_workers)
        live = straight_lining_binary(m.worker_ids, m.worker_counts, ones)
        assert live.flagged.tolist() == full.flagged.tolist()
        assert live.value.tolist() == full.value.tolist() and live.top_count.tolist() == full.top_count.tolist()
        np.testing.assert_allclose(live.others_share, full.others_share)
        np.testing.assert_allclose(live.p_value, full.p_value, equal_nan=True)
        assert [live.reason(i) for i in range(m.n_workers)] == [full.reason(i) for i in range(m.n_workers)]


def test_many_distinct_values_take_the_sorting_path():
    # continuous scaled values (a rescaled rating): the worker × value table would be too large to count
    rng = np.random.default_rng(0)
    w = np.repeat(np.arange(3000), 12)
    v = np.round(rng.random(w.size), 4)
    v[:12] = 0.5  # worker 0 always answers 0.5
    s = straight_lining(LabelMatrix.from_triples(w, np.tile(np.arange(12), 3000), v))
    assert s.flagged[0] and s.value[0] == 0.5 and s.flagged.sum() == 1


def test_the_report_lists_straight_liners_in_json_and_markdown():
    d = full_report(crowd(), sweeps=()).to_dict()
    entries = d["straight_lining"]["workers"]
    assert sorted(e["worker"] for e in entries) == ["spam0", "spam1"]
    assert set(entries[0]) == {"worker", "n_labels", "value", "share", "others_share", "p", "reason"}
    assert d["straight_lining"]["rule"] == {
        "min_labels": 10,
        "min_share": 0.9,
        "alpha": 0.01,
        "reference": "share of the answer among the other workers' labels (binomial tail)",
    }
    from audits import render_markdown

    md = render_markdown(d)
    assert "## Straight-lining" in md and entries[0]["reason"] in md
    # the agreement rows are named as people say them, read against Krippendorff's bands, with their sample
    alpha = d["agreement"]["alpha_nominal"]
    reading = "reliable" if alpha["value"] >= 0.8 else "tentative" if alpha["value"] >= 0.667 else "not reliable"
    assert f"| Krippendorff's α (nominal) | {alpha['value']:.4f} | {reading} | 60 | 300 |" in md
    assert "0 underpowered (N < 15 = min(60, max(10, ⌈60 prompts / 4⌉)))" in md


@pytest.mark.parametrize(
    "kwargs, match", [({"min_share": 0.4}, "min_share"), ({"alpha": 0}, "alpha"), ({"min_labels": 0}, "min_labels")]
)
def test_bad_rule_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        straight_lining(crowd(), **kwargs)
