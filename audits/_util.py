"""Small helpers shared by the audit modules (no Django)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np


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
    import pandas as pd

    return pd


def as_array(values: Any) -> np.ndarray:
    """A 1-d numpy array from a list, ndarray, pandas Series or Index."""
    if hasattr(values, "to_numpy") and not isinstance(values, np.ndarray):
        return values.to_numpy()
    return np.asarray(values)


def is_series(x: Any) -> bool:
    return type(x).__name__ == "Series" and hasattr(x, "index") and hasattr(x, "to_numpy")


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
                codes = np.fromiter((seen.setdefault(v, len(seen)) for v in arr.tolist()), dtype=np.int64,
                                    count=arr.size)
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
