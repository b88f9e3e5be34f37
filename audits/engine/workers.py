"""Live worker quality: each worker's bias, accuracy on control items and speed, with the flags they
raise in words. Pure numpy (scipy.special for two quantiles); the live audit (``audits.selectors.worker_numbers``)
feeds it from the database after each quick audit.

Three numbers, each with the rule that flags it (straight-lining has its own module,
:mod:`audits.engine.flags`, and agreement with the others is :func:`audits.engine.accuracy.loo_accuracy`):

**Bias** (:func:`worker_bias`). For worker a and each prompt j that a labeled and somebody else
labeled too, with ``x_aj`` a's scaled value and ``m_{-a,j}`` the mean of the other workers' scaled
values on j, the worker's difference is ``d_aj = x_aj − m_{-a,j}``; their bias is the mean

.. math:: b_a = \\frac{1}{n_a} \\sum_j d_{aj}

over their ``n_a`` compared prompts, with the 95 % t interval
``b_a ± t_{0.975, n_a − 1} · s_a / sqrt(n_a)`` (``s_a`` the sample SD of the differences, ddof = 1).
It is the worker's own share of **level noise** (``noise-audit.md``: the SD over workers of each
worker's mean label): a worker's mean mixes how positive their prompts happen to be with how
positive the worker is; the differences take the prompts out. On a complete matrix (every worker
labels every prompt) ``b_a = n/(n − 1) · (mean_a − grand mean)`` exactly, so the SD of the biases
over workers is ``n/(n − 1) · LN``. No flag is raised on bias: a careful worker's small, steady
lean has an interval that excludes 0 once they label enough, and the harmful leans (one answer to
everything) are caught by the straight-lining rule.

**Control accuracy** (:func:`control_accuracy`). Control items are prompts with a known answer,
served to workers at a rate and never audited; ``n`` controls answered, ``c`` correct, accuracy
``c / n`` with its 95 % Wilson interval (:func:`audits.engine.accuracy.wilson_interval`). A worker
is flagged when both hold:

1. ``n ≥ min(power_cutoff(m), m)`` (``m`` = the campaign's control prompts): the accuracy's
   power cut-off (:func:`audits.engine.accuracy.power_cutoff`: 10 controls up to 40 control
   prompts, a quarter of them above, at most 60), lowered to ``m`` where a worker, who answers each
   control at most once, could never reach it;
2. the Wilson interval's upper end lies below the other workers' pooled control accuracy (their
   correct controls over their controls): the worker is significantly worse than the rest of the
   crowd on the same kind of items — the outlier test of the workers table, on controls.

**Speed** (:func:`worker_speed`). Seconds per label (from the lease to the label), the worker's
median against the campaign's median over all labels. Flagged **too fast** when the worker gave
at least :data:`audits.engine.accuracy.MIN_SCORED_FLOOR` labels and their median is below
:data:`SPEED_SHARE` (a quarter) of the campaign's: a ratio, so it scales with the prompts' length.
Nobody is flagged while the campaign's median is under :data:`SPEED_MIN_CAMPAIGN_SECONDS` (half a
second): no crowd that reads its prompts labels that fast, so such times measure the machine (a
script, labels made in-process), and a quarter of them is noise, not haste.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from audits.engine._util import py
from audits.engine.accuracy import MIN_SCORED_FLOOR, power_cutoff, wilson_interval

__all__ = [
    "WorkerBias",
    "worker_bias",
    "ControlAccuracy",
    "control_accuracy",
    "WorkerSpeed",
    "worker_speed",
    "worker_speed_from_medians",
    "SPEED_SHARE",
    "SPEED_MIN_CAMPAIGN_SECONDS",
]

SPEED_SHARE = 0.25
SPEED_MIN_CAMPAIGN_SECONDS = 0.5


def _check_confidence(confidence: float) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float, np.floating)) or not 0 < confidence < 1:
        raise ValueError(f"confidence: expected a number in (0, 1), got {confidence!r}")
    return float(confidence)


# ---------------------------------------------------------------------------------- bias
@dataclass(frozen=True)
class WorkerBias:
    """Per worker (columnar, matrix worker order): bias against the others on the same prompts.

    Attributes
    ----------
    worker_ids : ndarray
    n_compared : ndarray of int
        ``n_a``: the worker's labels on prompts that another (reference) worker labeled too.
    bias : ndarray of float
        ``b_a``; NaN when nothing was compared.
    ci : ndarray, shape (n_workers, 2)
        The t interval at ``confidence``; NaN below two compared prompts.
    confidence : float
    """

    worker_ids: np.ndarray
    n_compared: np.ndarray
    bias: np.ndarray
    ci: np.ndarray
    confidence: float = 0.95

    def to_dict(self) -> list[dict]:
        """``[{"worker", "n_compared", "bias", "ci"}]`` in worker order (None where undefined)."""
        return [
            {"worker": py(w), "n_compared": int(n), "bias": py(b), "ci": py(ci)}
            for w, n, b, ci in zip(self.worker_ids, self.n_compared, self.bias, self.ci)
        ]


def worker_bias(matrix, *, reference: Any = None, confidence: float = 0.95) -> WorkerBias:
    """Each worker's bias: the mean of their scaled value minus the others' mean on the same prompts.

    Parameters
    ----------
    matrix : LabelMatrix
    reference : array_like of bool, length n_workers, optional
        Which workers make up "the others" (default: all). A worker outside the reference (one
        excluded from the audit, say) is compared with the reference workers' mean on each prompt;
        a reference worker with the mean of the *other* reference workers.
    confidence : float
        Level of the t interval.

    Returns
    -------
    WorkerBias

    Notes
    -----
    - The interval treats the worker's differences as independent draws: a t interval on their
      mean (module docstring), approximate for 0/1 values and good from about ten prompts on.
    - A prompt nobody else (in the reference) labeled is skipped; a worker with none compared has
      bias NaN, one with a single compared prompt a bias without an interval (NaN).
    - Identical differences give an interval of zero width. O(L).

    Examples
    --------
    A complete matrix: the bias is ``n/(n − 1)`` times the worker's mean minus the grand mean.

    >>> from audits.engine.matrix import LabelMatrix
    >>> m = LabelMatrix.from_triples(["a", "b", "c"] * 4, [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4],
    ...                              [1, 1, 0, 1, 0, 0, 1, 1, 1, 1, 0, 1])
    >>> b = worker_bias(m)
    >>> b.bias.tolist(), b.n_compared.tolist()
    ([0.5, -0.25, -0.25], [4, 4, 4])
    >>> means, grand = [1.0, 0.5, 0.5], 8 / 12
    >>> [round(3 / 2 * (x - grand), 6) for x in means]
    [0.5, -0.25, -0.25]
    """
    confidence = _check_confidence(confidence)
    nw, m = matrix.n_workers, matrix.n_prompts
    if reference is None:
        ref = np.ones(nw, dtype=bool)
    else:
        ref = np.asarray(reference)
        if ref.dtype != bool or ref.shape != (nw,):
            raise ValueError(
                f"reference: expected {nw} booleans (one per worker), got shape {ref.shape} of {ref.dtype}"
            )
    w, p, x = matrix.worker, matrix.prompt, matrix.value
    own = ref[w].astype(np.float64)
    total = np.bincount(p, weights=x * own, minlength=m)
    count = np.bincount(p, weights=own, minlength=m)
    others_n = count[p] - own
    ok = others_n > 0
    d = x[ok] - (total[p][ok] - (x * own)[ok]) / others_n[ok]
    wk = w[ok]
    n = np.bincount(wk, minlength=nw).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        bias = np.bincount(wk, weights=d, minlength=nw) / n
        ss = np.bincount(wk, weights=(d - bias[wk]) ** 2, minlength=nw)
        se = np.sqrt(ss / (n - 1) / n)
    bias = np.where(n > 0, bias, np.nan)
    half = np.full(nw, np.nan)
    two = n >= 2
    if two.any():
        from scipy import special  # Student's t quantile, without scipy.stats' import cost

        half[two] = special.stdtrit(n[two] - 1, 0.5 + confidence / 2) * se[two]
    return WorkerBias(matrix.worker_ids, n, bias, np.column_stack([bias - half, bias + half]), confidence)


# ---------------------------------------------------------------------------------- control accuracy
@dataclass(frozen=True)
class ControlAccuracy:
    """Per worker (columnar, in the order given): accuracy on control items and its flag.

    Attributes
    ----------
    worker_ids : ndarray
    n_controls, n_correct : ndarray of int
    accuracy : ndarray of float
        ``n_correct / n_controls``; NaN without controls.
    ci_wilson : ndarray, shape (n_workers, 2)
    others_accuracy : ndarray of float
        The other workers' pooled control accuracy (NaN when they answered none).
    flagged : ndarray of bool
    min_controls : int
        Rule 1's cut-off (module docstring).
    """

    worker_ids: np.ndarray
    n_controls: np.ndarray
    n_correct: np.ndarray
    accuracy: np.ndarray
    ci_wilson: np.ndarray
    others_accuracy: np.ndarray
    flagged: np.ndarray
    min_controls: int

    def reason(self, i: int) -> str:
        """Worker ``i``'s numbers in words: ``"control accuracy 0.40 [0.17, 0.69] after 10 controls (the
        other workers: 0.93)"``."""
        lo, hi = self.ci_wilson[i]
        text = (
            f"control accuracy {self.accuracy[i]:.2f} [{lo:.2f}, {hi:.2f}] after {int(self.n_controls[i])} "
            f"control{'s' if self.n_controls[i] != 1 else ''}"
        )
        q = self.others_accuracy[i]
        return text if np.isnan(q) else f"{text} (the other workers: {q:.2f})"


