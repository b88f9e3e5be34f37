"""Systems scored against the crowd (``noise-audit.md``, "Noise partitions" and "Agreement and
instrument characteristics"; the report keys ``systems.metric`` and ``system_scores``).

A system's predictions are scored in one of two ways, :func:`prediction_metric` decides which:

- ``"accuracy"`` for categories: a prediction is right when its scaled value equals the reference
  (a rater's own label, the prompt's modal label, gold);
- ``"spearman"`` for graded scores on numeric ratings (a rating schema, or predictions that are
  not all in the label set): Spearman's ρ between the system's scores and the reference ratings
  over the prompts scored (a rater's raw ratings, the prompts' mean raw ratings, gold), as
  WordSim-353 systems are scored (Finkelstein et al. 2002).

:func:`per_rater_scores` scores a system against each rater separately, the unit of the paired
t-test in :func:`audits.engine.instrument.compare_systems` (Welty, Paritosh & Aroyo 2019, "Metrology
for AI", arXiv:1911.01875). :func:`system_scores` gives one system's scores with 95 % intervals
overall, per noise partition (with the study's two-proportion z-tests between partitions) and per
group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from audits.engine._util import keys_values, positions, py
from audits.engine.accuracy import normal_interval, wilson_interval
from audits.engine.partitions import align_predictions, modal_labels, noise_partitions, two_proportion_ztest

__all__ = [
    "METRICS",
    "PerRaterScores",
    "prediction_metric",
    "per_rater_scores",
    "grouped_spearman",
    "spearman_interval",
    "spearman_ztest",
    "system_scores",
]

#: how a system is scored: "auto" lets :func:`prediction_metric` choose
METRICS = ("auto", "accuracy", "spearman")

#: Spearman's ρ needs this many pairs by default (two pairs give ±1 whatever the system)
MIN_SPEARMAN_PAIRS = 3

#: variance of atanh(ρ_s) is 1.06 / (n − 3) (Fieller, Hartley & Pearson 1957, Biometrika 44:470)
FHP_VARIANCE = 1.06


def _graded(matrix, predictions: Any) -> tuple[np.ndarray, int, int]:
    """Per-prompt predictions as plain numbers (not through the schema): ``(pred, unmatched, invalid)``."""
    keys, vals = keys_values(predictions)
    pos = positions(matrix.prompt_ids, keys)
    keep = pos >= 0
    arr = np.empty(len(vals), dtype=object)
    arr[:] = vals
    num = matrix.scale.apply(arr[keep])[1] if keep.any() else np.zeros(0)
    out = np.full(matrix.n_prompts, np.nan)
    out[pos[keep]] = num
    return out, int((~keep).sum()), int(np.isnan(num).sum())


def _is_rating(matrix) -> bool:
    """A numeric rating schema: rescaled, or raw numbers with more than two values and no binarization."""
    if matrix.raw_levels is not None or matrix.scale.binarize is not None:
        return False
    return matrix.scale.rescale is not None or np.unique(matrix.raw).size > 2


def prediction_metric(matrix, *predictions: Any) -> str:
    """``"spearman"`` or ``"accuracy"``: how predictions on this matrix are scored.

    Spearman when the labels are numeric ratings (a ``rescale`` range, or more than two distinct raw
    numbers without a binarization map), or when some prediction is not in the label set (not valid
    in the schema, or a scaled value no label has). Accuracy otherwise: categories, binary labels,
    ratings binarized by a map and predicted in the schema. Several systems are scored alike, so one
    graded system makes the comparison graded.

    Raises
    ------
    ValueError
        naming ``predictions`` when graded scores meet labels that are categories without numbers.
    """
    rating = _is_rating(matrix)
    levels = matrix.value_codes[0]
    graded = False
    for p in predictions:
        scaled, _, _ = align_predictions(matrix, p, scale="raw")
        given = ~np.isnan(_graded(matrix, p)[0]) | ~np.isnan(scaled)
        in_set = ~np.isnan(scaled) & np.isin(scaled, levels)
        graded |= bool((given & ~in_set).any())
    if graded and matrix.raw_levels is not None:
        raise ValueError("predictions: graded scores cannot be ranked against labels that are categories")
    return "spearman" if rating or graded else "accuracy"


def _check_metric(metric: str) -> str:
    if metric not in METRICS:
        raise ValueError(f"metric: expected one of {', '.join(METRICS)}, got {metric!r}")
    return metric


def _group_ranks(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, ties share their mean rank) of ``x`` within each group ``g``.

    The ranks ``scipy.stats.rankdata(method="average")`` gives each group, for all groups in one sort.
    """
    n = x.size
    if n == 0:
        return np.zeros(0)
    order = np.lexsort((x, g))
    gs, xs = g[order], x[order]
    idx = np.arange(n)
    first = np.r_[True, gs[1:] != gs[:-1]]
    ordinal = idx - np.maximum.accumulate(np.where(first, idx, 0)) + 1
    run = np.cumsum(np.r_[True, first[1:] | (xs[1:] != xs[:-1])]) - 1
    mean_rank = np.bincount(run, weights=ordinal) / np.bincount(run)
    ranks = np.empty(n)
    ranks[order] = mean_rank[run]
    return ranks


