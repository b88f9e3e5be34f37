"""Straight-lining: workers who give the same answer to (nearly) every prompt.

A worker who presses the same button whatever the prompt says may still agree with the others
often enough to pass the leave-one-out outlier test (on a campaign where half the prompts are
true, "always true" is right half the time, and on a noisy crowd half is not far below the pool).
So Chorus looks at the answers themselves. With ``n`` the worker's labels, ``c`` the count of their
most frequent value ``v`` and ``q`` the share of ``v`` among the *other* workers' labels, the
worker is flagged when all three hold:

1. ``n ≥ 10`` (:data:`MIN_LABELS`): fewer answers cannot tell a habit from the prompts they drew;
   the same floor as the accuracy's (:data:`audits.engine.accuracy.MIN_SCORED_FLOOR`).
2. ``c / n ≥ 0.9`` (:data:`MIN_SHARE`): one answer to (nearly) everything.
3. ``P(X ≥ c) < 0.01`` for ``X ~ Binomial(n, q)`` (:data:`ALPHA`): a worker who answered like the
   rest of the crowd would almost never give ``v`` that often. This keeps careful workers on a
   skewed campaign unflagged: if 95 % of the prompts are true, the others say "true" 95 % of the
   time and so may a careful worker.

Everything is computed on the scaled values the audit uses (after binarization). Two entry points
give the same :class:`StraightLining`: :func:`straight_lining` on a label matrix (the full report)
and :func:`straight_lining_binary` on per-worker counts and sums of 0/1 scaled values (the live
statistics: for binary values the sum is the count of 1s, which is all the rule needs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from audits.engine._util import py

__all__ = [
    "StraightLining",
    "straight_lining",
    "straight_lining_binary",
    "binomial_tail",
    "MIN_LABELS",
    "MIN_SHARE",
    "ALPHA",
]

MIN_LABELS = 10
MIN_SHARE = 0.9
ALPHA = 0.01


def binomial_tail(c: int, n: int, q: float) -> float:
    """``P(X ≥ c)`` for ``X ~ Binomial(n, q)``.

    .. math:: P(X \\ge c) = \\sum_{j=c}^{n} \\binom{n}{j} q^j (1-q)^{n-j}

    computed by ``scipy.special.bdtrc(c − 1, n, q)`` (the regularised incomplete beta function;
    ``scipy.stats.binom.sf(c − 1, n, q)`` agrees to about 1e-12 and costs a second more to import).
    A tail below the smallest float is 0.

    >>> round(binomial_tail(20, 20, 0.5), 9), binomial_tail(0, 5, 0.3), binomial_tail(3, 5, 0.0)
    (9.54e-07, 1.0, 0.0)
    """
    if c <= 0:
        return 1.0
    if c > n or q <= 0.0:
        return 0.0
    if q >= 1.0:
        return 1.0
    from scipy import special  # imported here: scipy.special costs a few tenths of a second to import

    return float(special.bdtrc(c - 1, n, q))


def _fmt_value(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


@dataclass(frozen=True)
class StraightLining:
    """Per worker (columnar, in the order given): the most frequent answer and whether it is a habit.

    Attributes
    ----------
    worker_ids : ndarray
    n_labels : ndarray of int
        ``n``: the worker's labels.
    value : ndarray of float
        ``v``: the worker's most frequent value (the smaller one on a tie).
    top_count : ndarray of int
        ``c``: labels equal to ``v``.
    share : ndarray of float
        ``c / n``.
    others_share : ndarray of float
        ``q``: share of ``v`` among the other workers' labels (NaN when there are none).
    p_value : ndarray of float
        ``P(X ≥ c)``, ``X ~ Binomial(n, q)``; NaN for workers that fail rule 1 or 2 (not computed).
    flagged : ndarray of bool
    min_labels, min_share, alpha : the rule's thresholds.
    """

    worker_ids: np.ndarray
    n_labels: np.ndarray
    value: np.ndarray
    top_count: np.ndarray
    share: np.ndarray
    others_share: np.ndarray
    p_value: np.ndarray
    flagged: np.ndarray
    min_labels: int = MIN_LABELS
    min_share: float = MIN_SHARE
    alpha: float = ALPHA

    def reason(self, i: int, names: Mapping | None = None) -> str:
        """Worker ``i``'s flag in words, e.g. ``"answers 1 to 100 % of 20 prompts (the others: 55 %)"``.

        ``names`` maps a scaled value to the words a researcher knows it by (``{1.0: "Plausible"}``).
        """
        v = float(self.value[i])
        word = (names or {}).get(v)
        what = f"{_fmt_value(v)} ({word})" if word else _fmt_value(v)
        text = f"answers {what} to {self.share[i] * 100:.0f} % of {int(self.n_labels[i])} prompts"
        q = self.others_share[i]
        return text if np.isnan(q) else f"{text} (the other workers: {q * 100:.0f} %)"

    def rule(self) -> dict:
        return {
            "min_labels": self.min_labels,
            "min_share": self.min_share,
            "alpha": self.alpha,
            "reference": "share of the answer among the other workers' labels (binomial tail)",
        }

    def to_dict(self, names: Mapping | None = None) -> dict:
        """``{"rule": {...}, "workers": [...]}``: one entry per flagged worker, most labels first."""
        idx = np.flatnonzero(self.flagged)
        idx = idx[np.argsort(-self.n_labels[idx], kind="stable")]
        workers = [
            {
                "worker": py(self.worker_ids[i]),
                "n_labels": int(self.n_labels[i]),
                "value": py(self.value[i]),
                "share": float(self.share[i]),
                "others_share": py(self.others_share[i]),
                "p": float(self.p_value[i]),
                "reason": self.reason(i, names),
            }
            for i in idx.tolist()
        ]
        return {"rule": self.rule(), "workers": workers}


def _rule(
    worker_ids, n, value, top, others_share, *, min_labels: int, min_share: float, alpha: float
) -> StraightLining:
    for name, x, lo, hi in (("min_share", min_share, 0.5, 1.0), ("alpha", alpha, 0.0, 1.0)):
        if not lo < x <= hi:
            raise ValueError(f"{name}: expected a number in ({lo}, {hi}], got {x!r}")
    if isinstance(min_labels, bool) or not isinstance(min_labels, (int, np.integer)) or min_labels < 1:
        raise ValueError(f"min_labels: expected a positive integer, got {min_labels!r}")
    n = np.asarray(n, dtype=np.int64)
    top = np.asarray(top, dtype=np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(n > 0, top / np.maximum(n, 1), np.nan)
    others_share = np.asarray(others_share, dtype=np.float64)
    p = np.full(n.shape, np.nan)
    candidates = np.flatnonzero((n >= min_labels) & (share >= min_share) & ~np.isnan(others_share))
    for i in candidates.tolist():
        p[i] = binomial_tail(int(top[i]), int(n[i]), float(others_share[i]))
    flagged = np.zeros(n.shape, dtype=bool)
    flagged[candidates] = p[candidates] < alpha
    return StraightLining(
        np.asarray(worker_ids, dtype=object),
        n,
        np.asarray(value, dtype=np.float64),
        top,
        share,
        others_share,
        p,
        flagged,
        int(min_labels),
        float(min_share),
        float(alpha),
    )


def straight_lining(
    matrix, *, min_labels: int = MIN_LABELS, min_share: float = MIN_SHARE, alpha: float = ALPHA
) -> StraightLining:
    """The straight-lining rule (module docstring) for every worker of a label matrix.

    Parameters
    ----------
    matrix : LabelMatrix
        Scaled values (binary, or any finite set of values).
    min_labels, min_share, alpha
        The rule's thresholds.

    Returns
    -------
    StraightLining
        In matrix worker order.

    Notes
    -----
    ``q`` for worker a and value v is ``(labels equal to v − a's) / (all labels − a's)``: NaN for a
    worker alone in the matrix, who is never flagged. O(L) for few distinct values, else a sort.

    Examples
    --------
    >>> from audits.engine.matrix import LabelMatrix
    >>> w = ["a"] * 12 + ["b"] * 12 + ["c"] * 12  # a always says 1; b and c alternate
    >>> v = [1] * 12 + [j % 2 for j in range(12)] * 2
    >>> s = straight_lining(LabelMatrix.from_triples(w, list(range(12)) * 3, v))
    >>> s.flagged.tolist(), s.reason(0)
    ([True, False, False], 'answers 1 to 100 % of 12 prompts (the other workers: 50 %)')
    """
    levels, codes = matrix.value_codes
    q, nw = len(levels), matrix.n_workers
    w = matrix.worker.astype(np.int64)
    if q == 0:  # no labels, so no workers
        top_code = top = np.zeros(nw, np.int64)
    elif nw * q <= 50_000_000:
        cnt = np.bincount(w * q + codes, minlength=nw * q).reshape(nw, q)
        top_code = cnt.argmax(axis=1)  # the first (smallest) value on a tie
        top = cnt[np.arange(nw), top_code]
    else:
        keys, counts = np.unique(w * q + codes, return_counts=True)
        kw = keys // q
        order = np.lexsort((keys % q, -counts, kw))  # by worker, then most labels, then smallest value
        first = order[np.r_[True, kw[order][1:] != kw[order][:-1]]]
        top_code = np.zeros(nw, np.int64)
        top = np.zeros(nw, np.int64)
        top_code[kw[first]] = keys[first] % q
        top[kw[first]] = counts[first]
    n = matrix.worker_counts.astype(np.int64)
    per_value = np.bincount(codes, minlength=q)
    rest = matrix.n_labels - n
    with np.errstate(invalid="ignore", divide="ignore"):
        others = np.where(rest > 0, (per_value[top_code] - top) / np.maximum(rest, 1), np.nan)
    value = levels[top_code] if q else np.zeros(nw)
    return _rule(matrix.worker_ids, n, value, top, others, min_labels=min_labels, min_share=min_share, alpha=alpha)


def straight_lining_binary(
    worker_ids: Any,
    count: Any,
    ones: Any,
    *,
    min_labels: int = MIN_LABELS,
    min_share: float = MIN_SHARE,
    alpha: float = ALPHA,
) -> StraightLining:
    """The same rule from per-worker sufficient statistics of 0/1 scaled values.

    Parameters
    ----------
    worker_ids : array_like
    count : array_like of int
        Each worker's labels.
    ones : array_like
        Each worker's sum of scaled values, i.e. their count of 1s.

    Returns
    -------
    StraightLining
        Identical to :func:`straight_lining` on the same 0/1 labels (the tests check it); the crowd
        is the workers given, so pass every worker of the campaign.

    Examples
    --------
    >>> s = straight_lining_binary(["spam", "a", "b"], [12, 12, 12], [12, 6, 6])
    >>> s.flagged.tolist(), s.value.tolist(), round(float(s.others_share[0]), 2)
    ([True, False, False], [1.0, 0.0, 0.0], 0.5)
    """
    n = np.asarray(count, dtype=np.int64)
    ones = np.rint(np.asarray(ones, dtype=np.float64)).astype(np.int64)
    zeros = n - ones
    value = (ones > zeros).astype(np.float64)  # 0 on a tie, as the matrix path (the smaller value)
    top = np.maximum(ones, zeros)
    total_ones, total = int(ones.sum()), int(n.sum())
    rest = total - n
    same = np.where(value == 1.0, total_ones - ones, (total - total_ones) - zeros)
    with np.errstate(invalid="ignore", divide="ignore"):
        others = np.where(rest > 0, same / np.maximum(rest, 1), np.nan)
    return _rule(worker_ids, n, value, top, others, min_labels=min_labels, min_share=min_share, alpha=alpha)
