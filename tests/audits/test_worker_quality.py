"""The live worker-quality numbers of the engine (``audits.engine.workers``), no database: bias with
its t interval, control accuracy with its Wilson interval and flag, speed against the campaign,
each against a plain-Python reading of its definition."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
from scipy import stats

import audits.engine.workers
from audits.engine.accuracy import power_cutoff
from audits.engine.matrix import LabelMatrix
from audits.engine.noise import noise_audit
from audits.engine.workers import SPEED_MIN_CAMPAIGN_SECONDS, SPEED_SHARE, control_accuracy, worker_bias, worker_speed

from .test_engine_isolation import FORBIDDEN, run_without_django


def test_docstring_examples():
    result = doctest.testmod(audits.engine.workers, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted >= 8


def test_the_module_runs_without_django_or_the_apps():
    code = (
        "import sys\n"
        "from audits.engine.workers import control_accuracy, worker_bias, worker_speed\n"
        "from audits.engine.matrix import LabelMatrix\n"
        "m = LabelMatrix.from_triples(['a', 'b', 'a', 'b'], [1, 1, 2, 2], [1, 0, 1, 1])\n"
        "print(worker_bias(m).n_compared.tolist(), worker_speed(['a'], [1.0]).n_labels.tolist(),\n"
        "      control_accuracy(['a'], [2], [1], n_control_prompts=2).min_controls)\n"
        f"print(sorted(k for k in sys.modules if any(k == f or k.startswith(f + '.') for f in {FORBIDDEN!r})))\n"
    )
    proc = run_without_django(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["[2, 2] [1] 2", "[]"]


# ------------------------------------------------------------------------------ bias
def _sparse(seed: int, n_workers: int = 9, n_prompts: int = 40, k: int = 4):
    rng = np.random.default_rng(seed)
    w, p, v = [], [], []
    for j in range(n_prompts):
        truth = rng.random() < 0.5
        for i in rng.choice(n_workers, size=k, replace=False):
            lean = (i - n_workers / 2) / n_workers  # workers lean from negative to positive
            w.append(f"w{i}")
            p.append(j)
            v.append(int(rng.random() < (0.8 if truth else 0.2) + lean * 0.3))
    return LabelMatrix.from_triples(w, p, v)


def _naive_bias(matrix, reference, confidence=0.95):
    """The definition, one worker and one prompt at a time."""
    ids = list(matrix.worker_ids)
    by_prompt: dict[int, list] = {}
    for wi, pj, x in zip(matrix.worker.tolist(), matrix.prompt.tolist(), matrix.value.tolist()):
        by_prompt.setdefault(pj, []).append((wi, x))
    out = {}
    for a in range(len(ids)):
        diffs = []
        for labels in by_prompt.values():
            own = [x for wi, x in labels if wi == a]
            others = [x for wi, x in labels if wi != a and reference[wi]]
            if own and others:
                diffs.append(own[0] - sum(others) / len(others))
        if not diffs:
            out[ids[a]] = (0, None, None)
            continue
        mean = sum(diffs) / len(diffs)
        if len(diffs) < 2:
            out[ids[a]] = (1, mean, None)
            continue
        lo, hi = stats.t.interval(confidence, len(diffs) - 1, loc=mean, scale=stats.sem(diffs))
        out[ids[a]] = (len(diffs), mean, (lo, hi))
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("drop", [None, ("w0", "w4")])
def test_bias_follows_its_definition_with_and_without_a_reference(seed, drop):
    m = _sparse(seed)
    reference = np.array([drop is None or w not in drop for w in m.worker_ids])
    got = worker_bias(m, reference=None if drop is None else reference)
    want = _naive_bias(m, reference)
    for i, w in enumerate(m.worker_ids):
        n, mean, ci = want[w]
        assert got.n_compared[i] == n
        assert got.bias[i] == pytest.approx(mean, abs=1e-12)
        np.testing.assert_allclose(got.ci[i], ci, atol=1e-10)


def test_on_a_complete_matrix_the_spread_of_the_biases_is_n_over_n_minus_1_times_level_noise():
    rng = np.random.default_rng(7)
    n, m = 6, 50
    lean = np.linspace(-0.2, 0.2, n)
    values = (rng.random((n, m)) < 0.5 + lean[:, None]).astype(int)
    matrix = LabelMatrix.from_triples(np.repeat(np.arange(n), m), np.tile(np.arange(m), n), values.ravel())
    bias = worker_bias(matrix)
    means = values.mean(axis=1)
    np.testing.assert_allclose(bias.bias, n / (n - 1) * (means - values.mean()), atol=1e-12)
    ln = noise_audit(matrix).level_noise
    assert np.std(bias.bias, ddof=1) == pytest.approx(n / (n - 1) * ln, abs=1e-12)


def test_bias_edge_cases_are_nan_not_zero():
    # a: two prompts shared; b: one; c: none shared with anybody
    m = LabelMatrix.from_triples(["a", "b", "a", "x", "a", "x", "c"], [1, 1, 2, 2, 3, 3, 4], [1, 0, 1, 0, 0, 0, 1])
    b = worker_bias(m)
    row = dict(zip(m.worker_ids, zip(b.n_compared.tolist(), b.bias.tolist(), b.ci.tolist())))
    assert row["a"][0] == 3 and row["a"][1] == pytest.approx(2 / 3)
    assert row["b"][:2] == (1, -1.0) and all(np.isnan(row["b"][2]))
    assert row["c"][0] == 0 and np.isnan(row["c"][1]) and all(np.isnan(row["c"][2]))
    # identical differences: a zero-width interval, not NaN
    same = LabelMatrix.from_triples(["a", "b", "a", "b"], [1, 1, 2, 2], [1, 0, 1, 0])
    assert worker_bias(same).ci.tolist() == [[1.0, 1.0], [-1.0, -1.0]]
    assert worker_bias(same).to_dict()[0] == {"worker": "a", "n_compared": 2, "bias": 1.0, "ci": [1.0, 1.0]}


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"reference": [True, False]}, "reference"),
        ({"reference": np.array([1, 0, 1])}, "reference"),
        ({"confidence": 1.0}, "confidence"),
        ({"confidence": True}, "confidence"),
    ],
)
def test_bias_refuses_bad_arguments_by_name(kwargs, name):
    m = LabelMatrix.from_triples(["a", "b", "c"], [1, 1, 1], [1, 0, 1])
    with pytest.raises(ValueError, match=name):
        worker_bias(m, **kwargs)


# ------------------------------------------------------------------------------ control accuracy
def test_control_accuracy_interval_is_wilsons_and_the_others_pool_leaves_the_worker_out():
    n, c = [10, 12, 7, 0], [4, 11, 7, 0]
    result = control_accuracy(["a", "b", "c", "d"], n, c, n_control_prompts=30)
    for i in range(3):
        ci = stats.binomtest(c[i], n[i]).proportion_ci(0.95, method="wilson")
        np.testing.assert_allclose(result.ci_wilson[i], [ci.low, ci.high], atol=1e-12)
        assert result.others_accuracy[i] == pytest.approx((sum(c) - c[i]) / (sum(n) - n[i]))
    assert np.isnan(result.accuracy[3]) and not result.flagged[3]
    assert result.min_controls == power_cutoff(30) == 10
    assert result.flagged.tolist() == [True, False, False, False]


@pytest.mark.parametrize("m, cutoff", [(0, 1), (3, 3), (10, 10), (39, 10), (60, 15), (1000, 60)])
def test_the_controls_cutoff_scales_with_the_control_prompts_and_never_exceeds_them(m, cutoff):
    assert control_accuracy([], [], [], n_control_prompts=m).min_controls == cutoff


def test_control_accuracy_needs_the_cutoff_and_an_interval_below_the_others():
    # 0 of 4 is clearly bad, but 4 controls are below the cut-off of 5 control prompts
    few = control_accuracy(["spam", "a"], [4, 5], [0, 5], n_control_prompts=5)
    assert not few.flagged.any()
    assert control_accuracy(["spam", "a"], [5, 5], [0, 5], n_control_prompts=5).flagged.tolist() == [True, False]
    # alone: nobody to compare with
    assert not control_accuracy(["spam"], [20], [0], n_control_prompts=40).flagged.any()
    # 7 of 10 against others at 0.8: the interval [0.40, 0.89] reaches above 0.8, so no flag
    assert not control_accuracy(["a", "b"], [10, 100], [7, 80], n_control_prompts=200).flagged[0]


@pytest.mark.parametrize(
    "args, kwargs, name",
    [
        ((["a"], [1, 2], [1, 1]), {"n_control_prompts": 3}, "n_controls"),
        ((["a"], [2], [3]), {"n_control_prompts": 3}, "n_correct"),
        ((["a"], [2], [-1]), {"n_control_prompts": 3}, "n_correct"),
        ((["a"], [2], [1]), {"n_control_prompts": -1}, "n_control_prompts"),
        ((["a"], [2], [1]), {"n_control_prompts": 3, "confidence": 0}, "confidence"),
    ],
)
def test_control_accuracy_refuses_bad_arguments_by_name(args, kwargs, name):
    with pytest.raises(ValueError, match=name):
        control_accuracy(*args, **kwargs)


# ------------------------------------------------------------------------------ speed
def test_speed_medians_follow_their_definition_and_the_ratio_flags_the_fast():
    rng = np.random.default_rng(3)
    workers, seconds = [], []
    for name, scale, n in (("careful", 5.0, 30), ("steady", 3.0, 41), ("fast", 0.4, 12), ("brief", 0.1, 9)):
        workers += [name] * n
        seconds += list(rng.exponential(scale, n))
    s = worker_speed(workers, seconds)
    t = np.array(seconds)
    who = np.array(workers)
    assert s.worker_ids.tolist() == ["brief", "careful", "fast", "steady"]
    for i, name in enumerate(s.worker_ids):
        assert s.median_seconds[i] == pytest.approx(np.median(t[who == name]))
        assert s.n_labels[i] == (who == name).sum()
    assert s.campaign_median == pytest.approx(np.median(t))
    np.testing.assert_allclose(s.ratio, s.median_seconds / s.campaign_median)
    # "brief" is fast too, but 9 labels are fewer than the 10 a flag needs
    assert dict(zip(s.worker_ids, s.flagged)) == {"brief": False, "careful": False, "fast": True, "steady": False}
    assert s.ratio[2] < SPEED_SHARE < s.ratio[3]


def test_speed_flags_nobody_while_the_campaigns_median_is_under_half_a_second():
    # The same crowd, its times scaled down (a script's, or labels made in-process): the ratios are the
    # same, and they flag the fast worker only while the campaign's median is a time people take.
    workers = ["fast"] * 10 + ["a"] * 10 + ["b"] * 10
    seconds = np.array([0.5] * 10 + [4.0] * 10 + [6.0] * 10)
    for scale, flagged in ((1.0, True), (0.126, True), (0.124, False), (0.001, False)):
        s = worker_speed(workers, seconds * scale)
        assert (s.campaign_median >= SPEED_MIN_CAMPAIGN_SECONDS) is flagged, scale
        assert s.ratio[2] == pytest.approx(0.125) and s.flagged.tolist() == [False, False, flagged], scale


def test_speed_of_no_labels_is_empty():
    s = worker_speed([], [])
    assert s.worker_ids.size == 0 and np.isnan(s.campaign_median) and not s.flagged.any()


@pytest.mark.parametrize(
    "args, kwargs, name",
    [
        ((["a", "b"], [1.0]), {}, "seconds"),
        ((["a"], [-1.0]), {}, "seconds"),
        ((["a"], [float("nan")]), {}, "seconds"),
        ((["a"], [1.0]), {"min_labels": 0}, "min_labels"),
        ((["a"], [1.0]), {"max_share": 0}, "max_share"),
    ],
)
def test_speed_refuses_bad_arguments_by_name(args, kwargs, name):
    with pytest.raises(ValueError, match=name):
        worker_speed(*args, **kwargs)
