"""Noise partitions for evaluating a model (``noise-audit.md``, "Noise partitions").

For prompts with exactly k labels, the minority count ``d = min(#1, #0)`` splits them into
partitions d = 0 (unanimous), 1 (moderate), 2 (noisy when k = 5), … up to ⌊k/2⌋. For non-binary
scaled values the minority count generalises to ``k − (count of the modal value)``, which equals
``min(#1, #0)`` on binary data. A system's predictions are scored per partition against the modal
label and against gold, with a two-proportion z-test between partitions.

With adaptive k a prompt's final k varies (from a least to a most number of labels), and a minority
count means something else at each: :func:`partitions_by_k` counts the partitions per final k.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from audits.engine._util import keys_values, positions

__all__ = [
    "Partitions",
    "PartitionScore",
    "ProportionTest",
    "PartitionScores",
    "minority_counts",
    "modal_labels",
    "noise_partitions",
    "partitions_by_k",
    "score_partitions",
    "two_proportion_ztest",
    "align_predictions",
]


def _top_counts(matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per prompt: top value count, how many values reach it, and the code of the (first) top value."""
    levels, codes = matrix.value_codes
    V = max(len(levels), 1)
    m = matrix.n_prompts
    key = matrix.prompt.astype(np.int64) * V + codes
    if m * V <= 50_000_000:
        cnt = np.bincount(key, minlength=m * V).reshape(m, V)
        top = cnt.max(axis=1) if m else np.zeros(0, np.int64)
        n_top = (cnt == top[:, None]).sum(axis=1)
        arg = cnt.argmax(axis=1) if m else np.zeros(0, np.int64)
        return top, n_top, arg
    uk, cnt = np.unique(key, return_counts=True)
    up, uc = uk // V, uk % V
    top = np.zeros(m, np.int64)
    np.maximum.at(top, up, cnt)
    is_top = cnt == top[up]
    n_top = np.bincount(up, weights=is_top, minlength=m).astype(np.int64)
    arg = np.zeros(m, np.int64)
    # first top code per prompt: keys are sorted, so assign in reverse to keep the first
    idx = np.flatnonzero(is_top)[::-1]
    arg[up[idx]] = uc[idx]
    return top, n_top, arg


def minority_counts(matrix) -> np.ndarray:
    """Per prompt: ``count − (count of its modal value)``; ``min(#1, #0)`` for binary labels."""
    top, _, _ = _top_counts(matrix)
    return (matrix.prompt_counts - top).astype(np.int64)


def modal_labels(matrix) -> np.ndarray:
    """Per prompt: the scaled value of the unique modal label, NaN when the top count is tied."""
    levels, _ = matrix.value_codes
    top, n_top, arg = _top_counts(matrix)
    out = np.full(matrix.n_prompts, np.nan)
    uniq = n_top == 1
    out[uniq] = np.asarray(levels)[arg[uniq]]
    return out


def _most_common_count(counts: np.ndarray) -> int:
    if counts.size == 0:
        return 0
    freq = np.bincount(counts)
    best = freq.max()
    return int(np.flatnonzero(freq == best).max())  # ties: the larger label count


@dataclass(frozen=True)
class Partitions:
    """Prompts with exactly k labels, counted by minority count.

    Attributes
    ----------
    k : int
    k_source : {"given", "most common label count"}
    counts : dict {d: number of prompts}
        Every d from 0 to max(⌊k/2⌋, largest observed) is present (zeros included).
    n_prompts_with_k, n_prompts_other : int
        Prompts with exactly k labels, and the rest (left out).
    minority : ndarray of int, shape (n_prompts,)
        Each prompt's minority count (also for prompts without k labels).
    """

    k: int
    k_source: str
    counts: dict
    n_prompts_with_k: int
    n_prompts_other: int
    minority: np.ndarray = field(repr=False)

    def to_dict(self) -> dict:
        """The spec's ``{"<minority count>": number of prompts}``."""
        return {str(d): int(n) for d, n in self.counts.items()}

    def meta(self) -> dict:
        return {
            "k": self.k,
            "k_source": self.k_source,
            "n_prompts_with_k": self.n_prompts_with_k,
            "n_prompts_other": self.n_prompts_other,
        }


