"""The instrument's variance and resolution (``noise-audit.md``, "Agreement and instrument
characteristics"; report keys ``variance_components`` and ``resolution``).

- :func:`variance_components`: the crossed random-effects model
  ``y_ij = μ + a_i + b_j + e_ij`` (worker i, prompt j; ``a ~ (0, σ²_worker)``, ``b ~ (0, σ²_prompt)``,
  ``e ~ (0, σ²_residual)``, all independent) fitted by the method of moments for unbalanced crossed
  designs of Gao & Owen (2017), in O(labels), with no iteration and no normality assumption;
- :func:`resolution`: the least difference between two prompts' means, and between two systems'
  per-rater scores, that a two-sided test at the 5 % level declares significant.
"""

from __future__ import annotations

import numpy as np

from audits.engine._util import var_from_sums

__all__ = ["VARIANCE_METHOD", "RESOLUTION_METHOD", "variance_components", "resolution"]

VARIANCE_METHOD = (
    "crossed random effects y = mu + worker + prompt + residual, method of moments for unbalanced crossed "
    "designs (Gao & Owen 2017, U-statistics)"
)
RESOLUTION_METHOD = (
    "least significant difference: the smallest difference a two-sided test at significance 1 − level (5 % at "
    "the 95 % level) declares "
    "significant; prompts: t on the pooled within-prompt variance, 2 prompts of k labels; systems: paired "
    "t over raters (one system: unpaired, a second system with the same spread across raters)"
)


def _values(matrix, values: str) -> np.ndarray:
    if values == "scaled":
        return matrix.value
    if values == "raw":
        if matrix.raw_levels is not None:
            raise ValueError("values: raw labels are categories without numeric values; use 'scaled'")
        return matrix.raw
    raise ValueError(f"values: expected 'scaled' or 'raw', got {values!r}")


def _pairs_within(codes: np.ndarray, counts: np.ndarray, d: np.ndarray, sq: np.ndarray) -> float:
    """``Σ_g (N_g Σ y² − (Σ y)²)`` over groups: half the squared differences of pairs within a group."""
    size = counts.size
    return float(
        np.sum(
            counts * np.bincount(codes, weights=sq, minlength=size) - np.bincount(codes, weights=d, minlength=size) ** 2
        )
    )


def variance_components(matrix, *, values: str = "scaled") -> dict:
    """Worker, prompt and residual variance components of a crossed design, by moments.

    With ``N_i·`` labels by worker i, ``N_·j`` on prompt j and N in all, the three U-statistics

    .. math::

        U_w = \\sum_i \\Bigl(N_{i\\cdot} \\sum_j y_{ij}^2 - y_{i\\cdot}^2\\Bigr),\\quad
        U_p = \\sum_j \\Bigl(N_{\\cdot j} \\sum_i y_{ij}^2 - y_{\\cdot j}^2\\Bigr),\\quad
        U_e = N \\sum_{ij} y_{ij}^2 - y_{\\cdot\\cdot}^2

    (half the sums of squared differences over pairs of labels by one worker, on one prompt, and
    over all pairs) have expectations

    .. math::

        E U_w = (σ_p^2 + σ_e^2)\\,(\\textstyle\\sum_i N_{i\\cdot}^2 - N),\\quad
        E U_p = (σ_w^2 + σ_e^2)\\,(\\textstyle\\sum_j N_{\\cdot j}^2 - N),

        E U_e = σ_w^2 (N^2 - \\textstyle\\sum_i N_{i\\cdot}^2) + σ_p^2 (N^2 - \\textstyle\\sum_j N_{\\cdot j}^2)
                + σ_e^2 (N^2 - N),

    and the estimates solve the three equations (Gao & Owen 2017, "Efficient moment calculations for
    variance components in large unbalanced crossed random effects models", Electronic Journal of
    Statistics 11:1235, §2). On a complete balanced design they equal the two-way ANOVA estimates.

    Parameters
    ----------
    matrix : LabelMatrix
    values : {"scaled", "raw"}
        The scaled values (those the six numbers use) or the raw ratings.

    Returns
    -------
    dict
        ``{"method", "values", "worker", "prompt", "residual", "total", "share": {"worker", "prompt",
        "residual"}, "n_labels", "reason"}``; the components are None with a ``reason`` when the
        equations are singular (e.g. every worker gave one label, or one prompt only).

    Notes
    -----
    Unbiased, but an estimate may be negative when a true component is near 0: it is reported as
    it is, never clamped (as the residual is). ``share`` divides each by their sum.

    Examples
    --------
    A complete 2 × 2 design with a worker effect only:

    >>> from audits.engine.matrix import LabelMatrix
    >>> m = LabelMatrix.from_triples(["a", "a", "b", "b"], [1, 2, 1, 2], [1.0, 1.0, 3.0, 3.0])
    >>> vc = variance_components(m)
    >>> vc["worker"], vc["prompt"], vc["residual"]
    (2.0, 0.0, 0.0)
    """
    y = _values(matrix, values)
    n, m = matrix.n_workers, matrix.n_prompts
    big_n = float(y.size)
    ni = np.bincount(matrix.worker, minlength=n).astype(np.float64)
    nj = np.bincount(matrix.prompt, minlength=m).astype(np.float64)
    # shifted by the mean: the U-statistics are differences, so the shift changes nothing but rounding
    d = y - y.mean() if y.size else y
    sq = d * d
    u_w, u_p = _pairs_within(matrix.worker, ni, d, sq), _pairs_within(matrix.prompt, nj, d, sq)
    u_e = float(big_n * sq.sum() - d.sum() ** 2)
    sw, sp = float((ni * ni).sum()), float((nj * nj).sum())
    coef = np.array(
        [
            [0.0, sw - big_n, sw - big_n],
            [sp - big_n, 0.0, sp - big_n],
            [big_n * big_n - sw, big_n * big_n - sp, big_n * big_n - big_n],
        ]
    )
    out = {"method": VARIANCE_METHOD, "values": values, "n_labels": int(big_n)}
    scale = np.abs(coef).max() if coef.size else 0.0
    if scale == 0 or abs(np.linalg.det(coef / scale)) < 1e-12:
        reason = "the moment equations are singular: every worker or every prompt needs two labels or more"
        return {**out, "worker": None, "prompt": None, "residual": None, "total": None, "share": None, "reason": reason}
    sig_w, sig_p, sig_e = (float(x) for x in np.linalg.solve(coef, np.array([u_w, u_p, u_e])))
    total = sig_w + sig_p + sig_e
    share = {"worker": sig_w / total, "prompt": sig_p / total, "residual": sig_e / total} if total > 0 else None
    return {**out, "worker": sig_w, "prompt": sig_p, "residual": sig_e, "total": total, "share": share, "reason": None}


