"""Agreement coefficients on the raw (not binarized) labels (``noise-audit.md``, "Agreement").

- Krippendorff's alpha (nominal, ordinal, interval, ratio) through the ``krippendorff`` package,
  fed with the units × values count table (so the matrix never becomes dense).
- Gwet's AC1 (unweighted) and AC2 (weighted: linear, quadratic, ordinal), implemented from Gwet,
  *Handbook of Inter-Rater Reliability*, 4th ed. (2014), ch. 4 and 5 (multiple raters, missing
  ratings), matching the R/Python ``irrCAC`` packages' point estimates.
- Cohen's κ per pair of workers and its mean, Fleiss' κ over the prompts with the modal label count
  (the equations of Cohen 1960 and Fleiss 1971, as statsmodels' ``inter_rater`` module computes them),
  and each prompt's agreement (share of the mode, entropy).
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
    "cohen_kappa_pairs",
    "fleiss_kappa",
    "prompt_agreement",
    "PairKappas",
    "PromptAgreement",
    "KAPPA_MIN_SHARED",
    "ALPHA_LEVELS",
    "AC_WEIGHTS",
]

ALPHA_LEVELS = ("nominal", "ordinal", "interval", "ratio")
AC_WEIGHTS = ("identity", "linear", "quadratic", "ordinal")
_MAX_CELLS = 60_000_000
_MAX_LABEL_PAIRS = 20_000_000  # Cohen's κ: ten times a million labels at five per prompt


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
    """Krippendorff's alpha at each level, Gwet's AC1/AC2 for each weighting, the mean of Cohen's κ
    over pairs of workers (``cohen_kappa_mean``, :func:`cohen_kappa_pairs`) and Fleiss' κ
    (``fleiss_kappa``, :func:`fleiss_kappa`), as a dict.

    Numeric raw labels get alpha at ``nominal``, ``ordinal`` and ``interval`` (default) and AC1 plus
    AC2 with linear, quadratic and ordinal weights; categorical raw labels get the nominal
    coefficients only. The κs are nominal on either.
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
    else:
        for wk in weights:
            if categorical and wk != "identity":
                continue
            res = gwet_ac(table, weights=wk, categories=cats if not categorical else None)
            out[res.name] = res.to_dict()
    try:
        out["cohen_kappa_mean"] = cohen_kappa_pairs(matrix, values=values).summary()
    except ValueError as exc:  # too many pairs × values for the tables: said, like the count table's limit
        out["cohen_kappa_mean"] = {"name": "cohen_kappa_mean", "value": None, "reason": str(exc)}
    out["fleiss_kappa"] = fleiss_kappa(matrix, values=values)
    return out


# ---------------------------------------------------------------------------------- kappas
#: Pairs of workers enter Cohen's κ only when they labeled at least this many prompts in common:
#: on fewer, one disagreement swings a pair's κ by more than 0.1 and the mean would mostly measure
#: which pairs happened to meet.
KAPPA_MIN_SHARED = 10


def _category_codes(matrix, values: str) -> tuple[np.ndarray, int]:
    """Each label's category index and the number of categories. Raw values are the categories
    (numbers compared as they are, so an integer rating scale's points are its categories and a
    finer scale's distinct values are theirs: κ is nominal); non-numeric raw labels are their codes."""
    if values not in ("raw", "scaled"):
        raise ValueError(f"values: expected 'raw' or 'scaled', got {values!r}")
    cats, codes = np.unique(matrix.raw if values == "raw" else matrix.value, return_inverse=True)
    return codes.astype(np.int64), int(cats.shape[0])


