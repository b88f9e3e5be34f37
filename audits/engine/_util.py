"""Private helpers shared by several engine modules (no Django); each used by one module stays in it.

- plain Python values for the JSON report (:func:`py`, :func:`floats`);
- ids and values as arrays (:func:`as_array`, :func:`factorize`, :func:`map_values`, :func:`positions`);
- the ``ddof`` check and the batched core of the six numbers (:func:`noise_core`, with
  :func:`var_from_sums` and :func:`combine_noise`), which :mod:`audits.engine.noise`,
  :mod:`audits.engine.filters` and :mod:`audits.engine.instrument` all compute with.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

_EPS = np.finfo(np.float64).eps
_EXACT = float(2**53)


def py(x: Any) -> Any:
    """A numpy scalar (or array) as plain Python; NaN and ±inf become None."""
    if isinstance(x, np.ndarray):
        if x.dtype.kind in "iub":
            return x.tolist()
        if x.dtype.kind == "f":
            return floats(x)
        return [py(v) for v in x.tolist()]
    if isinstance(x, (list, tuple)):
        return [py(v) for v in x]
    if isinstance(x, dict):
        return {str(k): py(v) for k, v in x.items()}
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def floats(a: np.ndarray) -> list:
    """A float array as a list with None for NaN (fast path for long columns)."""
    a = np.asarray(a, dtype=np.float64)
    out = a.tolist()
    bad = ~np.isfinite(a)
    if bad.any():
        for i in np.flatnonzero(bad).tolist():
            out[i] = None
    return out


#: inputs up to this many elements take pure-numpy/Python paths; larger ones use pandas' hash
#: tables (imported lazily: pandas costs ~0.2 s to import, so a 10k-label audit does without it)
SMALL = 200_000


def pandas():
    """The pandas module, imported on first use."""
    import pandas as pd  # imported here, for import speed (see SMALL)

    return pd


def as_array(values: Any) -> np.ndarray:
    """A 1-d numpy array from a list, ndarray, pandas Series or Index."""
    if hasattr(values, "to_numpy") and not isinstance(values, np.ndarray):
        return values.to_numpy()
    return np.asarray(values)


def is_series(x: Any) -> bool:
    return type(x).__name__ == "Series" and hasattr(x, "index") and hasattr(x, "to_numpy")


def keys_values(predictions: Any) -> tuple[list, list]:
    """A system's predictions, a mapping ``{prompt id: value}`` or a pandas Series, as keys and values."""
    if is_series(predictions):
        return predictions.index.tolist(), predictions.tolist()
    if isinstance(predictions, Mapping):
        return list(predictions.keys()), list(predictions.values())
    raise ValueError("predictions: expected a mapping {prompt id: value} or a pandas Series")