def control_accuracy(
    worker_ids: Any, n_controls: Any, n_correct: Any, *, n_control_prompts: int, confidence: float = 0.95
) -> ControlAccuracy:
    """Each worker's accuracy on control items, its Wilson interval and the flag (module docstring).

    Parameters
    ----------
    worker_ids : array_like
    n_controls, n_correct : array_like of int
        Controls each worker answered, and answered correctly.
    n_control_prompts : int
        The campaign's control prompts ``m`` (each worker answers each at most once).
    confidence : float
        Level of the Wilson interval.

    Returns
    -------
    ControlAccuracy

    Notes
    -----
    The crowd is the workers given: pass every worker with controls. A worker alone with controls
    has no others to be compared with and is never flagged.

    Examples
    --------
    >>> c = control_accuracy(["spam", "a", "b"], [10, 10, 10], [4, 9, 10], n_control_prompts=12)
    >>> c.flagged.tolist(), c.min_controls
    ([True, False, False], 10)
    >>> c.reason(0)
    'control accuracy 0.40 [0.17, 0.69] after 10 controls (the other workers: 0.95)'
    """
    confidence = _check_confidence(confidence)
    n = np.asarray(n_controls, dtype=np.int64).reshape(-1)
    c = np.asarray(n_correct, dtype=np.int64).reshape(-1)
    ids = np.asarray(worker_ids, dtype=object).reshape(-1)
    if not (n.shape == c.shape == ids.shape):
        raise ValueError(
            f"n_controls, n_correct: expected one of each per worker ({ids.size}), got {n.size} and {c.size}"
        )
    if (n < 0).any() or (c < 0).any() or (c > n).any():
        raise ValueError("n_correct: expected 0 ≤ n_correct ≤ n_controls for every worker")
    if (
        isinstance(n_control_prompts, bool)
        or not isinstance(n_control_prompts, (int, np.integer))
        or n_control_prompts < 0
    ):
        raise ValueError(f"n_control_prompts: expected a non-negative integer, got {n_control_prompts!r}")
    lo, hi = wilson_interval(c, n, confidence=confidence)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.where(n > 0, c / np.maximum(n, 1), np.nan)
        rest = n.sum() - n
        others = np.where(rest > 0, (c.sum() - c) / np.maximum(rest, 1), np.nan)
    min_controls = max(1, min(power_cutoff(int(n_control_prompts)), int(n_control_prompts)))
    flagged = (n >= min_controls) & ~np.isnan(others) & (np.nan_to_num(hi, nan=1.0) < np.nan_to_num(others, nan=0.0))
    return ControlAccuracy(ids, n, c, accuracy, np.column_stack([lo, hi]), others, flagged, min_controls)