def _most_common(counts: np.ndarray) -> int:
    freq = np.bincount(counts)
    return int(np.flatnonzero(freq == freq.max()).max())


def resolution(matrix, *, per_rater=None, level: float = 0.95, values: str = "scaled") -> dict:
    """The least difference the instrument resolves at ``level``, between prompts and between systems.

    Prompts: two prompts with k labels each (k = the most common label count) differ significantly
    when their means differ by more than

    .. math::

        \\mathrm{LSD}_{prompts} = t_{1-\\alpha/2,\\ \\nu}\\ s_w \\sqrt{2/k},\\qquad
        s_w^2 = \\frac{\\sum_j (N_{\\cdot j} - 1)\\, s_j^2}{\\sum_j (N_{\\cdot j} - 1)},\\quad
        \\nu = \\sum_j (N_{\\cdot j} - 1),

    Fisher's least significant difference on the pooled within-prompt variance (it holds the worker
    and residual variance: different prompts get different workers). ``detectable_80`` is the true
    difference such a test finds 80 % of the time, ``(t_{1−α/2, ν} + t_{0.8, ν}) s_w √(2/k)``.

    Systems: with ``per_rater`` scores of two systems (:class:`audits.engine.systems.PerRaterScores`),
    the paired t-test across the r raters scored on both finds a mean difference significant above
    ``t_{1−α/2, r−1} s_d / √r`` (``s_d`` the SD of the per-rater differences): exactly where
    :func:`audits.engine.instrument.compare_systems` turns significant. With one system, the bound
    for an unpaired second system with the same spread ``s`` across raters,
    ``t_{1−α/2, 2r−2} s √(2/r)`` (pairing can only shrink it when the systems' scores correlate).

    Parameters
    ----------
    matrix : LabelMatrix
    per_rater : PerRaterScores, optional
    level : float
    values : {"scaled", "raw"}
        Units of the prompt resolution.

    Returns
    -------
    dict
        ``{"method", "level", "prompts": {"values", "k", "within_sd", "df", "least_significant",
        "detectable_80"}, "systems": {"metric", "n_raters", "paired", "sd", "least_significant"}
        or None}``; a figure is None where its SD is undefined.
    """
    from scipy import stats  # imported here: scipy.stats costs ~0.8 s to import

    y = _values(matrix, values)
    alpha = 1 - level
    c = matrix.prompt_counts.astype(np.float64)
    t = np.bincount(matrix.prompt, weights=y, minlength=matrix.n_prompts)
    r = np.bincount(matrix.prompt, weights=y * y, minlength=matrix.n_prompts)
    var = var_from_sums(c, t, r, 1)
    ok = ~np.isnan(var)
    df = float((c[ok] - 1).sum())
    prompts: dict = {"values": values, "k": _most_common(matrix.prompt_counts) if c.size else None, "df": int(df)}
    if df > 0 and prompts["k"]:
        s_w = float(np.sqrt(((c[ok] - 1) * var[ok]).sum() / df))
        se = s_w * np.sqrt(2 / prompts["k"])
        q = float(stats.t.ppf(1 - alpha / 2, df))
        prompts.update(
            within_sd=s_w, least_significant=float(q * se), detectable_80=float((q + stats.t.ppf(0.8, df)) * se)
        )
    else:
        prompts.update(within_sd=None, least_significant=None, detectable_80=None)
    systems = None
    if per_rater is not None:
        paired = len(per_rater.scores) >= 2
        if paired:
            a, b = per_rater.scores[0], per_rater.scores[1]
            d = (a - b)[~np.isnan(a) & ~np.isnan(b)]
            k = d.size
            sd = float(d.std(ddof=1)) if k > 1 else None
            lsd = float(stats.t.ppf(1 - alpha / 2, k - 1) * sd / np.sqrt(k)) if sd is not None else None
        else:
            s = per_rater.scores[0][~np.isnan(per_rater.scores[0])]
            k = s.size
            sd = float(s.std(ddof=1)) if k > 1 else None
            lsd = float(stats.t.ppf(1 - alpha / 2, 2 * k - 2) * sd * np.sqrt(2 / k)) if sd is not None else None
        systems = {"metric": per_rater.metric, "n_raters": int(k), "paired": paired, "sd": sd, "least_significant": lsd}
    return {"method": RESOLUTION_METHOD, "level": level, "prompts": prompts, "systems": systems}