def factorize(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, uniques)`` with uniques sorted when the values are orderable (first-seen otherwise)."""
    if arr.dtype.kind in "iu" and arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo >= 0 and hi <= 2 * arr.size + 1024:  # dense non-negative ids (database keys): O(L)
            present = np.bincount(arr, minlength=hi + 1) > 0
            code_of = np.cumsum(present) - 1
            return code_of[arr], np.flatnonzero(present).astype(arr.dtype)
    if arr.dtype.kind in "iufb" and arr.size > SMALL:
        pd = pandas()
        codes, uniques = pd.factorize(arr, sort=True)
        return codes.astype(np.int64, copy=False), np.asarray(uniques)
    if arr.dtype.kind in "iufb" or arr.size <= SMALL:
        try:
            uniques, codes = np.unique(arr, return_inverse=True)
            return codes.astype(np.int64, copy=False).reshape(-1), uniques
        except TypeError:  # mixed, unorderable ids
            if arr.size <= SMALL:
                seen: dict = {}
                codes = np.fromiter(
                    (seen.setdefault(v, len(seen)) for v in arr.tolist()), dtype=np.int64, count=arr.size
                )
                uniques = np.empty(len(seen), dtype=object)
                uniques[:] = list(seen)
                return codes, uniques
    pd = pandas()
    s = pd.Series(arr, dtype=object) if arr.dtype.kind == "O" else pd.Series(arr)
    try:
        codes, uniques = pd.factorize(s, sort=True)
    except TypeError:
        codes, uniques = pd.factorize(s, sort=False)
    return codes.astype(np.int64, copy=False), np.asarray(uniques, dtype=object if arr.dtype.kind == "O" else None)


def map_values(keys: np.ndarray, mapping: dict, default: float = np.nan) -> np.ndarray:
    """``mapping[k]`` for each key as float64 (``default`` when absent)."""
    if keys.size <= SMALL:
        return np.fromiter((mapping.get(k, default) for k in keys.tolist()), dtype=np.float64, count=keys.size)
    pd = pandas()
    return pd.Series(keys, dtype=object).map(mapping).to_numpy(dtype=np.float64, na_value=default)


def positions(ids: np.ndarray, keys: list) -> np.ndarray:
    """Index of each key in ``ids`` (-1 if absent); ids of another type match on their text."""
    index = {k: i for i, k in enumerate(ids.tolist())}
    pos = np.fromiter((index.get(k, -1) for k in keys), dtype=np.int64, count=len(keys))
    if len(keys) and (pos < 0).all():
        index = {str(k): i for i, k in enumerate(ids.tolist())}
        pos = np.fromiter((index.get(str(k), -1) for k in keys), dtype=np.int64, count=len(keys))
    return pos


def check_ddof(ddof: Any) -> int:
    """``ddof`` as an int; ValueError naming ``ddof`` unless it is 1 (sample SD) or 0 (population SD)."""
    if isinstance(ddof, bool) or not isinstance(ddof, (int, np.integer)) or int(ddof) not in (0, 1):
        raise ValueError(f"ddof: expected 1 (sample SD) or 0 (population SD), got {ddof!r}")
    return int(ddof)


# --------------------------------------------------------------------------------------- the noise core
def _grouped_sd(g: np.ndarray, v: np.ndarray, w: np.ndarray | None, n_groups: int, ddof: int):
    """Weighted two-pass SD of ``v`` within each group ``g`` (weights = multiplicities; None = 1).

    Returns ``(sd, n)``: ``sd`` is NaN where the group has ``n <= ddof`` values.
    """
    if n_groups == 1:  # one audit: plain reductions (bincount is slower for a single bin)
        n1 = float(w.sum()) if w is not None else float(v.shape[0])
        if n1 <= ddof:
            return np.array([np.nan]), np.array([n1])
        d = v - v[0]  # shift by a member: identical values give exactly 0
        mean = (d.sum() if w is None else (w * d).sum()) / n1
        dev = d - mean
        ss = (dev * dev).sum() if w is None else (w * dev * dev).sum()
        return np.array([np.sqrt(ss / (n1 - ddof))]), np.array([n1])
    if w is None:
        w = np.ones(v.shape[0])
    n = np.bincount(g, weights=w, minlength=n_groups)
    # shift by one member of each group, so identical values give exactly 0 (0.2 three times has
    # a float mean of 0.20000000000000004, which a plain two-pass SD would turn into 3e-17)
    ref = np.zeros(n_groups)
    ref[g] = v  # any member of the group will do
    d = v - ref[g]
    s = np.bincount(g, weights=w * d, minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = s / n
        dev = d - mean[g]
        ss = np.bincount(g, weights=w * dev * dev, minlength=n_groups)
        var = np.where(n > ddof, ss / (n - ddof), np.nan)
    return np.sqrt(var), n


def var_from_sums(c: np.ndarray, t: np.ndarray, r: np.ndarray, ddof: int) -> np.ndarray:
    """Variance from count, sum and sum of squares: ``(c·r − t²) / (c·(c − ddof))``.

    NaN where ``c <= ddof``. When every input is an integer below 2**53 the numerator is exact;
    otherwise a numerator within rounding error of zero (``<= 4·eps·c²·r``) is taken as 0, so
    identical non-integer values give an SD of exactly 0 rather than ~1e-9.
    """
    c = np.asarray(c, dtype=np.float64)
    t = np.asarray(t, dtype=np.float64)
    r = np.asarray(r, dtype=np.float64)
    num = c * r - t * t
    small = num <= 4.0 * _EPS * c * c * np.abs(r)
    if small.any():  # only near-zero numerators need a closer look
        i = np.flatnonzero(small)
        ti, ri, ci = t[i], r[i], c[i]
        exact = (ti == np.rint(ti)) & (ri == np.rint(ri)) & (ci * ri < _EXACT) & (ti * ti < _EXACT)
        num = num.copy() if num.base is not None else num
        num[i] = np.where(exact, np.maximum(num[i], 0.0), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(c > ddof, num / (c * (c - ddof)), np.nan)


def noise_core(
    n_groups: int,
    ddof: int,
    wg: np.ndarray,
    w_count: np.ndarray,
    w_sum: np.ndarray,
    w_weight: np.ndarray | None,
    pg: np.ndarray,
    p_count: np.ndarray,
    p_sum: np.ndarray,
    p_sumsq: np.ndarray,
    p_weight: np.ndarray | None,
) -> dict[str, np.ndarray]:
    """The six numbers for ``n_groups`` independent audits at once (one way to compute them).

    Each *worker entry* e belongs to group ``wg[e]`` and stands for ``w_weight[e]`` workers that
    each have ``w_count[e]`` labels summing to ``w_sum[e]``; each *prompt entry* likewise stands for
    ``p_weight[e]`` prompts with ``p_count``, ``p_sum``, ``p_sumsq``. Entries with count 0 are
    ignored (not part of the matrix). Returns arrays of length ``n_groups`` (NaN = undefined).
    """
    wg = np.asarray(wg, dtype=np.int64)
    pg = np.asarray(pg, dtype=np.int64)
    w_count = np.asarray(w_count, dtype=np.float64)
    p_count = np.asarray(p_count, dtype=np.float64)
    if w_weight is not None:
        w_weight = np.asarray(w_weight, dtype=np.float64)
    if p_weight is not None:
        p_weight = np.asarray(p_weight, dtype=np.float64)
    wkeep = (w_count > 0) if w_weight is None else (w_count > 0) & (w_weight > 0)
    pkeep = (p_count > 0) if p_weight is None else (p_count > 0) & (p_weight > 0)
    if not wkeep.all():
        wg, w_count, w_sum = wg[wkeep], w_count[wkeep], np.asarray(w_sum)[wkeep]
        w_weight = None if w_weight is None else w_weight[wkeep]
    if not pkeep.all():
        pg, p_count = pg[pkeep], p_count[pkeep]
        p_weight = None if p_weight is None else p_weight[pkeep]
        p_sum, p_sumsq = np.asarray(p_sum)[pkeep], np.asarray(p_sumsq)[pkeep]
    w_sum = np.asarray(w_sum, dtype=np.float64)
    p_sum = np.asarray(p_sum, dtype=np.float64)
    p_sumsq = np.asarray(p_sumsq, dtype=np.float64)

    ln, n_workers = _grouped_sd(wg, w_sum / w_count, w_weight, n_groups, ddof)
    pn_orig, n_prompts = _grouped_sd(pg, p_sum / p_count, p_weight, n_groups, ddof)
    p_var = var_from_sums(p_count, p_sum, p_sumsq, ddof)
    has_sd = ~np.isnan(p_var)
    pn_mod, n_prompts_sd = _grouped_sd(
        pg[has_sd], np.sqrt(p_var[has_sd]), None if p_weight is None else p_weight[has_sd], n_groups, ddof
    )

    def total(x):
        x = x if p_weight is None else p_weight * x
        return np.array([x.sum()]) if n_groups == 1 else np.bincount(pg, weights=x, minlength=n_groups)

    big_n, big_s, big_q = total(p_count), total(p_sum), total(p_sumsq)
    sn = np.sqrt(var_from_sums(big_n, big_s, big_q, ddof))

    out = combine_noise(ln, pn_orig, pn_mod, sn)
    out.update(n_workers=n_workers, n_prompts=n_prompts, n_prompts_with_sd=n_prompts_sd, n_labels=big_n)
    return out


def combine_noise(ln, pn_orig, pn_mod, sn) -> dict[str, np.ndarray]:
    """``residual = SN² − LN² − PN_orig²`` and ``SN_mod = sqrt(LN² + PN_mod² + residual)`` (NaN if < 0)."""
    residual = sn * sn - ln * ln - pn_orig * pn_orig
    # rounding, not clamping: a residual within a few ulps of the terms is exactly 0 (e.g. perfect
    # agreement under the population SD), so SN_mod is 0 there, not null because of -3e-17
    residual = np.where(np.abs(residual) <= 16 * _EPS * (sn * sn + ln * ln + pn_orig * pn_orig), 0.0, residual)
    total = ln * ln + pn_mod * pn_mod + residual
    total = np.where(np.abs(total) <= 16 * _EPS * (ln * ln + pn_mod * pn_mod + np.abs(residual)), 0.0, total)
    with np.errstate(invalid="ignore"):
        sn_mod = np.where(total >= 0, np.sqrt(np.where(total >= 0, total, 0.0)), np.nan)
    return {
        "level_noise": ln,
        "pattern_noise_orig": pn_orig,
        "pattern_noise_mod": pn_mod,
        "system_noise_orig": sn,
        "residual": residual,
        "system_noise_mod": sn_mod,
        "mod_sum": total,
    }