# ---------------------------------------------------------------------------------- speed
@dataclass(frozen=True)
class WorkerSpeed:
    """Per worker (sorted by id): seconds per label against the campaign.

    Attributes
    ----------
    worker_ids : ndarray
    n_labels : ndarray of int
        Labels with a time.
    median_seconds : ndarray of float
        The worker's median seconds per label.
    campaign_median : float
        The median over every label given (NaN without labels).
    ratio : ndarray of float
        ``median_seconds / campaign_median``.
    flagged : ndarray of bool
        Too fast (module docstring).
    min_labels : int
    max_share : float
    """

    worker_ids: np.ndarray
    n_labels: np.ndarray
    median_seconds: np.ndarray
    campaign_median: float
    ratio: np.ndarray
    flagged: np.ndarray
    min_labels: int = MIN_SCORED_FLOOR
    max_share: float = SPEED_SHARE

    def reason(self, i: int) -> str:
        """``"median 0.6 s per label, 15 % of the campaign's median of 4.1 s"``; times under 0.1 s with
        two significant digits (``0.0042 s``), which one decimal would show as 0.0."""
        return (
            f"median {_seconds(self.median_seconds[i])} s per label, {self.ratio[i] * 100:.0f} % of the "
            f"campaign's median of {_seconds(self.campaign_median)} s"
        )


