"""The engine against the deliberately naive implementation in ``naive.py`` (1e-12).

Random sparse matrices with missing cells and ties: the six numbers, leave-one-out accuracy,
volume filters and sweeps, per-worker noise and partitions.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audits import (
    loo_accuracy,
    loo_outcomes,
    noise_audit,
    noise_partitions,
    volume_filter,
    volume_sweep,
    worker_noise,
)
from audits.engine.noise import NOISE_KEYS

from . import naive
from .test_noise import matrix_of, sparse_labels

TOL = 1e-12
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
VALUE_SETS = st.sampled_from([(0, 1), (1, 2, 3, 4), (0, 1, 2), (-2, 0, 5), (0.0, 0.25, 0.7)])


def assert_numbers(engine: dict, ref: dict):
    for k in NOISE_KEYS:
        x, y = engine[k], ref[k]
        if k == "system_noise_mod":
            # compare the defined quantity, LN² + PN_mod² + residual, so a sum within rounding of 0
            # (sqrt turns 1e-17 into 3e-9) cannot fail the test spuriously
            if ref["mod_sum"] is not None and abs(ref["mod_sum"]) > TOL:
                assert (x is None) == (y is None), k
                if x is not None:
                    assert x == pytest.approx(y, abs=TOL), k
            continue
        assert (x is None) == (y is None), (k, x, y)
        if x is not None:
            assert x == pytest.approx(y, abs=TOL), (k, x, y)


def engine_dict(audit) -> dict:
    return {k: getattr(audit, k) for k in NOISE_KEYS}


@st.composite
def labels_any(draw):
    values = draw(VALUE_SETS)
    return draw(sparse_labels(values=values, max_workers=8, max_prompts=10))


@SETTINGS
@given(labels=labels_any(), ddof=st.sampled_from([0, 1]))
def test_six_numbers_match_naive(labels, ddof):
    a = noise_audit(matrix_of(labels), ddof=ddof)
    ref = naive.six_numbers(labels, ddof)
    assert_numbers(engine_dict(a), ref)
    assert (a.n_workers, a.n_prompts, a.n_labels) == (ref["n_workers"], ref["n_prompts"], ref["n_labels"])


@SETTINGS
@given(labels=labels_any())
def test_loo_outcomes_and_accuracy_match_naive(labels):
    m = matrix_of(labels)
    out = loo_outcomes(m)
    ref = naive.loo(labels)
    names = {1: "correct", 0: "wrong", 2: "tie", 3: "alone"}
    for i in range(m.n_labels):
        key = (m.worker_ids[m.worker[i]], m.prompt_ids[m.prompt[i]])
        assert names[int(out[i])] == ref[key], key
    acc = loo_accuracy(m)
    ref_acc = naive.loo_accuracy(labels)
    for i, w in enumerate(m.worker_ids):
        n, c = ref_acc[w]
        assert acc.n_scored[i] == n and acc.n_correct[i] == c
        if n:
            assert acc.accuracy[i] == pytest.approx(c / n, abs=TOL)
        else:
            assert np.isnan(acc.accuracy[i])


@SETTINGS
@given(labels=labels_any(), ddof=st.sampled_from([0, 1]), kind=st.sampled_from(["min", "max"]))
def test_volume_filters_and_sweeps_match_naive(labels, ddof, kind):
    m = matrix_of(labels)
    sweep = volume_sweep(m, kind, ddof=ddof)
    fallback = volume_sweep(m, kind, ddof=ddof, dense_limit=0)  # the extended-precision path
    assert fallback.method == "shifted-sums"
    top = int(m.worker_counts.max())
    assert sweep.thresholds.tolist() == list(range(top + 1))
    for t in range(top + 2):
        ref = naive.volume_filter(labels, kind, t, ddof)
        f = volume_filter(m, **({"min_labels": t} if kind == "min" else {"max_labels": t}), ddof=ddof)
        assert_numbers(engine_dict(f.audit), ref)
        assert f.workers_kept == ref["workers_kept"] and f.labels_kept == ref["labels_kept"]
        assert f.prompt_distribution.tolist() == ref["prompt_distribution"]
        if t <= top:
            row = sweep.at(t)
            assert_numbers(row, ref)
            assert row["workers_kept"] == ref["workers_kept"] and row["labels_kept"] == ref["labels_kept"]
            assert [row["prompt_distribution"][str(c)] for c in range(len(ref["prompt_distribution"]))] == ref[
                "prompt_distribution"
            ]
            fb = fallback.at(t)
            for k in ("level_noise", "pattern_noise_orig", "pattern_noise_mod", "system_noise_orig"):
                if ref[k] is None:
                    assert fb[k] is None
                else:
                    assert fb[k] == pytest.approx(ref[k], abs=1e-9)


@SETTINGS
@given(labels=labels_any(), ddof=st.sampled_from([0, 1]))
def test_per_worker_noise_matches_naive(labels, ddof):
    m = matrix_of(labels)
    wn = worker_noise(m, ddof=ddof, chunk_pairs=7)  # tiny chunks exercise the chunking
    ref = naive.worker_noise(labels, ddof)
    for i, w in enumerate(m.worker_ids):
        got = {k: (None if np.isnan(getattr(wn, k)[i]) else float(getattr(wn, k)[i])) for k in NOISE_KEYS}
        assert_numbers(got, ref[w])
        assert wn.n_labels[i] == ref[w]["n_labels"] and wn.n_workers[i] == ref[w]["n_workers"]


@SETTINGS
@given(labels=labels_any(), k=st.one_of(st.none(), st.integers(1, 6)))
def test_partitions_match_naive(labels, k):
    m = matrix_of(labels)
    parts = noise_partitions(m, k=k)
    ref_k, ref = naive.partitions(labels, k)
    assert parts.k == ref_k
    assert {d: n for d, n in parts.counts.items() if n} == ref
    assert sum(parts.counts.values()) == parts.n_prompts_with_k
