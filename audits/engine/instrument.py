"""Instrument characteristics (``noise-audit.md``, "Agreement and instrument characteristics").

A benchmark built from crowd labels is a measuring instrument (Welty, Paritosh & Aroyo 2019,
"Metrology for AI", arXiv:1911.01875):

- :func:`item_precision`: each prompt's SD of raw labels, summarised by their mean and SD, with the
  item mean / item SD pairs for the "crescent" scatter;
- :func:`reproducibility`: the same prompts labeled twice → Spearman of item means, Pearson of item
  SDs, alpha of each run, the items that moved most;
- :func:`compare_systems`: two systems scored against each rater separately (accuracy for
  categories, Spearman's ρ for graded scores: :mod:`audits.engine.systems`), paired t-test
  (``scipy.stats.ttest_rel``): can the instrument tell them apart?
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from audits.engine._util import check_ddof, floats, py, var_from_sums
from audits.engine.agreement import krippendorff_alpha
from audits.engine.systems import per_rater_scores

__all__ = [
    "ItemPrecision",
    "Reproducibility",
    "SystemComparison",
    "item_precision",
    "reproducibility",
    "compare_systems",
]


def _item_stats(matrix, ddof: int, values: str = "raw"):
    v = matrix.raw if values == "raw" else matrix.value
    if values == "raw" and matrix.raw_levels is not None:
        raise ValueError("matrix: raw labels are categories without numeric values; use values='scaled'")
    m = matrix.n_prompts
    c = matrix.prompt_counts.astype(np.float64)
    t = np.bincount(matrix.prompt, weights=v, minlength=m)
    r = np.bincount(matrix.prompt, weights=v * v, minlength=m)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = t / c
    sd = np.sqrt(var_from_sums(c, t, r, ddof))
    return mean, sd


def _sd(x: np.ndarray, ddof: int) -> float | None:
    return float(np.std(x, ddof=ddof)) if x.size > ddof else None


@dataclass(frozen=True)
class ItemPrecision:
    """Per-item precision: SD of each prompt's raw labels (NaN when undefined) and its summary.

    ``mean_sd`` / ``sd_sd`` summarise the defined item SDs (None when too few).
    """

    prompt_ids: np.ndarray
    item_mean: np.ndarray
    item_sd: np.ndarray
    mean_sd: float | None
    sd_sd: float | None
    n_items: int
    n_items_with_sd: int
    ddof: int
    values: str

    def to_dict(self, *, max_points: int = 5000) -> dict:
        """Summary plus up to ``max_points`` (mean, sd) scatter points (evenly spaced if more)."""
        idx = np.arange(self.n_items)
        sampled = self.n_items > max_points
        if sampled:
            idx = np.linspace(0, self.n_items - 1, max_points).round().astype(np.int64)
        return {
            "values": self.values,
            "sd": "sample" if self.ddof == 1 else "population",
            "n_items": self.n_items,
            "n_items_with_sd": self.n_items_with_sd,
            "mean_item_sd": self.mean_sd,
            "sd_item_sd": self.sd_sd,
            "scatter": {
                "prompt": py(self.prompt_ids[idx]),
                "mean": floats(self.item_mean[idx]),
                "sd": floats(self.item_sd[idx]),
                "sampled": sampled,
            },
        }


def item_precision(matrix, *, ddof: int = 1, values: str = "raw") -> ItemPrecision:
    """SD of each prompt's labels (raw by default); summary = mean and SD of those SDs.

    Notes
    -----
    A prompt with at most ``ddof`` labels has no SD and is left out of the summary. The item SD is
    computed from per-prompt count, sum and sum of squares, as the noise numbers are.
    """
    ddof = check_ddof(ddof)
    mean, sd = _item_stats(matrix, ddof, values)
    ok = ~np.isnan(sd)
    return ItemPrecision(
        matrix.prompt_ids,
        mean,
        sd,
        float(np.mean(sd[ok])) if ok.any() else None,
        _sd(sd[ok], ddof),
        matrix.n_prompts,
        int(ok.sum()),
        ddof,
        values,
    )


@dataclass(frozen=True)
class Reproducibility:
    """Two label sets over the same prompts, compared item by item."""

    n_common: int
    n_only_a: int
    n_only_b: int
    spearman_means: float | None
    spearman_p: float | None
    pearson_sds: float | None
    pearson_p: float | None
    n_sd_pairs: int
    alpha_a: float | None
    alpha_b: float | None
    alpha_level: str
    moved: list
    reasons: dict

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def reproducibility(
    a, b, *, level: str = "interval", ddof: int = 1, top: int = 10, values: str = "raw"
) -> Reproducibility:
    """Compare two campaigns that labeled the same prompts (matched by prompt id).

    Parameters
    ----------
    a, b : LabelMatrix
    level : str
        Krippendorff level for each run's alpha (computed on the common prompts).
    ddof : {1, 0}
        For the item SDs.
    top : int
        How many of the items that moved most (largest |mean_b − mean_a|) to list.

    Returns
    -------
    Reproducibility
        Spearman correlation of item means (``scipy.stats.spearmanr``), Pearson correlation of item
        SDs (``scipy.stats.pearsonr``, items with an SD in both runs), alpha of each run, and the
        items that moved most. Undefined values are None with ``reasons``.
    """
    from scipy import stats  # imported here: scipy.stats costs ~0.8 s to import, and few reports need it

    ddof = check_ddof(ddof)
    ids_a = [py(p) for p in a.prompt_ids]
    ids_b = [py(p) for p in b.prompt_ids]
    pos_b = {p: i for i, p in enumerate(ids_b)}
    ia, ib = [], []
    for i, p in enumerate(ids_a):
        j = pos_b.get(p)
        if j is None and not isinstance(p, str):
            j = pos_b.get(str(p))
        if j is not None:
            ia.append(i)
            ib.append(j)
    ia, ib = np.asarray(ia, dtype=np.int64), np.asarray(ib, dtype=np.int64)
    reasons: dict = {}
    mean_a, sd_a = _item_stats(a, ddof, values)
    mean_b, sd_b = _item_stats(b, ddof, values)
    ma, mb = mean_a[ia], mean_b[ib]
    rho = rho_p = r = r_p = None
    if ia.size >= 3 and np.ptp(ma) > 0 and np.ptp(mb) > 0:
        res = stats.spearmanr(ma, mb)
        rho, rho_p = float(res.statistic), float(res.pvalue)
    else:
        reasons["spearman_means"] = "needs at least 3 common prompts whose means vary in both runs"
    both = ~np.isnan(sd_a[ia]) & ~np.isnan(sd_b[ib])
    xa, xb = sd_a[ia][both], sd_b[ib][both]
    if xa.size >= 3 and np.ptp(xa) > 0 and np.ptp(xb) > 0:
        res = stats.pearsonr(xa, xb)
        r, r_p = float(res.statistic), float(res.pvalue)
    else:
        reasons["pearson_sds"] = "needs at least 3 common prompts with an SD in both runs that varies"

    def alpha_of(mat, idx, key):
        keep = np.zeros(mat.n_prompts, dtype=bool)
        keep[idx] = True
        res = krippendorff_alpha(mat.take(keep[mat.prompt]), level=level, values=values)
        if res.value is None:
            reasons[key] = res.reason
        return res.value

    al_a = alpha_of(a, ia, "alpha_a") if ia.size else None
    al_b = alpha_of(b, ib, "alpha_b") if ib.size else None
    delta = mb - ma
    order = np.argsort(-np.abs(delta), kind="stable")[:top]
    moved = [
        {"prompt": ids_a[ia[i]], "mean_a": float(ma[i]), "mean_b": float(mb[i]), "change": float(delta[i])}
        for i in order.tolist()
    ]
    return Reproducibility(
        int(ia.size),
        a.n_prompts - int(ia.size),
        b.n_prompts - int(ib.size),
        rho,
        rho_p,
        r,
        r_p,
        int(both.sum()),
        al_a,
        al_b,
        level,
        moved,
        reasons,
    )


@dataclass(frozen=True)
class SystemComparison:
    """Two systems scored per rater and compared by a paired t-test across raters.

    ``metric`` says how a rater's score is computed (:mod:`audits.engine.systems`); ``summary_a`` /
    ``summary_b`` give min, max, mean and SD of each system's per-rater scores; ``resolution`` is the
    least mean difference the test declares significant at ``alpha`` (``t_{1−α/2, n−1}·s_d/√n``).
    """

    metric: str
    n_raters: int
    mean_a: float | None
    mean_b: float | None
    mean_difference: float | None
    t: float | None
    p: float | None
    df: int | None
    alpha: float
    distinguishable: bool | None
    verdict: str
    per_rater: list
    summary_a: dict
    summary_b: dict
    n_raters_undefined: int
    resolution: float | None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def compare_systems(
    matrix,
    predictions_a: Any,
    predictions_b: Any,
    *,
    metric: str = "auto",
    min_labels: int | None = None,
    alpha: float = 0.05,
) -> SystemComparison:
    """Can the instrument tell two systems apart? Per-rater scores and a paired t-test.

    Each system is scored against each rater separately, over the prompts the rater labeled that
    both systems predicted (:func:`audits.engine.systems.per_rater_scores`): accuracy against the
    rater's own labels for categories, Spearman's ρ against the rater's raw ratings for graded
    scores. The raters' scores are compared with ``scipy.stats.ttest_rel`` (Welty, Paritosh & Aroyo
    2019, "Metrology for AI", arXiv:1911.01875, §4).

    Parameters
    ----------
    matrix : LabelMatrix
    predictions_a, predictions_b : mapping {prompt id: value} or pandas Series
    metric : {"auto", "accuracy", "spearman"}
        ``"auto"``: Spearman when the labels are ratings or either system gives graded scores
        (:func:`audits.engine.systems.prediction_metric`).
    min_labels : int, optional
        Raters with fewer scorable prompts are left out (default 1 for accuracy, 3 for Spearman).
    alpha : float
        Significance level for ``distinguishable``.

    Returns
    -------
    SystemComparison
        ``distinguishable`` is None (with the verdict saying why) when the test is undefined:
        fewer than 2 raters with both scores, or per-rater differences that are all equal but not 0.

    Notes
    -----
    A rater whose score is undefined for either system (too few prompts; under Spearman a constant
    rater or system) is left out of the test and counted in ``n_raters_undefined``.
    """
    from scipy import stats  # imported here: scipy.stats costs ~0.8 s to import, and few reports need it

    scored = per_rater_scores(matrix, predictions_a, predictions_b, metric=metric, min_labels=min_labels)
    ra, rb = scored.scores
    keep = ~np.isnan(ra) & ~np.isnan(rb)
    sa, sb = ra[keep], rb[keep]
    per = [
        {"worker": py(wid), "n": int(k), "score_a": float(x), "score_b": float(y)}
        for wid, k, x, y in zip(matrix.worker_ids[keep], scored.n[keep], sa, sb)
    ]
    k = int(keep.sum())
    diff = sa - sb

    def result(t, p, dist, verdict, resolution=None):
        return SystemComparison(
            scored.metric,
            k,
            float(sa.mean()) if k else None,
            float(sb.mean()) if k else None,
            float(diff.mean()) if k else None,
            t,
            p,
            k - 1 if k >= 2 else None,
            alpha,
            dist,
            verdict,
            per,
            scored.summary(0),
            scored.summary(1),
            int(matrix.n_workers - k),
            resolution,
        )

    if k < 2:
        return result(None, None, None, f"cannot test: {k} rater(s) with both scores (need 2)")
    if np.all(diff == diff[0]):
        if diff[0] == 0:
            return result(None, None, False, "cannot tell A and B apart: they score the same against every rater")
        return result(None, None, None, "the per-rater differences are all equal: the t statistic is undefined")
    res = stats.ttest_rel(sa, sb)
    p = float(res.pvalue)
    lsd = float(stats.t.ppf(1 - alpha / 2, k - 1) * diff.std(ddof=1) / np.sqrt(k))
    if p < alpha:
        better = "A" if diff.mean() > 0 else "B"
        verdict = f"the instrument separates A and B: {better} scores higher (paired t-test p = {p:.3g} < {alpha})"
    else:
        verdict = f"cannot tell A and B apart at this resolution (paired t-test p = {p:.3g} ≥ {alpha})"
    return result(float(res.statistic), p, p < alpha, verdict, lsd)
