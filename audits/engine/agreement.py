"""Agreement coefficients on the raw (not binarized) labels (``noise-audit.md``, "Agreement").

- Krippendorff's alpha (nominal, ordinal, interval, ratio) through the ``krippendorff`` package,
  fed with the units × values count table (so the matrix never becomes dense).
- Gwet's AC1 (unweighted) and AC2 (weighted: linear, quadratic, ordinal), implemented from Gwet,
  *Handbook of Inter-Rater Reliability*, 4th ed. (2014), ch. 4 and 5 (multiple raters, missing
  ratings), matching the R/Python ``irrCAC`` packages' point estimates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import krippendorff
import numpy as np

__all__ = [
    "AgreementResult",
    "value_count_table",
    "krippendorff_alpha",
    "gwet_ac",
    "gwet_weights",
    "agreement_coefficients",
    "ALPHA_LEVELS",
    "AC_WEIGHTS",
]

ALPHA_LEVELS = ("nominal", "ordinal", "interval", "ratio")
AC_WEIGHTS = ("identity", "linear", "quadratic", "ordinal")
_MAX_CELLS = 60_000_000


def value_count_table(matrix, *, values: str = "raw") -> tuple[np.ndarray, np.ndarray]:
    """The units × categories table of counts (``r_ik``; one row per audit unit) and the sorted categories.

    Parameters
    ----------
    matrix : LabelMatrix
    values : {"raw", "scaled"}
        Count raw values (default) or scaled values.

    Returns
    -------
    (table, categories) : (ndarray of int64, shape (n_prompts, q), ndarray, shape (q,))
        Categories are the distinct values present, ascending; for non-numeric raw labels they are
        the category codes (see ``matrix.raw_levels``).

    Raises
    ------
    ValueError
        naming ``values`` for an unknown choice, or ``matrix`` when the table would be too large
        (more than 60 million cells: too many distinct values for a count table).
    """
    if values not in ("raw", "scaled"):
        raise ValueError(f"values: expected 'raw' or 'scaled', got {values!r}")
    cache = matrix.__dict__.setdefault("_value_count_tables", {})
    if values in cache:
        return cache[values]
    v = matrix.raw if values == "raw" else matrix.value
    lo = float(v.min()) if v.size else 0.0
    span = float(v.max()) - lo + 1 if v.size else 0.0
    if v.size and span <= 10_000 and np.all(v == np.rint(v)):  # integer ratings: O(L), no sort
        shifted = (v - lo).astype(np.int64)
        present = np.bincount(shifted, minlength=int(span)) > 0
        cats = np.flatnonzero(present) + lo
        codes = (np.cumsum(present) - 1)[shifted]
    else:
        cats, codes = np.unique(v, return_inverse=True)
    q = len(cats)
    if matrix.n_prompts * q > _MAX_CELLS:
        raise ValueError(f"matrix: {matrix.n_prompts} prompts × {q} distinct values is too large for a count table")
    table = np.bincount(matrix.prompt * q + codes, minlength=matrix.n_prompts * q)
    cache[values] = (table.reshape(matrix.n_prompts, q), cats)
    return cache[values]


@dataclass(frozen=True)
class AgreementResult:
    """One agreement coefficient: its value (None when undefined, with the reason) and its parts."""

    name: str
    value: float | None
    pa: float | None = None
    pe: float | None = None
    n_units: int = 0
    n_categories: int = 0
    reason: str | None = None
    n_labels: int = 0  # labels in the n_units prompts: the sample size the dashboard states

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def krippendorff_alpha(matrix, *, level: str = "nominal", values: str = "raw") -> AgreementResult:
    """Krippendorff's alpha of the labels, via ``krippendorff.alpha(value_counts=...)``.

    .. math:: \\alpha = 1 - \\frac{D_o}{D_e}

    with observed and expected disagreement from the coincidence matrix (Krippendorff 2011,
    "Computing Krippendorff's Alpha-Reliability"), the distance set by ``level``.

    Parameters
    ----------
    matrix : LabelMatrix
    level : {"nominal", "ordinal", "interval", "ratio"}
    values : {"raw", "scaled"}

    Returns
    -------
    AgreementResult
        ``value`` None with a reason when alpha is undefined: one category only, no prompt with two
        labels, or an ordered level on non-numeric categories.
    """
    if level not in ALPHA_LEVELS:
        raise ValueError(f"level: expected one of {ALPHA_LEVELS}, got {level!r}")
    name = f"krippendorff_alpha_{level}"
    if level != "nominal" and values == "raw" and matrix.raw_levels is not None:
        return AgreementResult(
            name, None, reason="raw labels are categories without numeric values: only nominal alpha applies"
        )
    table, cats = value_count_table(matrix, values=values)
    q = len(cats)
    if q < 2:
        return AgreementResult(
            name,
            None,
            n_units=matrix.n_prompts,
            n_categories=q,
            n_labels=matrix.n_labels,
            reason="only one distinct value: no disagreement to measure against",
        )
    pairable = table.sum(axis=1) >= 2
    if not pairable.any():
        return AgreementResult(name, None, n_units=0, n_categories=q, reason="no prompt has two or more labels")
    table = table[pairable]
    size = {"n_units": int(table.shape[0]), "n_categories": q, "n_labels": int(table.sum())}
    if table.shape[0] * q * q > _MAX_CELLS:
        return AgreementResult(
            name,
            None,
            **size,
            reason=f"{q} distinct values over {table.shape[0]} prompts is too large for the coincidence computation",
        )
    with np.errstate(invalid="ignore", divide="ignore"):  # 0/0 when every pairable prompt is unanimous: handled below
        value = float(krippendorff.alpha(value_counts=table, value_domain=cats, level_of_measurement=level))
    if not np.isfinite(value):
        return AgreementResult(name, None, **size, reason="expected disagreement is 0")
    return AgreementResult(name, value, **size)


def gwet_weights(categories: Any, kind: str = "identity") -> np.ndarray:
    """Gwet's weight matrices (Handbook, 4th ed., ch. 3; as in ``irrCAC``).

    - identity: ``w_kl = 1{k = l}`` (gives AC1);
    - linear: ``1 − |x_k − x_l| / (x_max − x_min)``;
    - quadratic: ``1 − (x_k − x_l)² / (x_max − x_min)²``;
    - ordinal: ``1 − M_kl / max M`` with ``M_kl = C(|k − l| + 1, 2)`` on category ranks.

    ``categories`` are the category values (numbers, ascending) used by linear/quadratic weights.
    """
    x = np.asarray(categories, dtype=np.float64)
    q = x.shape[0]
    if kind == "identity":
        return np.eye(q)
    if q < 2:
        return np.ones((q, q))
    if kind == "linear":
        return 1 - np.abs(x[:, None] - x[None, :]) / (x.max() - x.min())
    if kind == "quadratic":
        return 1 - (x[:, None] - x[None, :]) ** 2 / (x.max() - x.min()) ** 2
    if kind == "ordinal":
        r = np.arange(q)
        nkl = np.abs(r[:, None] - r[None, :]) + 1
        m = nkl * (nkl - 1) / 2
        return 1 - m / m.max()
    raise ValueError(f"kind: expected one of {AC_WEIGHTS}, got {kind!r}")


def gwet_ac(table: Any, *, weights: str | np.ndarray = "identity", categories: Any = None) -> AgreementResult:
    """Gwet's AC1 (identity weights) or AC2 (other weights) from a units × categories count table.

    With ``r_ik`` raters putting unit i in category k, ``r_i = Σ_k r_ik``, weights ``w_kl`` and
    ``r*_ik = Σ_l w_kl r_il`` (Gwet 2014, eqs. 4.x for multiple raters with missing ratings):

    .. math::

        p_a = \\frac{1}{n'} \\sum_{i: r_i \\ge 2} \\sum_k \\frac{r_{ik}(r^*_{ik} - 1)}{r_i (r_i - 1)},\\qquad
        \\pi_k = \\frac{1}{n} \\sum_i \\frac{r_{ik}}{r_i},

        p_e = \\frac{T_w}{q(q-1)} \\sum_k \\pi_k (1 - \\pi_k),\\qquad
        AC = \\frac{p_a - p_e}{1 - p_e}

    where n' counts units with at least two ratings, n units with at least one, q categories and
    ``T_w = Σ_kl w_kl``.

    Parameters
    ----------
    table : array_like, shape (n_units, q)
        Counts per unit and category (see :func:`value_count_table`).
    weights : {"identity", "linear", "quadratic", "ordinal"} or ndarray (q, q)
    categories : array_like, shape (q,), optional
        Category values for linear/quadratic weights (default 1..q).

    Returns
    -------
    AgreementResult
        ``name`` is ``"gwet_ac1"`` or ``"gwet_ac2_<weights>"``; ``value`` None with a reason for a
        single category (p_e = 1) or no unit with two ratings.

    Examples
    --------
    Gwet's 4-rater, 12-unit example (``cac.raw4raters`` in irrCAC), published AC1 = 0.7754:

    >>> t = [[3,0,0,0,0],[0,3,1,0,0],[0,0,4,0,0],[0,0,4,0,0],[0,4,0,0,0],[1,1,1,1,0],
    ...      [0,0,0,4,0],[3,1,0,0,0],[0,4,0,0,0],[0,0,0,0,3],[2,0,0,0,0],[0,0,1,0,0]]
    >>> round(gwet_ac(t).value, 4)
    0.7754
    """
    t = np.asarray(table, dtype=np.float64)
    if t.ndim != 2:
        raise ValueError(f"table: expected a 2-d units × categories array, got shape {t.shape}")
    if (t < 0).any():
        raise ValueError("table: counts cannot be negative")
    q = t.shape[1]
    if categories is None:
        categories = np.arange(1, q + 1, dtype=np.float64)
    if isinstance(weights, str):
        kind = weights
        w = gwet_weights(categories, weights)
    else:
        kind = "custom"
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (q, q):
            raise ValueError(f"weights: expected a {q}×{q} matrix, got shape {w.shape}")
    name = "gwet_ac1" if kind == "identity" else f"gwet_ac2_{kind}"
    ri = t.sum(axis=1)
    t, ri = t[ri > 0], ri[ri > 0]
    n, n_labels = t.shape[0], int(ri.sum())
    if q < 2:
        return AgreementResult(
            name, None, n_units=n, n_categories=q, n_labels=n_labels, reason="only one category: chance agreement is 1"
        )
    two = ri >= 2
    if not two.any():
        return AgreementResult(
            name, None, n_units=n, n_categories=q, n_labels=n_labels, reason="no unit has two or more ratings"
        )
    tw = np.dot(t, np.ascontiguousarray(w.T))  # r*_ik = sum_l w_kl r_il (contiguous: BLAS, not a slow loop)
    pa = float(np.mean((t[two] * (tw[two] - 1)).sum(axis=1) / (ri[two] * (ri[two] - 1))))
    pi = (t / ri[:, None]).mean(axis=0)
    pe = float(w.sum() * np.sum(pi * (1 - pi)) / (q * (q - 1)))
    if pe >= 1:
        return AgreementResult(name, None, pa, pe, n, q, reason="chance agreement is 1", n_labels=n_labels)
    return AgreementResult(name, (pa - pe) / (1 - pe), pa, pe, n, q, n_labels=n_labels)


def agreement_coefficients(matrix, *, values: str = "raw", levels: tuple = None, weights: tuple = AC_WEIGHTS) -> dict:
    """Krippendorff's alpha at each level and Gwet's AC1/AC2 for each weighting, as a dict.

    Numeric raw labels get alpha at ``nominal``, ``ordinal`` and ``interval`` (default) and AC1 plus
    AC2 with linear, quadratic and ordinal weights; categorical raw labels get the nominal
    coefficients only.
    """
    out: dict = {"values": values}
    categorical = values == "raw" and matrix.raw_levels is not None
    if levels is None:
        levels = ("nominal",) if categorical else ("nominal", "ordinal", "interval")
    for lv in levels:
        out[f"alpha_{lv}"] = krippendorff_alpha(matrix, level=lv, values=values).to_dict()
    try:
        table, cats = value_count_table(matrix, values=values)
    except ValueError as exc:
        out["gwet"] = {"reason": str(exc)}
        return out
    for wk in weights:
        if categorical and wk != "identity":
            continue
        res = gwet_ac(table, weights=wk, categories=cats if not categorical else None)
        out[res.name] = res.to_dict()
    return out
