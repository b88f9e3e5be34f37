"""The study's tables and figures as data: Table 2's row of one label set (its six numbers, α, label
counts and accuracies), the same row per group of prompts with the study's two-proportion test,
Fig. 5's accuracy per minimum-label threshold and Fig. 6's regression line with its 95 % band.

Pure functions over the engine's results (no Django): :func:`table_row` reads a full report dict
(:meth:`audits.engine.report.AuditReport.to_dict`, as stored in a snapshot); :func:`matrix_row`
computes the same row from a matrix with only the pieces the row needs, so a campaign's groups can
be tabulated per request without a full report each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from audits.engine._util import py
from audits.engine.accuracy import gold_accuracy, least_squares, loo_accuracy
from audits.engine.agreement import krippendorff_alpha
from audits.engine.noise import NOISE_KEYS, noise_audit
from audits.engine.partitions import two_proportion_ztest

__all__ = [
    "TABLE_KEYS",
    "accuracy_by_threshold",
    "box_thresholds",
    "group_rows",
    "matrix_row",
    "regression_band",
    "table_row",
]

#: The columns of the study's Table 2, in order (all but the counts may be None: undefined).
TABLE_KEYS = (
    "n_workers",
    "n_prompts",
    "n_labels",
    *NOISE_KEYS,
    "alpha_nominal",
    "accuracy_others",
    "accuracy_gold",
    "mean_others",
    "mean_gold",
    "system_noise_study",
)


def table_row(report: Mapping) -> dict:
    """Table 2's row of one full report dict.

    ``accuracy_others`` / ``accuracy_gold`` are the pooled accuracy against the leave-one-out mode
    of the others / against gold (correct over scored labels of all workers together,
    ``*_summary.pooled_accuracy``, as the glossary's reference values); ``mean_*`` the mean over
    workers of each worker's accuracy. ``alpha_nominal`` is Krippendorff's α (nominal) on the raw
    labels. ``system_noise_study`` is the study's "system noise" ``sqrt(LN² + PN_orig²)`` (the
    report's key; the specification's is ``system_noise_orig``). A section the report lacks gives None.

    >>> table_row({"n_labels": 3, "accuracy_summary": {"pooled_accuracy": 0.5}})["accuracy_others"]
    0.5
    """
    others = report.get("accuracy_summary") or {}
    gold = report.get("accuracy_gold_summary") or {}
    alpha = (report.get("agreement") or {}).get("alpha_nominal") or {}
    row = {k: report.get(k) for k in ("n_workers", "n_prompts", "n_labels", *NOISE_KEYS, "system_noise_study")}
    row.update(
        alpha_nominal=alpha.get("value"),
        accuracy_others=others.get("pooled_accuracy"),
        accuracy_gold=gold.get("pooled_accuracy"),
        mean_others=others.get("mean_worker_accuracy"),
        mean_gold=gold.get("mean_worker_accuracy"),
    )
    return row


def matrix_row(matrix, *, ddof: int = 1) -> dict:
    """Table 2's row computed on a matrix: the same numbers as ``table_row(full_report(matrix).to_dict())``
    (the tests check it), from only the six numbers, α (nominal) and the two accuracies."""
    return _row_and_counts(matrix, ddof)[0]


def _row_and_counts(matrix, ddof: int) -> tuple[dict, dict]:
    """:func:`matrix_row` and, per reference (``"others"``, ``"gold"``), (correct, scored) labels."""
    audit = noise_audit(matrix, ddof=ddof)
    report: dict[str, Any] = {k: py(getattr(audit, k)) for k in NOISE_KEYS}
    report.update(n_workers=audit.n_workers, n_prompts=audit.n_prompts, n_labels=audit.n_labels)
    report["system_noise_study"] = py(audit.system_noise_study)
    if matrix.n_labels:
        report["agreement"] = {"alpha_nominal": krippendorff_alpha(matrix, level="nominal").to_dict()}
    counts = {"others": (0, 0), "gold": (0, 0)}
    for ref, acc in (("others", loo_accuracy(matrix)), ("gold", gold_accuracy(matrix) if matrix.has_gold else None)):
        if acc is not None:
            report[f"accuracy{'_gold' if ref == 'gold' else ''}_summary"] = acc.summary()
            counts[ref] = (int(acc.n_correct.sum()), int(acc.n_scored.sum()))
    return py(table_row(report)), counts


def group_rows(matrix, prompt_group: Sequence, *, ddof: int = 1) -> list[dict]:
    """Table 2's row for each group of prompts (the campaign's theme or context column).

    Parameters
    ----------
    matrix : LabelMatrix
    prompt_group : sequence of length ``n_prompts``
        Each prompt's group; None or "" = no group (those prompts enter no row).
    ddof : {1, 0}

    Returns
    -------
    list of dict
        One per group, sorted by name: ``group``, the :data:`TABLE_KEYS`, and ``test_others`` /
        ``test_gold``: the study's pooled two-proportion z-test
        (:func:`audits.engine.partitions.two_proportion_ztest`) of the group's pooled accuracy
        against that of the rest of the matrix, as ``{"z", "p", "reason"}``.

    Notes
    -----
    A prompt's leave-one-out mode and its gold depend on that prompt's labels alone, so the group's
    scored labels are those of the whole matrix on its prompts, and "the rest" is the whole minus
    the group.
    """
    groups = np.asarray(prompt_group, dtype=object)
    if groups.shape != (matrix.n_prompts,):
        raise ValueError(f"prompt_group: expected {matrix.n_prompts} values (one per prompt), got {groups.shape}")
    names = sorted({g for g in groups.tolist() if g not in (None, "")}, key=str)
    _, totals = _row_and_counts(matrix, ddof)
    rows = []
    for name in names:
        row, counts = _row_and_counts(matrix.take((groups == name)[matrix.prompt]), ddof)
        for ref, (x, n) in counts.items():
            x_all, n_all = totals[ref]
            z, p, reason = two_proportion_ztest(x, n, x_all - x, n_all - n)
            row[f"test_{ref}"] = {"z": z, "p": p, "reason": reason}
        rows.append({"group": str(name), **row})
    return rows


def box_thresholds(counts: Any, *, n_boxes: int = 6, min_workers: int = 3) -> list[int]:
    """Minimum-label thresholds for Fig. 5: ``n_boxes`` evenly spaced from 0 up to the largest
    threshold that still keeps ``min_workers`` workers (so every box has a spread to show).

    >>> box_thresholds([1, 5, 10, 20, 40, 80], n_boxes=4)
    [0, 7, 13, 20]
    """
    counts = np.sort(np.asarray(counts, dtype=np.int64))[::-1]
    if counts.size == 0:
        return [0]
    top = int(counts[min(min_workers, counts.size) - 1])
    return sorted({int(round(t)) for t in np.linspace(0, top, n_boxes)})


def accuracy_by_threshold(n_labels: Any, accuracy: Any, thresholds: Sequence[int]) -> list[tuple[int, list[float]]]:
    """Fig. 5's boxes: for each threshold t, the accuracies of the workers the minimum filter keeps
    (``n_labels >= t``, as :func:`audits.engine.filters.volume_sweep`), those with an accuracy.

    >>> accuracy_by_threshold([1, 5, 9], [0.5, None, 0.9], [0, 5])
    [(0, [0.5, 0.9]), (5, [0.9])]
    """
    n = np.asarray(n_labels, dtype=np.int64)
    acc = np.array([np.nan if a is None else a for a in accuracy], dtype=np.float64)
    ok = ~np.isnan(acc)
    return [(int(t), acc[ok & (n >= t)].tolist()) for t in thresholds]


def regression_band(x: Any, y: Any, at: Any, *, level: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The least-squares line of ``y`` on ``x`` at the points ``at`` with its confidence band
    (the band of the mean response, as seaborn's ``regplot`` and statsmodels' ``get_prediction``
    ``mean_ci`` draw it):

    .. math::

        \\hat y(x_0) \\pm t_{n-2,\\,(1+\\text{level})/2}\\; s \\sqrt{\\frac{1}{n} + \\frac{(x_0 - \\bar x)^2}{S_{xx}}},
        \\qquad s^2 = \\frac{\\sum (y_i - \\hat y_i)^2}{n - 2}

    Returns ``(fit, lo, hi)`` arrays aligned with ``at``. Needs what :func:`least_squares` needs
    (n ≥ 3, neither variable constant); raises ValueError otherwise.

    >>> fit, lo, hi = regression_band([0, 1, 2, 3], [0, 1, 2, 4], [1.5])
    >>> round(float(fit[0]), 3), round(float(hi[0] - fit[0]), 3)
    (1.75, 0.833)
    """
    from scipy import special  # t quantile without importing scipy.stats (see least_squares)

    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.size < 3 or np.all(x == x[0]) or np.all(y == y[0]):
        raise ValueError("x: a band needs at least 3 points and neither x nor y constant")
    slope, intercept, r2, _, _, _ = least_squares(x, y)
    n = x.size
    dx = x - x.mean()
    sxx = float(dx @ dx)
    resid = y - (intercept + slope * x)
    s = np.sqrt(float(resid @ resid) / (n - 2))
    t = float(special.stdtrit(n - 2, (1 + level) / 2))
    at = np.asarray(at, dtype=np.float64)
    fit = intercept + slope * at
    half = t * s * np.sqrt(1 / n + (at - x.mean()) ** 2 / sxx)
    return fit, fit - half, fit + half