def _label_pairs(matrix) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of labels on the same prompt, as two arrays of label positions ``(i, j)``
    (``Σ_j C(k_j, 2)`` pairs, built per distinct prompt size without a loop over prompts)."""
    counts = matrix.prompt_counts
    n_pairs = int((counts * (counts - 1) // 2).sum())
    if n_pairs > _MAX_LABEL_PAIRS:  # some ten arrays of that length follow: keep them within memory
        raise ValueError(f"matrix: {n_pairs} pairs of labels on the same prompts are too many for Cohen's κ")
    order = np.argsort(matrix.prompt, kind="stable")
    starts = np.r_[0, np.cumsum(counts)[:-1]] if counts.size else np.zeros(0, np.int64)
    first, second = [], []
    for c in np.unique(counts[counts >= 2]):
        iu, ju = np.triu_indices(int(c), k=1)
        s = starts[counts == c][:, None]
        first.append((s + iu).ravel())
        second.append((s + ju).ravel())
    if not first:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return order[np.concatenate(first)], order[np.concatenate(second)]


@dataclass(frozen=True)
class PairKappas:
    """Cohen's κ of each pair of workers with at least ``min_shared`` prompts in common.

    ``worker_a``/``worker_b`` are worker ids (``a`` before ``b`` in the matrix's order),
    ``n_shared`` their common prompts, ``kappa`` NaN where undefined (both used one and the same
    category throughout: chance agreement is 1)."""

    worker_a: np.ndarray
    worker_b: np.ndarray
    n_shared: np.ndarray
    kappa: np.ndarray
    min_shared: int
    n_categories: int
    n_pairs_met: int  # pairs of workers with at least one prompt in common
    n_units: int = 0  # distinct prompts and labels behind the defined κs (what the dashboard states)
    n_labels: int = 0

    def summary(self) -> dict:
        """The report's ``cohen_kappa_mean``: the mean of the defined pair κs, with the pairs it
        averages (``n_pairs``), the pairs left out as undefined and the prompts/labels behind them."""
        defined = np.isfinite(self.kappa)
        out = {
            "name": "cohen_kappa_mean",
            "value": float(self.kappa[defined].mean()) if defined.any() else None,
            "n_pairs": int(defined.sum()),
            "n_pairs_undefined": int((~defined).sum()),
            "n_pairs_met": self.n_pairs_met,
            "min_shared": self.min_shared,
            "n_units": self.n_units,
            "n_labels": self.n_labels,
            "n_categories": self.n_categories,
            "reason": None,
        }
        if not defined.any():
            out["reason"] = (
                f"no pair of workers shares {self.min_shared} or more prompts"
                if self.kappa.size == 0
                else "every pair used one and the same category throughout: chance agreement is 1"
            )
        return out

    def rows(self) -> list[dict]:
        """One dict per pair (the agreement CSV's rows): ``worker_a``, ``worker_b``, ``n_shared``, ``kappa``."""
        return [
            {"worker_a": a, "worker_b": b, "n_shared": int(n), "kappa": float(k) if np.isfinite(k) else None}
            for a, b, n, k in zip(self.worker_a.tolist(), self.worker_b.tolist(), self.n_shared, self.kappa)
        ]


def cohen_kappa_pairs(matrix, *, values: str = "raw", min_shared: int = KAPPA_MIN_SHARED) -> PairKappas:
    """Cohen's κ (Cohen 1960) for every pair of workers with at least ``min_shared`` shared prompts.

    On the n prompts both workers a and b labeled, with ``p_o`` the share where their labels are
    equal and ``p_a(k)``, ``p_b(k)`` the shares of those prompts each put in category k:

    .. math:: \\kappa_{ab} = \\frac{p_o - p_e}{1 - p_e},\\qquad p_e = \\sum_k p_a(k)\\, p_b(k)

    (``statsmodels.stats.inter_rater.cohens_kappa`` on the pair's 2-way table gives the same; it is
    computed here for all pairs at once from the label pairs on each prompt.) Categories are the
    raw values (``values="raw"``) or the scaled ones, nominal: on a rating scale each point is a
    category and near misses count as disagreements.

    Raises ValueError naming ``matrix`` when the prompts hold more than 20 million pairs of labels
    or the kept pairs of workers × categories exceed the count-table limit (the report then states
    the reason instead of a value).
    """
    if min_shared < 1:
        raise ValueError(f"min_shared: expected at least 1, got {min_shared}")
    codes, q = _category_codes(matrix, values)
    i, j = _label_pairs(matrix)
    wi, wj = matrix.worker[i], matrix.worker[j]
    swap = wi > wj  # order each pair (a < b) so both labels of a pair fall in the same row
    wa, wb = np.where(swap, wj, wi), np.where(swap, wi, wj)
    ca, cb = np.where(swap, codes[j], codes[i]), np.where(swap, codes[i], codes[j])
    keys, pair, n = np.unique(wa.astype(np.int64) * matrix.n_workers + wb, return_inverse=True, return_counts=True)
    keep = n >= min_shared
    kept = np.flatnonzero(keep)
    remap = np.full(keys.shape[0], -1, np.int64)
    remap[kept] = np.arange(kept.shape[0])
    sel = keep[pair]
    p, ca, cb, nk = remap[pair[sel]], ca[sel], cb[sel], n[keep].astype(np.float64)
    n_pairs = kept.shape[0]
    if n_pairs * q > _MAX_CELLS:
        raise ValueError(f"matrix: {n_pairs} pairs of workers × {q} distinct values is too large for Cohen's κ")
    po = np.bincount(p, weights=(ca == cb).astype(np.float64), minlength=n_pairs) / nk
    ma = np.bincount(p * q + ca, minlength=n_pairs * q).reshape(n_pairs, q)
    mb = np.bincount(p * q + cb, minlength=n_pairs * q).reshape(n_pairs, q)
    pe = (ma * mb).sum(axis=1) / nk**2
    with np.errstate(invalid="ignore", divide="ignore"):
        kappa = np.where(pe < 1, (po - pe) / (1 - pe), np.nan)
    used = np.isfinite(kappa)[p]
    labels = np.unique(np.concatenate([i[sel][used], j[sel][used]]))
    ids = np.asarray(matrix.worker_ids)
    return PairKappas(
        worker_a=ids[keys[kept] // matrix.n_workers],
        worker_b=ids[keys[kept] % matrix.n_workers],
        n_shared=n[keep].astype(np.int64),
        kappa=kappa,
        min_shared=min_shared,
        n_categories=q,
        n_pairs_met=int(keys.shape[0]),
        n_units=int(np.unique(matrix.prompt[labels]).shape[0]),
        n_labels=int(labels.shape[0]),
    )


def fleiss_kappa(matrix, *, values: str = "raw", k: int | None = None) -> dict:
    """Fleiss' κ (Fleiss 1971) over the prompts with exactly k labels (default: the most common
    label count among prompts with two or more labels; Fleiss' κ needs the same number per prompt).

    With N such prompts, ``n_ik`` labels of prompt i in category k:

    .. math::

        P_i = \\frac{\\sum_k n_{ik}(n_{ik} - 1)}{k(k - 1)},\\quad \\bar P = \\frac1N \\sum_i P_i,\\quad
        p_k = \\frac{\\sum_i n_{ik}}{Nk},\\quad \\bar P_e = \\sum_k p_k^2,\\quad
        \\kappa = \\frac{\\bar P - \\bar P_e}{1 - \\bar P_e}

    κ itself is ``statsmodels.stats.inter_rater.fleiss_kappa(table, method="fleiss")`` on that table;
    ``pa`` and ``pe`` are reported beside it. Categories as in :func:`cohen_kappa_pairs`. Returns the report's
    ``fleiss_kappa`` dict: ``value`` (None with ``reason`` when undefined), ``pa``, ``pe``, ``k``,
    ``n_units``, ``n_labels``, ``n_categories``.
    """
    codes, q = _category_codes(matrix, values)
    counts = matrix.prompt_counts
    if k is None:
        multi = counts[counts >= 2]
        k = int(np.bincount(multi).argmax()) if multi.size else 0
    out = {"name": "fleiss_kappa", "value": None, "pa": None, "pe": None, "k": k, "n_units": 0, "n_labels": 0}
    out.update(n_categories=q, reason=None)
    if k < 2:
        return {**out, "reason": "no prompt has two or more labels"}
    units = np.flatnonzero(counts == k)
    if units.size == 0:
        return {**out, "reason": f"no prompt has exactly {k} labels"}
    row = np.full(matrix.n_prompts, -1, np.int64)
    row[units] = np.arange(units.size)
    sel = row[matrix.prompt] >= 0
    table = np.bincount(row[matrix.prompt[sel]] * q + codes[sel], minlength=units.size * q).reshape(units.size, q)
    table = table.astype(np.float64)
    pa = float(((table * (table - 1)).sum(axis=1) / (k * (k - 1))).mean())
    pe = float(((table.sum(axis=0) / (units.size * k)) ** 2).sum())
    out.update(pa=pa, pe=pe, n_units=int(units.size), n_labels=int(units.size * k))
    if pe >= 1:
        return {**out, "reason": "only one category among these prompts: chance agreement is 1"}
    # Imported here: statsmodels takes a second to import, which a report without κ need not pay.
    from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss  # noqa: PLC0415

    return {**out, "value": float(statsmodels_fleiss(table, method="fleiss"))}


# ---------------------------------------------------------------------------------- per prompt
@dataclass(frozen=True)
class PromptAgreement:
    """Each prompt's agreement: ``n_labels``, ``mode_share`` (the share of its labels equal to its
    most common value) and ``entropy_bits`` (Shannon entropy of its label distribution, base 2:
    0 when unanimous, 1 for an even split of two values)."""

    prompt_ids: np.ndarray
    n_labels: np.ndarray
    mode_share: np.ndarray
    entropy_bits: np.ndarray

    def rows(self) -> list[dict]:
        return [
            {"prompt": p, "n_labels": int(n), "mode_share": float(s), "entropy_bits": float(h)}
            for p, n, s, h in zip(self.prompt_ids.tolist(), self.n_labels, self.mode_share, self.entropy_bits)
        ]


def prompt_agreement(matrix, *, values: str = "raw") -> PromptAgreement:
    """Per prompt j with ``n_j`` labels and ``n_jk`` of them in category k (categories as in
    :func:`cohen_kappa_pairs`): ``mode_share_j = max_k n_jk / n_j`` and
    ``H_j = −Σ_k (n_jk/n_j) log₂(n_jk/n_j)`` (Shannon 1948; empty categories contribute 0)."""
    codes, q = _category_codes(matrix, values)
    n = matrix.prompt_counts.astype(np.int64)
    # one (prompt, category) count per distinct pair present: no dense prompts × categories table
    cell, count = np.unique(matrix.prompt.astype(np.int64) * q + codes, return_counts=True)
    prompt = cell // q
    share = count / n[prompt]
    top = np.zeros(matrix.n_prompts)
    np.maximum.at(top, prompt, share)
    entropy = np.bincount(prompt, weights=-share * np.log2(share), minlength=matrix.n_prompts)
    return PromptAgreement(np.asarray(matrix.prompt_ids), n, top, np.abs(entropy))  # abs: −0.0 when unanimous
