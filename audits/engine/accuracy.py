"""Humans as systems: leave-one-worker-out accuracy (``noise-audit.md``).

For worker a and each prompt a labeled, the reference is the mode of the *other* workers' labels on
that prompt; a tie (e.g. 2–2) is skipped, not guessed, and so is a prompt nobody else labeled.
Accuracy = share of a's scored labels equal to the reference; N = prompts that counted. The same
against the prompts' gold labels when there are any. Confidence intervals: the study's normal
approximation ``p ± 1.96·sqrt(p(1−p)/N)`` and the Wilson score interval. Workers scored on fewer
prompts than :func:`power_cutoff` (the study's 60, scaled down on campaigns too small to reach it)
are underpowered.

Everything is vectorised: per (prompt, value) counts give, for each label, the count of its own
value, the prompt's top count, how many values share it and the second-highest count, from which
the leave-one-out mode follows without a loop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from audits.engine._util import py
from audits.engine.noise import NOISE_KEYS, WorkerNoise

__all__ = [
    "WorkerAccuracy",
    "Regression",
    "loo_accuracy",
    "gold_accuracy",
    "loo_outcomes",
    "wilson_interval",
    "normal_interval",
    "noise_accuracy_regression",
    "least_squares",
    "UNDERPOWERED_N",
    "MIN_SCORED_FLOOR",
    "power_cutoff",
]

UNDERPOWERED_N = 60  # the study's cut-off: the most power_cutoff ever asks for
MIN_SCORED_FLOOR = 10  # the least: N·p ≥ 5 and N·(1 − p) ≥ 5 at p = 0.5
POWER_SHARE = 0.25  # in between: a quarter of the prompts a worker could be scored on
STUDY_Z = 1.96

# outcome codes per label (loo_outcomes)
CORRECT, WRONG, TIE, ALONE = 1, 0, 2, 3


def wilson_interval(k: Any, n: Any, *, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval for k successes in n trials (vectorised).

    .. math::

        \\frac{\\hat p + z^2/2n}{1 + z^2/n} \\pm \\frac{z}{1 + z^2/n}
        \\sqrt{\\frac{\\hat p (1-\\hat p)}{n} + \\frac{z^2}{4n^2}}

    with ``z = Φ⁻¹(1 − (1 − confidence)/2)`` (Wilson 1927). Same values as
    ``scipy.stats.binomtest(k, n).proportion_ci(confidence, method="wilson")``.

    Notes
    -----
    NaN where ``n == 0``. Stays inside [0, 1] and is sensible at p̂ = 0 or 1 and small n.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence: expected a number in (0, 1), got {confidence!r}")
    from scipy import special  # the normal quantile scipy.stats.norm.ppf uses, without its ~0.8 s import

    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    z = special.ndtri(0.5 + confidence / 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        denom = 1 + z * z / n
        center = (p + z * z / (2 * n)) / denom
        half = z / denom * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        lo, hi = center - half, center + half
    return np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)


def normal_interval(k: Any, n: Any, *, z: float = STUDY_Z) -> tuple[np.ndarray, np.ndarray]:
    """The study's normal-approximation interval ``p ± z·sqrt(p(1−p)/N)`` (z = 1.96), vectorised.

    Notes
    -----
    Not clipped to [0, 1] (as in the study); it has zero width at p = 0 or 1 — prefer the Wilson
    interval there. NaN where ``n == 0``.
    """
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        half = z * np.sqrt(p * (1 - p) / n)
    return p - half, p + half


def power_cutoff(
    n_prompts: int, *, cap: int = UNDERPOWERED_N, floor: int = MIN_SCORED_FLOOR, share: float = POWER_SHARE
) -> int:
    """Scored prompts below which a worker's accuracy is underpowered, scaled to the campaign.

    .. math::

        N_{\\min}(m) = \\min\\bigl(60,\\ \\max(10,\\ \\lceil m / 4 \\rceil)\\bigr)

    where m is the number of prompts a worker could be scored on (the matrix's prompts for the
    leave-one-out reference, the prompts with gold for the gold reference).

    Why this rule:

    - **60** is the study's cut-off (``noise-audit.md``): there the 95 % interval around an
      accuracy of 0.5 is about ±0.12 (Wilson; ±0.13 normal), narrow enough to compare workers.
      Every campaign of 240 prompts or more keeps it, so the study's own figures are reproduced.
    - A worker is scored at most once per prompt, so on a campaign of fewer than 60 prompts no
      worker could ever reach 60 and the mark would fall on everybody, saying nothing. There the
      cut-off is **a quarter of the prompts**: a worker scored on that share of the campaign has
      done a real part of it (on the demo's 60 prompts, k = 5, regular workers label 20–40 prompts
      and drive-by workers 6, and the cut-off of 15 falls between them). At N = 15 the 95 % Wilson
      interval around 0.5 is ±0.23: wide, and the dashboard says how wide.
    - **Never below 10**: the study's normal-approximation interval needs N·p ≥ 5 and N·(1 − p) ≥ 5,
      i.e. N ≥ 10 at p = 0.5; below that the Wilson interval around 0.5 is wider than ±0.26.

    Notes
    -----
    ``n_prompts`` = 0 gives the floor. Being underpowered does not stop the outlier test (the
    Wilson interval already accounts for N); it warns that a wide interval cannot single a worker out.

    Examples
    --------
    >>> power_cutoff(2000), power_cutoff(240), power_cutoff(60), power_cutoff(20)
    (60, 60, 15, 10)
    """
    if isinstance(n_prompts, bool) or not isinstance(n_prompts, (int, np.integer)) or n_prompts < 0:
        raise ValueError(f"n_prompts: expected a non-negative integer, got {n_prompts!r}")
    return int(min(cap, max(floor, math.ceil(int(n_prompts) * share))))


def _value_count_stats(prompt: np.ndarray, codes: np.ndarray, n_prompts: int, n_values: int):
    """Per label: count of its own value on its prompt; per prompt: top count M, how many values
    reach M (nM) and the largest count below M (M2, 0 if none)."""
    L = prompt.shape[0]
    if L == 0:
        z = np.zeros(0, np.int64)
        return z, np.zeros(n_prompts, np.int64), np.zeros(n_prompts, np.int64), np.zeros(n_prompts, np.int64)
    key = prompt.astype(np.int64) * n_values + codes
    if n_prompts * n_values <= 50_000_000:
        cnt = np.bincount(key, minlength=n_prompts * n_values).reshape(n_prompts, n_values)
        top = cnt.max(axis=1)
        n_top = (cnt == top[:, None]).sum(axis=1)
        second = np.where(cnt < top[:, None], cnt, 0).max(axis=1)
        own = cnt.reshape(-1)[key]
        return own, top, n_top, second
    uk, inv, cnt = np.unique(key, return_inverse=True, return_counts=True)
    up = uk // n_values
    top = np.zeros(n_prompts, np.int64)
    np.maximum.at(top, up, cnt)
    n_top = np.bincount(up, weights=(cnt == top[up]), minlength=n_prompts).astype(np.int64)
    second = np.zeros(n_prompts, np.int64)
    below = cnt < top[up]
    np.maximum.at(second, up[below], cnt[below])
    return cnt[inv], top, n_top, second


def loo_outcomes(matrix) -> np.ndarray:
    """Outcome of each label against the leave-one-out mode of the other labels on its prompt.

    Returns an int8 array (length n_labels): 1 = equals the others' mode, 0 = differs from it,
    2 = the others' labels tie for the mode (skipped), 3 = nobody else labeled the prompt (skipped).

    Notes
    -----
    With own-value count ``cv``, the prompt's top count ``M`` reached by ``nM`` values and the next
    count ``M2``: if ``cv == M`` and ``nM == 1`` the others' mode is the label's own value when
    ``M − 1 > M2`` and a tie when ``M − 1 == M2``; if ``cv == M`` and ``nM == 2`` the others' mode is
    the other top value; with more tied tops, or ``cv < M`` and ``nM ≥ 2``, it is a tie; if
    ``cv < M`` and ``nM == 1`` the mode is the top value.
    """
    levels, codes = matrix.value_codes
    own, top, n_top, second = _value_count_stats(matrix.prompt, codes, matrix.n_prompts, len(levels))
    p = matrix.prompt
    M, nM, M2 = top[p], n_top[p], second[p]
    is_top = own == M
    out = np.full(matrix.n_labels, TIE, dtype=np.int8)
    # own value is the unique top
    uniq = is_top & (nM == 1)
    out[uniq & (M - 1 > M2)] = CORRECT
    # own value shares the top with exactly one other value -> that other value is the others' mode
    out[is_top & (nM == 2)] = WRONG
    # own value below a unique top
    out[~is_top & (nM == 1)] = WRONG
    out[matrix.prompt_counts[p] == 1] = ALONE
    return out


@dataclass(frozen=True)
class WorkerAccuracy:
    """Per-worker accuracy (columnar, matrix worker order).

    Attributes
    ----------
    reference : {"loo_mode", "gold"}
    worker_ids : ndarray
    n_labels : ndarray of int
        All the worker's labels.
    n_scored, n_correct : ndarray of int
        Labels that counted (N) and those equal to the reference.
    accuracy : ndarray of float
        ``n_correct / n_scored`` (NaN when nothing was scored).
    ci_normal, ci_wilson : ndarray, shape (n_workers, 2)
        95 % intervals (see :func:`normal_interval`, :func:`wilson_interval`).
    n_ties, n_alone : ndarray of int
        Labels skipped because the others tied, or nobody else labeled the prompt (LOO only).
    min_scored : int
        Workers with ``n_scored < min_scored`` are underpowered (by default :func:`power_cutoff`
        of the prompts the worker could be scored on; 60 in the study).
    min_scored_rule : str
        How ``min_scored`` was chosen, in words (stated in the report).
    """

    reference: str
    worker_ids: np.ndarray
    n_labels: np.ndarray
    n_scored: np.ndarray
    n_correct: np.ndarray
    accuracy: np.ndarray
    ci_normal: np.ndarray
    ci_wilson: np.ndarray
    n_ties: np.ndarray
    n_alone: np.ndarray
    min_scored: int = UNDERPOWERED_N
    min_scored_rule: str = "fixed"

    @property
    def underpowered(self) -> np.ndarray:
        """Boolean per worker: scored on fewer than ``min_scored`` prompts."""
        return self.n_scored < self.min_scored

    def _order(self) -> np.ndarray:
        scored = np.flatnonzero(self.n_scored > 0)
        # by label count (largest first), then by worker order
        return scored[np.argsort(-self.n_labels[scored], kind="stable")]

    def to_dict(self) -> list[dict]:
        """The spec's list: ``{"worker", "n_labels", "n_scored", "accuracy", "ci_normal", "ci_wilson"}``
        for each worker with at least one scored prompt, sorted by label count (largest first)."""
        order = self._order()
        ids = py(self.worker_ids[order])
        n_lab, n_sc = self.n_labels[order].tolist(), self.n_scored[order].tolist()
        acc = self.accuracy[order].tolist()
        cn, cw = self.ci_normal[order].tolist(), self.ci_wilson[order].tolist()
        return [
            {"worker": w, "n_labels": a, "n_scored": b, "accuracy": c, "ci_normal": d, "ci_wilson": e}
            for w, a, b, c, d, e in zip(ids, n_lab, n_sc, acc, cn, cw)
        ]

    def summary(self) -> dict:
        """Counts around the list: underpowered workers, skipped labels, pooled accuracy."""
        scored = self.n_scored > 0
        total_scored = int(self.n_scored.sum())
        under = scored & self.underpowered
        return {
            "reference": self.reference,
            "n_workers_scored": int(scored.sum()),
            "min_scored_for_power": self.min_scored,
            "min_scored_rule": self.min_scored_rule,
            "n_underpowered": int(under.sum()),
            "underpowered": [py(w) for w in self.worker_ids[under]],
            "n_scored": total_scored,
            "n_correct": int(self.n_correct.sum()),
            "pooled_accuracy": (float(self.n_correct.sum() / total_scored) if total_scored else None),
            "mean_worker_accuracy": (float(np.mean(self.accuracy[scored])) if scored.any() else None),
            "skipped_ties": int(self.n_ties.sum()),
            "skipped_alone": int(self.n_alone.sum()),
            "ci_normal_z": STUDY_Z,
            "ci_wilson_confidence": 0.95,
        }


def _per_worker(
    matrix,
    reference: str,
    correct: np.ndarray,
    scored: np.ndarray,
    ties: np.ndarray,
    alone: np.ndarray,
    min_scored: tuple[int, str],
    confidence: float,
) -> WorkerAccuracy:
    n = matrix.n_workers
    w = matrix.worker
    n_scored = np.bincount(w, weights=scored, minlength=n).astype(np.int64)
    n_correct = np.bincount(w, weights=correct & scored, minlength=n).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = n_correct / n_scored
    nlo, nhi = normal_interval(n_correct, n_scored)
    wlo, whi = wilson_interval(n_correct, n_scored, confidence=confidence)
    return WorkerAccuracy(
        reference=reference,
        worker_ids=matrix.worker_ids,
        n_labels=matrix.worker_counts.astype(np.int64),
        n_scored=n_scored,
        n_correct=n_correct,
        accuracy=np.where(n_scored > 0, acc, np.nan),
        ci_normal=np.column_stack([nlo, nhi]),
        ci_wilson=np.column_stack([wlo, whi]),
        n_ties=np.bincount(w, weights=ties, minlength=n).astype(np.int64),
        n_alone=np.bincount(w, weights=alone, minlength=n).astype(np.int64),
        min_scored=min_scored[0],
        min_scored_rule=min_scored[1],
    )


def _check_min(min_scored: Any, n_prompts: int) -> tuple[int, str]:
    """``(cut-off, rule in words)``: a given integer, or None for :func:`power_cutoff` of ``n_prompts``."""
    if min_scored is None:
        return power_cutoff(n_prompts), f"min({UNDERPOWERED_N}, max({MIN_SCORED_FLOOR}, ⌈{n_prompts} prompts / 4⌉))"
    if isinstance(min_scored, bool) or not isinstance(min_scored, (int, np.integer)) or min_scored < 0:
        raise ValueError(f"min_scored: expected a non-negative integer or None, got {min_scored!r}")
    return int(min_scored), "fixed"


def loo_accuracy(matrix, *, min_scored: int | None = None, confidence: float = 0.95) -> WorkerAccuracy:
    """Each worker's accuracy against the mode of the other workers' labels (ties skipped).

    Parameters
    ----------
    matrix : LabelMatrix
        Labels are compared as scaled values (after binarization), as in the study.
    min_scored : int, optional
        Workers scored on fewer prompts are flagged underpowered. Default: :func:`power_cutoff` of
        the matrix's prompts (60 on any campaign of 240 prompts or more, as in the study).
    confidence : float
        Level of the Wilson interval (the normal interval uses the study's z = 1.96).

    Returns
    -------
    WorkerAccuracy

    Notes
    -----
    A label is skipped when the others tie for the mode or when nobody else labeled the prompt; a
    worker with nothing scored is left out of :meth:`WorkerAccuracy.to_dict`. O(L).

    Examples
    --------
    >>> from audits.engine.matrix import LabelMatrix
    >>> m = LabelMatrix.from_triples(["a", "b", "c", "a", "b", "c"], [1, 1, 1, 2, 2, 2], [1, 1, 0, 0, 0, 0])
    >>> acc = loo_accuracy(m)
    >>> acc.n_scored.tolist(), acc.n_correct.tolist()  # a and b: the others tie 1-1 on prompt 1
    ([1, 1, 2], [1, 1, 1])
    """
    min_scored = _check_min(min_scored, matrix.n_prompts)
    out = loo_outcomes(matrix)
    scored = (out == CORRECT) | (out == WRONG)
    return _per_worker(matrix, "loo_mode", out == CORRECT, scored, out == TIE, out == ALONE, min_scored, confidence)


def gold_accuracy(matrix, *, min_scored: int | None = None, confidence: float = 0.95) -> WorkerAccuracy:
    """Each worker's accuracy against the prompts' gold labels (labels on prompts without gold skipped).

    Same shape as :func:`loo_accuracy`; ``n_ties`` and ``n_alone`` are 0. The default ``min_scored``
    is :func:`power_cutoff` of the prompts that have gold.
    """
    min_scored = _check_min(min_scored, int(np.isfinite(matrix.gold).sum()))
    g = matrix.gold[matrix.prompt]
    scored = ~np.isnan(g)
    correct = scored & (matrix.value == g)
    zero = np.zeros(matrix.n_labels, dtype=bool)
    return _per_worker(matrix, "gold", correct, scored, zero, zero, min_scored, confidence)


@dataclass(frozen=True)
class Regression:
    """Least-squares line ``accuracy = intercept + slope · noise`` over workers.

    ``f`` is the F statistic of the slope (F(1, n − 2) = t²) and ``p`` its two-sided p-value;
    ``None`` with ``reason`` when the fit is undefined (fewer than 3 workers, constant noise).
    """

    noise: str
    n: int
    slope: float | None
    intercept: float | None
    r2: float | None
    f: float | None
    p: float | None
    stderr: float | None
    reason: str | None = None

    def to_dict(self) -> dict:
        return {
            "noise": self.noise,
            "n": self.n,
            "slope": self.slope,
            "intercept": self.intercept,
            "r2": self.r2,
            "f": self.f,
            "p": self.p,
            "stderr": self.stderr,
            "reason": self.reason,
        }


def least_squares(x: Any, y: Any) -> tuple[float, float, float, float, float, float]:
    """Simple linear regression of ``y`` on ``x`` with the F test of its slope.

    .. math::

        b = \\frac{S_{xy}}{S_{xx}},\\quad a = \\bar y - b \\bar x,\\quad r^2 = \\frac{S_{xy}^2}{S_{xx} S_{yy}},\\quad
        F = \\frac{r^2 (n-2)}{1-r^2} \\sim F(1, n-2),\\quad
        \\mathrm{se}(b) = \\sqrt{\\frac{(1-r^2) S_{yy}}{(n-2) S_{xx}}}

    Returns ``(slope, intercept, r2, F, p, stderr)``, the numbers of ``scipy.stats.linregress``
    (its two-sided t test of the slope has the F test's p, since F = t²; the tests check both
    agree to 1e-12). Written over numpy with ``scipy.special.fdtrc`` for the p-value because
    importing ``scipy.stats`` costs ~0.8 s, most of a 10k-label report's start-up budget of 1 s.
    Needs n ≥ 3 and neither ``x`` nor ``y`` constant (r² would be 0/0); ``F`` is inf for a perfect fit.
    """
    from scipy import special  # imported here, for import speed (the docstring says why)

    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n = x.size
    dx, dy = x - x.mean(), y - y.mean()
    sxx, syy, sxy = float(dx @ dx), float(dy @ dy), float(dx @ dy)
    slope = sxy / sxx
    intercept = float(y.mean() - slope * x.mean())
    r2 = min(sxy * sxy / (sxx * syy), 1.0)
    df = n - 2
    f = r2 * df / (1 - r2) if r2 < 1 else float("inf")
    p = float(special.fdtrc(1, df, f))
    stderr = float(np.sqrt((1 - r2) * syy / sxx / df))
    return slope, intercept, r2, f, p, stderr


def noise_accuracy_regression(
    noise: WorkerNoise, accuracy: WorkerAccuracy, *, min_scored: int = 1
) -> dict[str, Regression]:
    """Regress worker accuracy on each per-worker noise type (:func:`least_squares`).

    Parameters
    ----------
    noise : WorkerNoise
        From :func:`audits.engine.noise.worker_noise` (same matrix, so the same worker order).
    accuracy : WorkerAccuracy
        From :func:`loo_accuracy` or :func:`gold_accuracy`.
    min_scored : int
        Only workers scored on at least this many prompts enter (use 60 for the study's cut-off).

    Returns
    -------
    dict
        ``{noise name: Regression}`` for the six numbers; a fit needs ≥ 3 workers where both the
        noise and the accuracy are defined, and a noise that is not constant.
    """
    if not np.array_equal(np.asarray(noise.worker_ids), np.asarray(accuracy.worker_ids)):
        raise ValueError("accuracy: its workers differ from the noise's (compute both on the same matrix)")
    out = {}
    base = (accuracy.n_scored >= max(int(min_scored), 1)) & ~np.isnan(accuracy.accuracy)
    for k in NOISE_KEYS:
        x = np.asarray(getattr(noise, k), dtype=np.float64)
        ok = base & ~np.isnan(x)
        n = int(ok.sum())
        if n < 3:
            out[k] = Regression(
                k,
                n,
                None,
                None,
                None,
                None,
                None,
                None,
                reason=f"{n} worker(s) with both values; a fit with an F test needs at least 3",
            )
            continue
        xs, ys = x[ok], accuracy.accuracy[ok]
        constant = next((what for what, v in (("noise", xs), ("accuracy", ys)) if np.all(v == v[0])), None)
        if constant:
            out[k] = Regression(
                k, n, None, None, None, None, None, None, reason=f"the {constant} is the same for every worker"
            )
            continue
        slope, intercept, r2, f, p, stderr = least_squares(xs, ys)
        out[k] = Regression(
            k,
            n,
            slope,
            intercept,
            r2,
            f if np.isfinite(f) else None,
            p,
            stderr,
            reason=None if np.isfinite(f) else "perfect fit (r² = 1): F is infinite",
        )
    return out