def noise_partitions(matrix, *, k: int | None = None) -> Partitions:
    """Count prompts with exactly ``k`` labels by minority count.

    Parameters
    ----------
    matrix : LabelMatrix
    k : int, optional
        Label count per prompt; default the most common one (ties → the larger count).

    Returns
    -------
    Partitions

    Examples
    --------
    >>> from audits.engine.matrix import LabelMatrix
    >>> m = LabelMatrix.from_triples(list("abcabc"), [1, 1, 1, 2, 2, 2], [1, 1, 1, 1, 0, 1])
    >>> noise_partitions(m).to_dict()
    {'0': 1, '1': 1}
    """
    counts = matrix.prompt_counts
    if k is None:
        k_val, source = _most_common_count(counts), "most common label count"
    else:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"k: expected a positive integer, got {k!r}")
        k_val, source = int(k), "given"
    d = minority_counts(matrix)
    sel = counts == k_val
    hist = np.bincount(d[sel], minlength=k_val // 2 + 1) if sel.any() else np.zeros(k_val // 2 + 1, np.int64)
    return Partitions(
        k=k_val,
        k_source=source,
        counts={int(i): int(n) for i, n in enumerate(hist)},
        n_prompts_with_k=int(sel.sum()),
        n_prompts_other=int((~sel).sum()),
        minority=d,
    )


def partitions_by_k(matrix, *, k_min: int, k_max: int) -> dict[int, dict[int, int]]:
    """Prompts by final k (their label count, from ``k_min`` to ``k_max``) and minority count.

    Adaptive k stops a prompt between a least and a most number of labels, so one minority count means
    different things across prompts (1 of 3 is not 1 of 7). Each k gets its own partitions, as
    :func:`noise_partitions` counts them for that k: every d from 0 to ⌊k/2⌋ is present (zeros
    included). Prompts with a label count outside the range (still being labeled) are left out.

    Returns
    -------
    dict {k: {d: number of prompts}}, every k from ``k_min`` to ``k_max``.

    Examples
    --------
    >>> from audits.engine.matrix import LabelMatrix
    >>> m = LabelMatrix.from_triples(list("abcdabca"), [1, 1, 1, 1, 2, 2, 2, 3], [1, 1, 1, 1, 1, 0, 1, 1])
    >>> partitions_by_k(m, k_min=3, k_max=4)
    {3: {0: 0, 1: 1}, 4: {0: 1, 1: 0, 2: 0}}
    """
    for name, value in (("k_min", k_min), ("k_max", k_max)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name}: expected a positive integer, got {value!r}")
    if k_max < k_min:
        raise ValueError(f"k_max: expected at least k_min = {k_min}, got {k_max}")
    counts = matrix.prompt_counts
    d = minority_counts(matrix)
    out = {}
    for k in range(int(k_min), int(k_max) + 1):
        sel = counts == k
        hist = np.bincount(d[sel], minlength=k // 2 + 1) if sel.any() else np.zeros(k // 2 + 1, np.int64)
        out[k] = {int(i): int(n) for i, n in enumerate(hist)}
    return out


def two_proportion_ztest(x1: int, n1: int, x2: int, n2: int) -> tuple[float | None, float | None, str | None]:
    """Pooled two-proportion z-test of ``x1/n1`` vs ``x2/n2`` (two-sided).

    .. math::

        z = \\frac{\\hat p_1 - \\hat p_2}{\\sqrt{\\hat p (1 - \\hat p)(1/n_1 + 1/n_2)}},\\qquad
        \\hat p = \\frac{x_1 + x_2}{n_1 + n_2},\\qquad p = 2\\,\\Phi(-|z|)

    ``z²`` equals the Pearson chi-square of the 2×2 table without continuity correction
    (``scipy.stats.chi2_contingency(..., correction=False)``), and the p-values agree.

    Returns ``(z, p, reason)``; ``z`` and ``p`` are None with a reason when a group is empty or the
    pooled proportion is 0 or 1 (no variance).
    """
    from scipy import special  # Φ as scipy.stats.norm.sf computes it, without importing scipy.stats

    if n1 <= 0 or n2 <= 0:
        return None, None, "a partition has no scored prompts"
    p1, p2 = x1 / n1, x2 / n2
    pool = (x1 + x2) / (n1 + n2)
    var = pool * (1 - pool) * (1 / n1 + 1 / n2)
    if var <= 0:
        return None, None, "pooled proportion is 0 or 1: no variance to test"
    z = (p1 - p2) / np.sqrt(var)
    return float(z), float(2 * special.ndtr(-abs(z))), None


@dataclass(frozen=True)
class PartitionScore:
    """A system's accuracy on one partition, against the modal label and against gold."""

    minority: int
    n_prompts: int
    n_modal: int
    correct_modal: int
    accuracy_modal: float | None
    n_gold: int
    correct_gold: int
    accuracy_gold: float | None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class ProportionTest:
    """Two-proportion z-test between partitions ``a`` and ``b`` against one reference."""

    reference: str
    a: int
    b: int
    z: float | None
    p: float | None
    reason: str | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class PartitionScores:
    """Per-partition accuracy of a system and z-tests between every pair of partitions."""

    k: int
    rows: list
    tests: list
    n_predictions: int
    n_unmatched: int
    n_invalid: int

    def to_dict(self) -> dict:
        return {
            "k": self.k,
            "n_predictions": self.n_predictions,
            "n_unmatched": self.n_unmatched,
            "n_invalid": self.n_invalid,
            "partitions": {str(r.minority): r.to_dict() for r in self.rows},
            "tests": [t.to_dict() for t in self.tests],
        }


def align_predictions(matrix, predictions: Any, *, scale: str = "raw") -> tuple[np.ndarray, int, int]:
    """Per-prompt predictions as scaled values, from a mapping ``{prompt id: value}`` (or Series).

    ``scale="raw"`` sends values through the matrix's binarization/rescale; ``"scaled"`` takes them as
    they are. Returns ``(pred, n_unmatched, n_invalid)``: NaN where a prompt has no usable
    prediction; ids not in the matrix are counted as unmatched.
    """
    if scale not in ("raw", "scaled"):
        raise ValueError(f"scale: expected 'raw' or 'scaled', got {scale!r}")
    keys, vals = keys_values(predictions)
    pos = positions(matrix.prompt_ids, keys)
    keep = pos >= 0
    arr = np.empty(len(vals), dtype=object)
    arr[:] = vals
    arr = arr[keep]
    if scale == "raw":
        scaled = matrix.transform(arr)
    else:
        scaled = np.array([float(v) if v is not None else np.nan for v in arr], dtype=np.float64)
    out = np.full(matrix.n_prompts, np.nan)
    out[pos[keep]] = scaled
    return out, int((~keep).sum()), int(np.isnan(scaled).sum())


def score_partitions(matrix, predictions: Any, *, k: int | None = None, scale: str = "raw") -> PartitionScores:
    """Score a system's predictions per noise partition against the modal label and gold.

    Parameters
    ----------
    matrix : LabelMatrix
    predictions : mapping {prompt id: predicted label} or pandas Series
    k : int, optional
        As in :func:`noise_partitions`.
    scale : {"raw", "scaled"}
        Whether predictions are raw values (binarized like the labels) or already scaled values.

    Returns
    -------
    PartitionScores

    Notes
    -----
    Only prompts with exactly k labels and a prediction count. Against the modal label, prompts
    whose mode is tied (even k) are left out; against gold, prompts without gold are left out.
    The z-tests compare every pair of partitions (see :func:`two_proportion_ztest`).
    """
    parts = noise_partitions(matrix, k=k)
    pred, unmatched, invalid = align_predictions(matrix, predictions, scale=scale)
    modal = modal_labels(matrix)
    sel = (matrix.prompt_counts == parts.k) & ~np.isnan(pred)
    rows = []
    for d in parts.counts:
        in_d = sel & (parts.minority == d)
        has_mode = in_d & ~np.isnan(modal)
        has_gold = in_d & ~np.isnan(matrix.gold)
        cm = int((pred[has_mode] == modal[has_mode]).sum())
        cg = int((pred[has_gold] == matrix.gold[has_gold]).sum())
        nm, ng = int(has_mode.sum()), int(has_gold.sum())
        rows.append(
            PartitionScore(d, int(in_d.sum()), nm, cm, cm / nm if nm else None, ng, cg, cg / ng if ng else None)
        )
    tests = []
    for ref, n_attr, c_attr in (("modal", "n_modal", "correct_modal"), ("gold", "n_gold", "correct_gold")):
        for i in range(len(rows)):
            for j in range(i + 1, len(rows)):
                a, b = rows[i], rows[j]
                z, p, why = two_proportion_ztest(
                    getattr(a, c_attr), getattr(a, n_attr), getattr(b, c_attr), getattr(b, n_attr)
                )
                tests.append(ProportionTest(ref, a.minority, b.minority, z, p, why))
    return PartitionScores(parts.k, rows, tests, int(np.sum(~np.isnan(pred))), unmatched, invalid)