def grouped_spearman(g: np.ndarray, x: np.ndarray, y: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Spearman's ρ between ``x`` and ``y`` within each group (vectorised): ``(rho, n)``.

    .. math::

        \\rho_g = \\frac{\\sum_l (R_l - \\bar R_g)(S_l - \\bar S_g)}
                      {\\sqrt{\\sum_l (R_l - \\bar R_g)^2 \\sum_l (S_l - \\bar S_g)^2}}

    with ``R``, ``S`` the average ranks of ``x`` and ``y`` within the group: Pearson's r of the ranks,
    which is what ``scipy.stats.spearmanr`` computes.

    Notes
    -----
    ρ is NaN for a group with fewer than 2 pairs or whose ``x`` or ``y`` is constant (scipy returns
    NaN there too, with a warning).
    """
    g = np.asarray(g, dtype=np.int64)
    rx, ry = _group_ranks(g, np.asarray(x, float)), _group_ranks(g, np.asarray(y, float))
    n = np.bincount(g, minlength=n_groups).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        dx = rx - (np.bincount(g, weights=rx, minlength=n_groups) / n)[g]
        dy = ry - (np.bincount(g, weights=ry, minlength=n_groups) / n)[g]
        sxy = np.bincount(g, weights=dx * dy, minlength=n_groups)
        sxx = np.bincount(g, weights=dx * dx, minlength=n_groups)
        syy = np.bincount(g, weights=dy * dy, minlength=n_groups)
        rho = np.where((sxx > 0) & (syy > 0), sxy / np.sqrt(sxx * syy), np.nan)
    return np.clip(rho, -1.0, 1.0), n.astype(np.int64)


def spearman_interval(rho: Any, n: Any, *, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Confidence interval for Spearman's ρ by Fisher's z with the Fieller–Hartley–Pearson variance.

    .. math::

        \\tanh\\Bigl(\\operatorname{atanh}\\rho \\pm z_{1-\\alpha/2}\\sqrt{1.06 / (n - 3)}\\Bigr)

    (Fieller, Hartley & Pearson 1957). NaN where ``n <= 3`` or ρ is NaN.
    """
    from scipy import special  # the normal quantile, without scipy.stats' import cost

    rho = np.asarray(rho, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    z = special.ndtri(0.5 + level / 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        half = np.where(n > 3, z * np.sqrt(FHP_VARIANCE / (n - 3)), np.nan)
        centre = np.arctanh(np.clip(rho, -1 + 1e-15, 1 - 1e-15))
    return np.tanh(centre - half), np.tanh(centre + half)


def spearman_ztest(r1: float, n1: int, r2: float, n2: int) -> tuple[float | None, float | None, str | None]:
    """Two independent Spearman correlations compared by Fisher's z (two-sided).

    .. math::

        z = \\frac{\\operatorname{atanh} r_1 - \\operatorname{atanh} r_2}
                  {\\sqrt{1.06/(n_1 - 3) + 1.06/(n_2 - 3)}},\\qquad p = 2\\,\\Phi(-|z|)

    The graded counterpart of :func:`audits.engine.partitions.two_proportion_ztest`. Returns
    ``(z, p, reason)``; None with a reason when a correlation is undefined or rests on ≤ 3 pairs.
    """
    from scipy import special

    if r1 is None or r2 is None or not (np.isfinite(r1) and np.isfinite(r2)):
        return None, None, "a partition's correlation is undefined"
    if n1 <= 3 or n2 <= 3:
        return None, None, "a partition has 3 or fewer scored prompts"
    a, b = (np.arctanh(np.clip(r, -1 + 1e-15, 1 - 1e-15)) for r in (r1, r2))
    z = (a - b) / np.sqrt(FHP_VARIANCE / (n1 - 3) + FHP_VARIANCE / (n2 - 3))
    return float(z), float(2 * special.ndtr(-abs(z))), None


@dataclass(frozen=True)
class PerRaterScores:
    """One system (or two, on the prompts both predicted) scored against each rater.

    Attributes
    ----------
    metric : {"accuracy", "spearman"}
    worker_ids : ndarray
        The matrix's workers, in order.
    n : ndarray of int
        Per rater: prompts scored (labeled by the rater and predicted).
    scores : list of ndarray
        Per system, per rater: accuracy or ρ; NaN when undefined (fewer than ``min_labels`` prompts,
        or a constant rater or system under Spearman).
    """

    metric: str
    worker_ids: np.ndarray
    n: np.ndarray
    scores: list

    def summary(self, i: int = 0) -> dict:
        """Min, max, mean and sample SD of system ``i``'s defined per-rater scores."""
        s = self.scores[i][~np.isnan(self.scores[i])]
        return {
            "n_raters": int(s.size),
            "n_undefined": int(self.worker_ids.size - s.size),
            "min": float(s.min()) if s.size else None,
            "max": float(s.max()) if s.size else None,
            "mean": float(s.mean()) if s.size else None,
            "sd": float(s.std(ddof=1)) if s.size > 1 else None,
        }


def _aligned(matrix, predictions: tuple, metric: str) -> list[np.ndarray]:
    if metric == "accuracy":
        return [align_predictions(matrix, p, scale="raw")[0] for p in predictions]
    return [_graded(matrix, p)[0] for p in predictions]


def _raw_ratings(matrix) -> np.ndarray:
    if matrix.raw_levels is not None:
        raise ValueError("metric: 'spearman' needs numeric raw ratings; these labels are categories")
    return matrix.raw


def per_rater_scores(matrix, *predictions: Any, metric: str = "auto", min_labels: int | None = None) -> PerRaterScores:
    """Score one or more systems against each rater, over the prompts the rater labeled that every
    system predicted.

    Parameters
    ----------
    matrix : LabelMatrix
    *predictions : mapping {prompt id: value} or pandas Series
    metric : {"auto", "accuracy", "spearman"}
        ``"auto"``: :func:`prediction_metric`. Accuracy compares scaled values (predictions go through
        the labels' binarization); Spearman ranks the predictions as numbers against the rater's raw
        ratings.
    min_labels : int, optional
        Raters with fewer scored prompts get no score (NaN). Default 1 for accuracy, 3 for Spearman.

    Returns
    -------
    PerRaterScores

    Examples
    --------
    >>> from audits.engine.matrix import LabelMatrix
    >>> m = LabelMatrix.from_triples(["a"] * 3 + ["b"] * 3, [1, 2, 3] * 2, [1, 5, 9, 2, 1, 8])
    >>> per_rater_scores(m, {1: 0.1, 2: 0.5, 3: 0.9}).scores[0].tolist()
    [1.0, 0.5]
    """
    metric = _check_metric(metric)
    if metric == "auto":
        metric = prediction_metric(matrix, *predictions)
    least = (1 if metric == "accuracy" else MIN_SPEARMAN_PAIRS) if min_labels is None else max(int(min_labels), 1)
    preds = _aligned(matrix, predictions, metric)
    ok = np.ones(matrix.n_labels, dtype=bool)
    for p in preds:
        ok &= ~np.isnan(p[matrix.prompt])
    w, n_w = matrix.worker[ok], matrix.n_workers
    cnt = np.bincount(w, minlength=n_w)
    scores = []
    for p in preds:
        if metric == "accuracy":
            with np.errstate(invalid="ignore", divide="ignore"):
                s = np.bincount(w, weights=p[matrix.prompt[ok]] == matrix.value[ok], minlength=n_w) / cnt
        else:
            s, _ = grouped_spearman(w, p[matrix.prompt[ok]], _raw_ratings(matrix)[ok], n_w)
        scores.append(np.where(cnt >= least, s, np.nan))
    return PerRaterScores(metric, matrix.worker_ids, cnt, scores)


# --------------------------------------------------------------------------------------- one system's table
def _proportion(correct: int, n: int, level: float) -> dict:
    lo_w, hi_w = wilson_interval(correct, n, confidence=level)
    from scipy import special

    lo_n, hi_n = normal_interval(correct, n, z=float(special.ndtri(0.5 + level / 2)))
    return {
        "n": int(n),
        "correct": int(correct),
        "score": correct / n if n else None,
        "ci_wilson": py([lo_w, hi_w]) if n else None,
        "ci_normal": py([lo_n, hi_n]) if n else None,
    }


def _correlation(x: np.ndarray, y: np.ndarray, level: float) -> dict:
    rho, n = grouped_spearman(np.zeros(x.size, np.int64), x, y, 1)
    r = float(rho[0]) if x.size >= MIN_SPEARMAN_PAIRS and np.isfinite(rho[0]) else None
    lo, hi = spearman_interval(np.nan if r is None else r, x.size, level=level)
    return {"n": int(x.size), "score": r, "ci": py([lo, hi]) if r is not None and x.size > 3 else None}


def _cell(sel: np.ndarray, refs: dict, pred: np.ndarray, metric: str, level: float) -> dict:
    """Scores of the prompts in ``sel`` against each reference (NaN = the prompt has none)."""
    out = {}
    for name, ref in refs.items():
        has = sel & ~np.isnan(ref)
        if metric == "accuracy":
            out[name] = _proportion(int((pred[has] == ref[has]).sum()), int(has.sum()), level)
        else:
            out[name] = _correlation(pred[has], ref[has], level)
    return out


def _prompt_groups(matrix) -> np.ndarray | None:
    """Each prompt's group (that of its first label), or None when the matrix has no group column."""
    if matrix.group is None:
        return None
    first = np.full(matrix.n_prompts, -1, np.int64)
    first[matrix.prompt[::-1]] = np.arange(matrix.n_labels)[::-1]
    out = np.empty(matrix.n_prompts, dtype=object)
    out[:] = [py(v) for v in matrix.group[first].tolist()]
    return out


def system_scores(matrix, predictions: Any, *, metric: str = "auto", k: int | None = None, level: float = 0.95) -> dict:
    """One system's scores with confidence intervals: overall, per noise partition, per group.

    Parameters
    ----------
    matrix : LabelMatrix
    predictions : mapping {prompt id: value} or pandas Series
    metric : {"auto", "accuracy", "spearman"}
        As in :func:`per_rater_scores`.
    k : int, optional
        Labels per prompt for the partitions (:func:`audits.engine.partitions.noise_partitions`).
    level : float
        Confidence level of the intervals.

    Returns
    -------
    dict
        ``metric``; ``n_predictions``, ``n_unmatched``, ``n_invalid``; ``per_rater`` (min, max,
        mean, SD of the per-rater scores, :meth:`PerRaterScores.summary`); ``overall``, each
        ``partitions[d]`` and each ``groups[g]`` (None without a group column) hold one entry per
        reference: ``modal`` (accuracy) or ``mean`` (Spearman against the prompts' mean raw
        rating), and ``gold`` when prompts have gold. An accuracy entry is ``{"n", "correct",
        "score", "ci_wilson", "ci_normal"}`` (Wilson 1927; the study's normal interval); a Spearman
        entry is ``{"n", "score", "ci"}`` (:func:`spearman_interval`). ``tests`` compares every pair
        of partitions against each reference: the study's pooled two-proportion z-test
        (:func:`audits.engine.partitions.two_proportion_ztest`), or for Spearman the Fisher z-test
        of :func:`spearman_ztest`.

    Notes
    -----
    As in :func:`audits.engine.partitions.score_partitions`: partitions hold the prompts with exactly
    k labels and a prediction; against the modal label a prompt with a tied mode is left out, against
    gold a prompt without gold. ``overall`` and ``groups`` hold every predicted prompt. A prompt's
    group is that of its first label.
    """
    metric = _check_metric(metric)
    if metric == "auto":
        metric = prediction_metric(matrix, predictions)
    if metric == "accuracy":
        pred, unmatched, invalid = align_predictions(matrix, predictions, scale="raw")
        refs = {"modal": modal_labels(matrix)}
    else:
        pred, unmatched, invalid = _graded(matrix, predictions)
        c = matrix.prompt_counts
        with np.errstate(invalid="ignore", divide="ignore"):
            refs = {"mean": np.bincount(matrix.prompt, weights=_raw_ratings(matrix), minlength=matrix.n_prompts) / c}
    if matrix.has_gold:
        refs["gold"] = matrix.gold
    scored = ~np.isnan(pred)
    parts = noise_partitions(matrix, k=k)
    in_k = scored & (matrix.prompt_counts == parts.k)
    rows = {d: _cell(in_k & (parts.minority == d), refs, pred, metric, level) for d in parts.counts}
    tests = []
    ds = list(rows)
    for ref in refs:
        for i, a in enumerate(ds):
            for b in ds[i + 1 :]:
                ra, rb = rows[a][ref], rows[b][ref]
                if metric == "accuracy":
                    z, p, why = two_proportion_ztest(ra["correct"], ra["n"], rb["correct"], rb["n"])
                else:
                    z, p, why = spearman_ztest(ra["score"], ra["n"], rb["score"], rb["n"])
                tests.append({"reference": ref, "a": a, "b": b, "z": z, "p": p, "reason": why})
    groups = None
    pg = _prompt_groups(matrix)
    if pg is not None:
        keys = sorted({g for g in pg.tolist() if g is not None}, key=str)
        groups = {str(g): _cell(scored & (pg == g), refs, pred, metric, level) for g in keys}
    return {
        "metric": metric,
        "level": level,
        "k": parts.k,
        "n_predictions": int(scored.sum()),
        "n_unmatched": unmatched,
        "n_invalid": invalid,
        "per_rater": per_rater_scores(matrix, predictions, metric=metric).summary(),
        "overall": _cell(scored, refs, pred, metric, level),
        "partitions": {str(d): {"n_prompts": int((in_k & (parts.minority == d)).sum()), **r} for d, r in rows.items()},
        "tests": tests,
        "groups": groups,
    }