def _seconds(value: float) -> str:
    return f"{value:.1f}" if value >= 0.1 else f"{value:.2g}"


def worker_speed(
    workers: Any, seconds: Any, *, min_labels: int = MIN_SCORED_FLOOR, max_share: float = SPEED_SHARE
) -> WorkerSpeed:
    """Each worker's median seconds per label, against the campaign's median, and the too-fast flag.

    Parameters
    ----------
    workers : array_like, length L
        The worker of each label.
    seconds : array_like of float, length L
        Seconds from the lease to the label (negative or NaN times are refused).
    min_labels : int
        Labels before a worker can be flagged.
    max_share : float
        Flagged below this share of the campaign's median.

    Returns
    -------
    WorkerSpeed

    Examples
    --------
    >>> s = worker_speed(["fast"] * 10 + ["a"] * 10 + ["b"] * 10, [0.5] * 10 + [4.0] * 10 + [6.0] * 10)
    >>> s.worker_ids.tolist(), s.flagged.tolist(), float(s.campaign_median)
    (['a', 'b', 'fast'], [False, False, True], 4.0)
    >>> s.reason(2)
    "median 0.5 s per label, 12 % of the campaign's median of 4.0 s"
    >>> machine = worker_speed(["bot"] * 10 + ["a"] * 10, [0.004] * 10 + [0.05] * 10)
    >>> machine.reason(1), machine.flagged.tolist()  # a campaign's median under half a second: no flag
    ("median 0.004 s per label, 15 % of the campaign's median of 0.027 s", [False, False])
    """
    t = np.asarray(seconds, dtype=np.float64).reshape(-1)
    ids_in = np.asarray(workers).reshape(-1)
    if ids_in.shape != t.shape:
        raise ValueError(f"seconds: expected one per label ({ids_in.size}), got {t.size}")
    if np.isnan(t).any() or (t < 0).any():
        raise ValueError("seconds: expected non-negative numbers")
    if isinstance(min_labels, bool) or not isinstance(min_labels, (int, np.integer)) or min_labels < 1:
        raise ValueError(f"min_labels: expected a positive integer, got {min_labels!r}")
    if not 0 < max_share <= 1:
        raise ValueError(f"max_share: expected a number in (0, 1], got {max_share!r}")
    ids, codes = np.unique(ids_in, return_inverse=True)
    codes = codes.reshape(-1)
    order = np.lexsort((t, codes))
    n = np.bincount(codes, minlength=ids.size).astype(np.int64)
    starts = np.cumsum(n) - n
    ts = t[order]
    lo_mid, hi_mid = starts + (n - 1) // 2, starts + n // 2
    median = (ts[lo_mid] + ts[hi_mid]) / 2 if ids.size else np.zeros(0)
    campaign = float(np.median(t)) if t.size else float("nan")
    return _speed(ids, n, median, campaign, min_labels=min_labels, max_share=max_share)


def _speed(ids, n, median, campaign: float, *, min_labels: int, max_share: float) -> WorkerSpeed:
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = median / campaign if campaign > 0 else np.full(ids.size, np.nan)
    timed = campaign >= SPEED_MIN_CAMPAIGN_SECONDS  # False for NaN too
    flagged = (n >= min_labels) & (np.nan_to_num(ratio, nan=1.0) < max_share) & timed
    return WorkerSpeed(ids, n, median, campaign, ratio, flagged, int(min_labels), float(max_share))


def worker_speed_from_medians(
    worker_ids: Any,
    n_labels: Any,
    median_seconds: Any,
    campaign_median: float | None,
    *,
    min_labels: int = MIN_SCORED_FLOOR,
    max_share: float = SPEED_SHARE,
) -> WorkerSpeed:
    """:func:`worker_speed` from each worker's label count and median (and the campaign's median),
    kept elsewhere as the labels arrive; the same result on the same labels.

    >>> s = worker_speed_from_medians(["fast", "a", "b"], [10, 10, 10], [0.5, 4.0, 6.0], 4.0)
    >>> s.flagged.tolist()
    [True, False, False]
    """
    ids = np.asarray(worker_ids).reshape(-1)
    n = np.asarray(n_labels, dtype=np.int64).reshape(-1)
    median = np.asarray(median_seconds, dtype=np.float64).reshape(-1)
    campaign = float("nan") if campaign_median is None else float(campaign_median)
    return _speed(ids, n, median, campaign, min_labels=min_labels, max_share=max_share)
