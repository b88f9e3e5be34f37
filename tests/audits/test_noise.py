"""The six numbers: properties (hypothesis), sufficient statistics, edge cases. No database."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from audits import (
    LabelMatrix,
    NoiseAudit,
    SufficientStats,
    noise_audit,
    noise_from_stats,
    volume_filter,
    volume_sweep,
)
from audits.engine.noise import NOISE_KEYS

from . import naive

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def sparse_labels(draw, values=(0, 1), max_workers=7, max_prompts=9, min_labels=1):
    """A random sparse matrix as {(worker, prompt): value} (missing cells are normal)."""
    n_w = draw(st.integers(1, max_workers))
    n_p = draw(st.integers(1, max_prompts))
    cells = draw(
        st.lists(
            st.tuples(st.integers(0, n_w - 1), st.integers(0, n_p - 1)),
            min_size=min_labels,
            max_size=n_w * n_p,
            unique=True,
        )
    )
    vals = draw(st.lists(st.sampled_from(values), min_size=len(cells), max_size=len(cells)))
    return {(f"w{w}", f"p{p}"): v for (w, p), v in zip(cells, vals)}


def matrix_of(labels: dict) -> LabelMatrix:
    keys = list(labels)
    return LabelMatrix.from_triples([k[0] for k in keys], [k[1] for k in keys], [labels[k] for k in keys])


def as_tuple(a: NoiseAudit):
    return tuple(getattr(a, k) for k in NOISE_KEYS)


def close(x, y, tol=1e-12):
    if x is None or y is None:
        return x is None and y is None
    return abs(x - y) <= tol


@SETTINGS
@given(labels=sparse_labels(values=(0, 1, 2, 3)), seed=st.integers(0, 2**32 - 1), ddof=st.sampled_from([0, 1]))
def test_invariant_under_relabeling_workers_and_prompts(labels, seed, ddof):
    rng = random.Random(seed)
    workers = sorted({w for w, _ in labels})
    prompts = sorted({p for _, p in labels})
    wmap = dict(zip(workers, rng.sample(range(1000), len(workers))))
    pmap = dict(zip(prompts, rng.sample([f"x{i}" for i in range(1000)], len(prompts))))
    items = list(labels.items())
    rng.shuffle(items)
    relabeled = {(wmap[w], pmap[p]): v for (w, p), v in items}
    a, b = noise_audit(matrix_of(labels), ddof=ddof), noise_audit(matrix_of(relabeled), ddof=ddof)
    for x, y in zip(as_tuple(a), as_tuple(b)):
        assert close(x, y)


@SETTINGS
@given(labels=sparse_labels(values=(0, 1, 2, 3, 4)), ddof=st.sampled_from([0, 1]))
def test_flat_variance_decomposes_into_level_pattern_and_residual(labels, ddof):
    a = noise_audit(matrix_of(labels), ddof=ddof)
    assume(a.residual is not None)
    assert a.system_noise_orig**2 == pytest.approx(a.level_noise**2 + a.pattern_noise_orig**2 + a.residual, abs=1e-12)


@SETTINGS
@given(
    n_workers=st.integers(2, 6), base=st.lists(st.integers(0, 4), min_size=2, max_size=9), ddof=st.sampled_from([0, 1])
)
def test_level_noise_zero_when_all_workers_have_the_same_mean(n_workers, base, ddof):
    # worker w labels every prompt with a cyclic shift of the same multiset: same mean for everyone
    m = len(base)
    labels = {(f"w{w}", f"p{j}"): base[(j + w) % m] for w in range(n_workers) for j in range(m)}
    assert noise_audit(matrix_of(labels), ddof=ddof).level_noise == 0.0


@SETTINGS
@given(labels=sparse_labels(values=(0, 1)), ddof=st.sampled_from([0, 1]))
def test_pattern_noise_mod_zero_for_unanimous_prompts(labels, ddof):
    # make every prompt unanimous (copy one value per prompt)
    first = {}
    for (_w, p), v in labels.items():
        first.setdefault(p, v)
    unanimous = {(w, p): first[p] for (w, p) in labels}
    a = noise_audit(matrix_of(unanimous), ddof=ddof)
    if a.pattern_noise_mod is not None:
        assert a.pattern_noise_mod == 0.0


@SETTINGS
@given(labels=sparse_labels(values=(0, 1)), ddof=st.sampled_from([0, 1]))
def test_pattern_noise_mod_zero_iff_prompt_sds_all_equal(labels, ddof):
    """PN_mod = 0 exactly when all defined prompt SDs are equal; with every prompt unanimous they are
    all 0. (Spec note: PN_mod = 0 does not by itself prove unanimity — see the next test.)"""
    a = noise_audit(matrix_of(labels), ddof=ddof)
    assume(a.pattern_noise_mod is not None)
    sds = [naive.sd(v, ddof) for v in naive.by_prompt(labels).values()]
    sds = [s for s in sds if s is not None]
    all_equal = max(sds) - min(sds) <= 1e-15
    assert (a.pattern_noise_mod <= 1e-15) == all_equal
    unanimous = all(len(set(v)) == 1 for v in naive.by_prompt(labels).values())
    if unanimous:
        assert a.pattern_noise_mod == 0.0


def test_pattern_noise_mod_zero_without_unanimity_when_every_prompt_splits_alike():
    # every prompt split 1-1: all prompt SDs are equal (0.707…), so PN_mod = 0 although no prompt
    # is unanimous. The spec's "PN_mod is zero exactly when every prompt is unanimous" holds for
    # unanimity ⇒ 0; the converse needs "all prompt SDs equal".
    labels = {("a", p): 1 for p in range(5)} | {("b", p): 0 for p in range(5)}
    a = noise_audit(matrix_of(labels))
    assert a.pattern_noise_mod == 0.0


@SETTINGS
@given(labels=sparse_labels(values=(0, 1, 2)), ddof=st.sampled_from([0, 1]))
def test_filters_at_threshold_zero_equal_the_unfiltered_audit(labels, ddof):
    m = matrix_of(labels)
    full = noise_audit(m, ddof=ddof)
    f = volume_filter(m, min_labels=0, ddof=ddof)
    sweep_min = volume_sweep(m, "min", ddof=ddof)
    sweep_max = volume_sweep(m, "max", ddof=ddof)
    top = int(m.worker_counts.max())
    fmax = volume_filter(m, max_labels=top, ddof=ddof)
    for k in NOISE_KEYS:
        assert close(getattr(f.audit, k), getattr(full, k))
        assert close(getattr(fmax.audit, k), getattr(full, k))
        assert close(sweep_min.at(0)[k], getattr(full, k))
        assert close(sweep_max.at(top)[k], getattr(full, k))
    assert f.labels_kept == m.n_labels and f.labels_kept_pct == 100.0
    assert sweep_min.at(0)["workers_kept"] == m.n_workers


@SETTINGS
@given(labels=sparse_labels(values=(0, 1, 2, 3)), ddof=st.sampled_from([0, 1]), seed=st.integers(0, 1000))
def test_sufficient_statistics_kept_incrementally_give_the_same_numbers(labels, ddof, seed):
    """What the live-audit engineer does: keep count/sum/sumsq per worker and prompt as labels
    arrive (any order, Python floats), then call noise_from_stats."""
    items = list(labels.items())
    random.Random(seed).shuffle(items)
    wc, ws, wq, pc, ps, pq = {}, {}, {}, {}, {}, {}
    tot = [0, 0.0, 0.0]
    for (w, p), v in items:
        for d, k, x in ((wc, w, 1), (ws, w, v), (wq, w, v * v), (pc, p, 1), (ps, p, v), (pq, p, v * v)):
            d[k] = d.get(k, 0) + x
        tot[0] += 1
        tot[1] += v
        tot[2] += v * v
    # plus a worker and a prompt whose labels were all deleted (count 0: not part of the matrix)
    wc["gone"], ws["gone"], wq["gone"] = 0, 0.0, 0.0
    pc["gone"], ps["gone"], pq["gone"] = 0, 0.0, 0.0
    w = list(wc)
    p = list(pc)
    a = noise_from_stats(
        worker_count=[wc[k] for k in w],
        worker_sum=[ws[k] for k in w],
        worker_sumsq=[wq[k] for k in w],
        prompt_count=[pc[k] for k in p],
        prompt_sum=[ps[k] for k in p],
        prompt_sumsq=[pq[k] for k in p],
        total_count=tot[0],
        total_sum=tot[1],
        total_sumsq=tot[2],
        ddof=ddof,
    )
    b = noise_audit(matrix_of(labels), ddof=ddof)
    assert (a.n_workers, a.n_prompts, a.n_labels) == (b.n_workers, b.n_prompts, b.n_labels)
    for x, y in zip(as_tuple(a), as_tuple(b)):
        assert close(x, y, 1e-12)


def test_sufficient_stats_from_matrix_round_trip():
    m = matrix_of({("a", 1): 1, ("a", 2): 0, ("b", 1): 1, ("c", 2): 1, ("c", 3): 0})
    s = SufficientStats.from_matrix(m)
    assert s.worker_count.tolist() == [2, 1, 2]
    assert s.prompt_sumsq.tolist() == [2, 1, 0]
    assert noise_from_stats(s) == noise_audit(m)


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        (dict(worker_count=[1, 2], worker_sum=[1], prompt_count=[3], prompt_sum=[1], prompt_sumsq=[1]), "worker_sum"),
        (
            dict(worker_count=[1.5, 1.5], worker_sum=[1, 0], prompt_count=[3], prompt_sum=[1], prompt_sumsq=[1]),
            "worker_count",
        ),
        (
            dict(worker_count=[1, 1], worker_sum=[1, 0], prompt_count=[3], prompt_sum=[1], prompt_sumsq=[1]),
            "worker_count",
        ),
        (
            dict(worker_count=[1, 2], worker_sum=[1, 0], prompt_count=[3], prompt_sum=[1], prompt_sumsq=[-1]),
            "prompt_sumsq",
        ),
        (
            dict(
                worker_count=[1, 2],
                worker_sum=[1, 0],
                prompt_count=[3],
                prompt_sum=[1],
                prompt_sumsq=[1],
                total_count=4,
            ),
            "total_count",
        ),
        (
            dict(worker_count=[1, 2], worker_sum=[1, 0], prompt_count=[3], prompt_sum=[2], prompt_sumsq=[2]),
            "worker_sum",
        ),
        (
            dict(worker_count=[1, 2], worker_sum=[np.nan, 0], prompt_count=[3], prompt_sum=[1], prompt_sumsq=[1]),
            "worker_sum",
        ),
    ],
)
def test_sufficient_stats_validation_names_the_argument(kwargs, argument):
    with pytest.raises(ValueError, match=argument):
        noise_from_stats(**kwargs)


@pytest.mark.parametrize("ddof", [2, -1, 0.5, True, "sample"])
def test_bad_ddof_is_a_value_error_naming_ddof(ddof):
    m = matrix_of({("a", 1): 1, ("b", 1): 0})
    with pytest.raises(ValueError, match="ddof"):
        noise_audit(m, ddof=ddof)


def test_undefined_numbers_are_none_with_reasons_never_zero():
    # one worker, one prompt, one label
    a = noise_audit(matrix_of({("a", 1): 1}))
    for k in NOISE_KEYS:
        assert getattr(a, k) is None
        assert k in a.reasons
    assert "1 worker" in a.reasons["level_noise"]
    # population SD: a single value has SD 0 (defined), PN_mod needs one prompt with ≥ 1 label
    b = noise_audit(matrix_of({("a", 1): 1}), ddof=0)
    assert b.level_noise == 0.0 and b.system_noise_orig == 0.0 and b.residual == 0.0
    assert b.system_noise_mod == 0.0


def test_prompt_with_one_label_counts_in_pn_orig_but_not_pn_mod():
    labels = {("a", 1): 1, ("b", 1): 0, ("a", 2): 1, ("b", 2): 1, ("c", 3): 0}
    a = noise_audit(matrix_of(labels))
    assert a.n_prompts == 3 and a.n_prompts_with_sd == 2
    n = naive.six_numbers(labels)
    assert a.pattern_noise_orig == pytest.approx(n["pattern_noise_orig"], abs=1e-12)
    assert a.pattern_noise_mod == pytest.approx(n["pattern_noise_mod"], abs=1e-12)


def test_negative_residual_is_reported_not_clamped():
    # heavy missingness: residual < 0
    labels = {("a", 1): 1, ("a", 2): 1, ("b", 3): 0, ("b", 4): 0, ("c", 1): 1, ("c", 3): 0}
    a = noise_audit(matrix_of(labels))
    n = naive.six_numbers(labels)
    assert a.residual == pytest.approx(n["residual"], abs=1e-12)
    if n["mod_sum"] < 0:
        assert a.system_noise_mod is None and "negative" in a.reasons["system_noise_mod"]


def test_non_integer_identical_values_give_exact_zero_sd():
    # 0.1 added five times is not 0.5: the variance-from-sums must not report ~1e-9
    labels = {(f"w{i}", p): 0.1 for i in range(5) for p in range(3)}
    a = noise_audit(matrix_of(labels))
    assert a.pattern_noise_mod == 0.0 and a.system_noise_orig == 0.0 and a.level_noise == 0.0


def test_to_dict_has_the_fixed_keys_and_is_json_serialisable():
    import json

    a = noise_audit(matrix_of({("a", 1): 1, ("b", 1): 0, ("a", 2): 0, ("b", 2): 0}))
    d = a.to_dict()
    for k in (*NOISE_KEYS, "n_workers", "n_prompts", "n_labels", "sd"):
        assert k in d
    json.dumps(d, allow_nan=False)
    assert d["system_noise_study"] == pytest.approx(math.hypot(a.level_noise, a.pattern_noise_orig))


@SETTINGS
@given(labels=sparse_labels(values=(0, 1, 2, 5)), ddof=st.sampled_from([0, 1]))
def test_compressed_prompt_states_and_prompt_weight_give_the_same_numbers(labels, ddof):
    m = matrix_of(labels)
    full = m.stats
    comp = full.compressed()
    assert comp.prompt_weight is not None and comp.prompt_weight.sum() == m.n_prompts
    a, b = noise_from_stats(full, ddof=ddof), noise_from_stats(comp, ddof=ddof)
    for x, y in zip(as_tuple(a), as_tuple(b)):
        assert close(x, y)
    assert (a.n_prompts, a.n_labels, a.n_prompts_with_sd) == (b.n_prompts, b.n_labels, b.n_prompts_with_sd)
    # the public form: a histogram of prompt states, as kept in a database table
    c = noise_from_stats(
        worker_count=full.worker_count,
        worker_sum=full.worker_sum,
        prompt_count=comp.prompt_count,
        prompt_sum=comp.prompt_sum,
        prompt_sumsq=comp.prompt_sumsq,
        prompt_weight=comp.prompt_weight,
        ddof=ddof,
    )
    assert as_tuple(c) == as_tuple(b)


def test_prompt_weight_validation():
    with pytest.raises(ValueError, match="prompt_weight"):
        noise_from_stats(
            worker_count=[2], worker_sum=[1], prompt_count=[1], prompt_sum=[1], prompt_sumsq=[1], prompt_weight=[2, 1]
        )
    with pytest.raises(ValueError, match="worker_count"):  # 2 prompts × 1 label ≠ 1 label
        noise_from_stats(
            worker_count=[1], worker_sum=[1], prompt_count=[1], prompt_sum=[1], prompt_sumsq=[1], prompt_weight=[2]
        )
