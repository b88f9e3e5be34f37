"""The label matrix: a sparse worker-by-prompt matrix built from (worker, prompt, value) triples.

See ``noise-audit.md`` ("The label matrix"). Pure numpy (pandas for large inputs, imported lazily); no Django.

Storage is COO: one row per *valid* label, with integer codes for the worker and the prompt
(``np.unique``/``pd.factorize``), the raw value and the scaled value. Workers and prompts that
have no valid label are not part of the matrix. Labels whose value is missing or outside the schema
are counted (``n_missing``, ``n_invalid``) and dropped; they are never audited.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from audits.engine._util import SMALL, as_array, factorize, is_series, map_values, pandas, positions
from audits.engine.noise import SufficientStats

__all__ = ["LabelMatrix", "ValueScale", "DuplicateLabelError", "parse_binarize"]

_NA_STRINGS = frozenset({"", "nan", "na", "n/a", "null", "none"})
_TRUE_STRINGS = frozenset({"true", "yes"})
_FALSE_STRINGS = frozenset({"false", "no"})
_BOOL_STRINGS = {**dict.fromkeys(_TRUE_STRINGS, 1.0), **dict.fromkeys(_FALSE_STRINGS, 0.0)}


class DuplicateLabelError(ValueError):
    """A worker gave more than one label to the same prompt.

    ``positions`` holds the two input positions (0-based indices into the triples) of the first
    duplicate found, so file readers can turn them into line numbers.
    """

    def __init__(self, message: str, positions: tuple[int, int], worker: Any, prompt: Any):
        super().__init__(message)
        self.positions = positions
        self.worker = worker
        self.prompt = prompt


def _key(value: Any) -> float | str:
    """Normalise a schema key: numbers become floats, everything else a stripped lower-case string."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        return text.lower()


def parse_binarize(spec: str | Mapping | None) -> dict | None:
    """Parse a binarization map such as ``"1:0,2:0,3:1,4:1"`` into ``{1.0: 0.0, 2.0: 0.0, ...}``.

    Keys that look like numbers become floats, other keys lower-case strings; targets must be numbers.
    A mapping is normalised the same way. ``None`` gives ``None``.

    Raises
    ------
    ValueError
        naming ``binarize`` when an item has no ``:`` or a target is not a number.
    """
    if spec is None:
        return None
    if isinstance(spec, Mapping):
        items = list(spec.items())
    else:
        items = []
        for part in str(spec).split(","):
            part = part.strip()
            if not part:
                continue
            if ":" not in part:
                raise ValueError(f"binarize: item {part!r} is not of the form raw:scaled (e.g. 1:0,2:0,3:1,4:1)")
            raw, scaled = part.rsplit(":", 1)
            items.append((raw, scaled))
        if not items:
            raise ValueError("binarize: the map is empty")
    out: dict = {}
    for raw, scaled in items:
        try:
            target = float(scaled)
        except (TypeError, ValueError):
            raise ValueError(f"binarize: target {scaled!r} for {raw!r} is not a number") from None
        if not math.isfinite(target):
            raise ValueError(f"binarize: target {scaled!r} for {raw!r} is not finite")
        out[_key(raw)] = target
    return out


@dataclass(frozen=True)
class ValueScale:
    """How raw values become scaled values, and which raw values are valid (the schema).

    Exactly one rule applies, in this order:

    - ``binarize``: a map raw → scaled value (e.g. ``{1: 0, 2: 0, 3: 1, 4: 1}``); raw values not in the
      map are invalid. Keys may be numbers or strings (matched case-insensitively after stripping).
    - ``rescale=(lo, hi)``: ``(raw - lo) / (hi - lo)``; raw values outside ``[lo, hi]`` are invalid.
    - neither: the raw number is audited as it is (``valid_values``, if given, lists the allowed raw
      values). Strings ``true``/``yes`` and ``false``/``no`` read as 1 and 0.

    Missing values (``None``, NaN, empty string, ``NA``/``null``/``none``) are counted as missing.
    """

    binarize: Mapping | None = None
    rescale: tuple[float, float] | None = None
    valid_values: tuple | None = None

    def __post_init__(self):
        if self.binarize is not None:
            object.__setattr__(self, "binarize", parse_binarize(self.binarize))
        if self.rescale is not None:
            try:
                lo, hi = (float(v) for v in self.rescale)
            except (TypeError, ValueError):
                raise ValueError(f"rescale: expected (lo, hi), got {self.rescale!r}") from None
            if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
                raise ValueError(f"rescale: need finite lo < hi, got {self.rescale!r}")
            object.__setattr__(self, "rescale", (lo, hi))
        if self.binarize is not None and self.rescale is not None:
            raise ValueError("binarize and rescale: give at most one of them")
        if self.valid_values is not None:
            object.__setattr__(self, "valid_values", tuple(_key(v) for v in self.valid_values))

    def to_dict(self) -> dict:
        return {
            "binarize": None if self.binarize is None else {str(_fmt_key(k)): v for k, v in self.binarize.items()},
            "rescale": None if self.rescale is None else list(self.rescale),
            "valid_values": None if self.valid_values is None else [_fmt_key(v) for v in self.valid_values],
        }

    def apply(self, values: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """Parse and scale raw values.

        Returns ``(scaled, raw_num, missing, raw_str)``: ``scaled`` is float64 with NaN where missing or
        invalid, ``raw_num`` the raw value as a number (NaN when not numeric), ``missing`` a boolean
        mask, ``raw_str`` the normalised strings (object array) or ``None`` for numeric input.
        """
        raw_num, raw_str, missing = _parse_raw(values)
        n = raw_num.shape[0]
        scaled = np.full(n, np.nan)
        if self.binarize is not None:
            num_keys = {k: v for k, v in self.binarize.items() if isinstance(k, float)}
            str_keys = {k: v for k, v in self.binarize.items() if isinstance(k, str)}
            if num_keys:
                keys = np.array(sorted(num_keys), dtype=float)
                targets = np.array([num_keys[k] for k in keys], dtype=float)
                pos = np.searchsorted(keys, raw_num)
                pos = np.minimum(pos, len(keys) - 1)
                hit = keys[pos] == raw_num
                scaled[hit] = targets[pos[hit]]
            if str_keys and raw_str is not None:
                todo = np.isnan(scaled) & ~missing
                if todo.any():
                    scaled[todo] = map_values(raw_str[todo], str_keys)
        else:
            num = raw_num
            if raw_str is not None and self.rescale is None:  # true/false answer binary scales only
                num = raw_num.copy()
                booleans = map_values(raw_str, _BOOL_STRINGS)
                has = ~np.isnan(booleans)
                num[has] = booleans[has]
            ok = np.isfinite(num)
            if self.valid_values is not None:
                allowed = np.array([v for v in self.valid_values if isinstance(v, float)], dtype=float)
                ok &= np.isin(num, allowed)
            if self.rescale is not None:
                lo, hi = self.rescale
                ok &= (num >= lo) & (num <= hi)
                scaled[ok] = (num[ok] - lo) / (hi - lo)
            else:
                scaled[ok] = num[ok]
        scaled[missing] = np.nan
        return scaled, raw_num, missing, raw_str


def _fmt_key(k):
    if isinstance(k, float) and k.is_integer():
        return int(k)
    return k


def _parse_one(v: Any) -> tuple[float, Any, bool]:
    if v is None:
        return np.nan, None, True
    if isinstance(v, (bool, np.bool_)):
        # Not a number: JSON's true/false is a binary answer, read as the strings "true"/"false" are,
        # so a rating scale (binarize, rescale) counts it invalid instead of taking it as 1/0.
        return np.nan, str(bool(v)).lower(), False
    if isinstance(v, (int, float, np.integer, np.floating)):
        f = float(v)
        return f, (None if f != f else str(v).lower()), f != f
    text = str(v).strip()
    low = text.lower()
    if low in _NA_STRINGS:
        return np.nan, None, True
    try:
        return float(text.replace("_", "#")), low, False  # no "1_0" = 10
    except ValueError:
        return np.nan, low, False


def _parse_raw(values: Any) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """``(number, normalised string, missing)`` per value; strings are stripped and lower-cased."""
    arr = as_array(values)
    if arr.ndim != 1:
        arr = arr.reshape(-1)
    if arr.dtype.kind in "biuf":
        num = arr.astype(np.float64)
        return num, None, np.isnan(num)
    n = arr.shape[0]
    if n <= SMALL:
        cache: dict = {}
        num = np.empty(n)
        strs = np.empty(n, dtype=object)
        missing = np.empty(n, dtype=bool)
        for i, v in enumerate(arr.tolist()):
            try:
                # A bool's key would be its number's (True == 1): the tuple keeps them apart.
                r = cache[(v, v.__class__ is bool)]
            except KeyError:
                r = _parse_one(v)
                try:
                    cache[(v, v.__class__ is bool)] = r
                except TypeError:  # unhashable (dict/list from JSON): not a label value
                    r = (np.nan, str(v), False)
            except TypeError:
                r = (np.nan, str(v), False)
            num[i], strs[i], missing[i] = r
        return num, strs, missing
    pd = pandas()
    s = pd.Series(arr, dtype=object)
    isna = s.isna().to_numpy()
    num = np.array(pd.to_numeric(s, errors="coerce").to_numpy(dtype=float, na_value=np.nan), dtype=float)
    low = s.astype(str).str.strip().str.lower()
    num[low.isin(("true", "false")).to_numpy()] = np.nan  # JSON booleans, as in _parse_one
    missing = isna | low.isin(_NA_STRINGS).to_numpy()
    strs_arr = np.array(low.to_numpy(dtype=object), dtype=object)
    strs_arr[missing] = None
    num[missing] = np.nan
    return num, strs_arr, missing


def _factorize(values: Any, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes (int64) and sorted uniques; ValueError naming ``name`` for missing ids."""
    arr = as_array(values)
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-d sequence, got shape {arr.shape}")
    if arr.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            raise ValueError(f"{name}: missing id at position {int(bad[0])}")
        if np.all(arr == np.floor(arr)):
            arr = arr.astype(np.int64)
    if arr.dtype.kind == "O":
        if arr.size <= SMALL:
            isna = np.fromiter(
                (v is None or (isinstance(v, float) and v != v) for v in arr.tolist()), dtype=bool, count=arr.size
            )
        else:
            isna = pandas().isna(arr)
        if isna.any():
            raise ValueError(f"{name}: missing id at position {int(np.flatnonzero(isna)[0])}")
    return factorize(arr)


def _per_prompt(values: Any, prompt_codes: np.ndarray, prompt_ids: np.ndarray, scale: ValueScale, name: str):
    """Per-prompt scaled values from a mapping ``{prompt: value}`` or a per-label array (repeated)."""
    m = len(prompt_ids)
    if isinstance(values, Mapping) or is_series(values):
        if is_series(values):
            keys, vals = values.index.tolist(), values.tolist()
            if len(set(keys)) != len(keys):
                dup = next(k for i, k in enumerate(keys) if k in keys[:i])
                raise ValueError(f"{name}: prompt {dup!r} is given more than once")
        else:
            keys, vals = list(values.keys()), list(values.values())
        pos = positions(prompt_ids, keys)
        keep = pos >= 0
        arr = np.empty(len(vals), dtype=object)
        arr[:] = vals
        scaled, _, missing, _ = scale.apply(arr[keep])
        out = np.full(m, np.nan)
        out[pos[keep]] = scaled
        n_invalid = int((np.isnan(scaled) & ~missing).sum())
        return out, n_invalid
    scaled, _, missing, _ = scale.apply(values)
    if scaled.shape[0] != prompt_codes.shape[0]:
        raise ValueError(f"{name}: expected one value per label ({prompt_codes.shape[0]}), got {scaled.shape[0]}")
    out = np.full(m, np.nan)
    has = ~np.isnan(scaled)
    n_invalid = int((~has & ~missing).sum())
    if has.any():
        p = prompt_codes[has]
        u = scaled[has]
        order = np.argsort(p, kind="stable")
        p, u = p[order], u[order]
        first = np.r_[True, p[1:] != p[:-1]]
        starts = np.flatnonzero(first)
        firsts = u[starts]
        conflict = u != np.repeat(firsts, np.diff(np.r_[starts, len(u)]))
        if conflict.any():
            j = int(p[np.flatnonzero(conflict)[0]])
            raise ValueError(f"{name}: prompt {prompt_ids[j]!r} has conflicting values")
        out[p[starts]] = firsts
    return out, n_invalid


# ------------------------------------------------------------------ steps of LabelMatrix.from_triples
def _parse_triples(workers: Any, prompts: Any, values: Any, scale: ValueScale, *, group: Any, created_at: Any):
    """``((worker codes, ids), (prompt codes, ids), scale.apply(values), extras)`` for every input row.

    ``extras`` holds the per-label ``group`` and ``created_at`` given. ValueError naming the argument
    whose length differs from the worker ids'.
    """
    w_all, w_ids = _factorize(workers, "workers")
    p_all, p_ids = _factorize(prompts, "prompts")
    n_in = w_all.shape[0]
    if p_all.shape[0] != n_in:
        raise ValueError(f"prompts: expected {n_in} ids (one per worker id), got {p_all.shape[0]}")
    applied = scale.apply(values)
    if applied[0].shape[0] != n_in:
        raise ValueError(f"values: expected {n_in} values (one per worker id), got {applied[0].shape[0]}")
    extras = {}
    for name, arr in (("group", group), ("created_at", created_at)):
        if arr is not None:
            a = as_array(arr)
            if a.shape[0] != n_in:
                raise ValueError(f"{name}: expected {n_in} entries, got {a.shape[0]}")
            extras[name] = a
    return (w_all, w_ids), (p_all, p_ids), applied, extras


def _duplicate_mask(
    w_all: np.ndarray, p_all: np.ndarray, w_ids: np.ndarray, p_ids: np.ndarray, duplicates: str
) -> np.ndarray:
    """Which input rows to keep under the ``duplicates`` policy; DuplicateLabelError for ``"error"``."""
    n_in = w_all.shape[0]
    keep = np.ones(n_in, dtype=bool)
    if not n_in or duplicates == "unchecked":
        return keep
    key = p_all * np.int64(len(w_ids)) + w_all
    first_dup = None
    # a stable argsort: fast (run-adaptive) when labels come grouped by prompt, as exports
    # and database queries usually give them; O(L log L) otherwise
    order = np.argsort(key, kind="stable")
    sk = key[order]
    same = sk[1:] == sk[:-1]
    if same.any():
        d = int(np.flatnonzero(same)[0])
        first_dup = tuple(sorted((int(order[d]), int(order[d + 1]))))
        # runs of equal keys in input order (stable sort): keep the first or the last
        if duplicates == "first":
            keep[order[1:][same]] = False
        elif duplicates == "last":
            keep[order[:-1][same]] = False
    del order, sk, same, key
    if first_dup is not None and duplicates == "error":
        i, j = first_dup
        wid, pid = w_ids[w_all[i]], p_ids[p_all[i]]
        raise DuplicateLabelError(
            f"duplicate label: worker {wid!r} labeled prompt {pid!r} more than once (rows {i} and {j})",
            (i, j),
            wid,
            pid,
        )
    return keep


def _raw_of_valid(
    raw_num: np.ndarray, raw_str: np.ndarray | None, scaled: np.ndarray, valid: np.ndarray, take: slice | np.ndarray
) -> tuple[np.ndarray, np.ndarray | None]:
    """``(raw, raw_levels)`` of the valid labels: numbers, or codes into ``raw_levels`` for categories."""
    if raw_str is not None and np.isnan(raw_num[valid]).any():
        levels, raw_codes = np.unique(raw_str[valid].astype(str), return_inverse=True)
        return raw_codes.astype(np.float64), levels.astype(object)
    raw_valid = raw_num[take]
    if raw_str is not None:  # true/false strings: their numeric reading
        nanraw = np.isnan(raw_valid)
        if nanraw.any():
            raw_valid = raw_valid.copy()
            raw_valid[nanraw] = scaled[take][nanraw]
    return raw_valid, None


def _drop_unused(codes: np.ndarray, ids: np.ndarray):
    """``(new codes, used ids, labels per used id, used mask, old → new code)``: ids without a label go."""
    cnt = np.bincount(codes, minlength=len(ids))
    used = cnt > 0
    new_of = np.cumsum(used) - 1
    return (new_of[codes] if not used.all() else codes), ids[used], cnt[used], used, new_of


def _gold_per_prompt(
    gold: Any,
    keep: np.ndarray,
    p_all: np.ndarray,
    p_used: np.ndarray,
    p_map: np.ndarray,
    prompt: np.ndarray,
    prompt_ids: np.ndarray,
    scale: ValueScale,
) -> tuple[np.ndarray, int]:
    """``(gold per prompt as a scaled value, n_gold_invalid)`` from a mapping or a per-label sequence."""
    if gold is None:
        return np.full(len(prompt_ids), np.nan), 0
    if isinstance(gold, Mapping) or is_series(gold):
        return _per_prompt(gold, prompt, prompt_ids, scale, "gold")
    g = as_array(gold)
    n_in = p_all.shape[0]
    if g.shape[0] != n_in:
        raise ValueError(f"gold: expected a mapping per prompt or {n_in} per-label values, got {g.shape[0]}")
    # per-label gold: every input row counts (even invalid labels carry the prompt's gold)
    rows = keep & p_used[p_all]
    return _per_prompt(g[rows], p_map[p_all[rows]], prompt_ids, scale, "gold")


@dataclass(frozen=True, eq=False)
class LabelMatrix:
    """A sparse worker × prompt label matrix in COO form (one entry per valid label).

    Build it with :meth:`from_triples`, :meth:`from_frame`, or :func:`audits.engine.label_files.read_labels`.

    Attributes
    ----------
    worker_ids, prompt_ids : ndarray
        The distinct worker and prompt ids (sorted when orderable); codes index into them.
    worker, prompt : ndarray of intp, shape (n_labels,)
        Worker and prompt code of each label.
    value : ndarray of float64, shape (n_labels,)
        Scaled value of each label (after binarization/rescaling).
    raw : ndarray of float64, shape (n_labels,)
        Raw value of each label; when the raw values are not numbers, codes into ``raw_levels``.
    raw_levels : ndarray or None
        The raw categories (strings) when ``raw`` holds codes.
    gold : ndarray of float64, shape (n_prompts,)
        Gold label per prompt as a scaled value, NaN where there is none.
    n_missing, n_invalid : int
        Input rows dropped because the value was missing / outside the schema.
    n_gold_invalid : int
        Gold values outside the schema (treated as no gold).
    scale : ValueScale
        The value rule used (binarization map, rescale range, schema).
    group : ndarray or None
        Optional per-label group (as given).
    created_at : ndarray or None
        Optional per-label timestamp (as given).
    source : str or None
        What the matrix was read from (file name, campaign), for the report.
    """

    worker_ids: np.ndarray
    prompt_ids: np.ndarray
    worker: np.ndarray
    prompt: np.ndarray
    value: np.ndarray
    raw: np.ndarray
    gold: np.ndarray
    raw_levels: np.ndarray | None = None
    n_missing: int = 0
    n_invalid: int = 0
    n_gold_invalid: int = 0
    scale: ValueScale = field(default_factory=ValueScale)
    group: np.ndarray | None = None
    created_at: np.ndarray | None = None
    source: str | None = None

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_triples(
        cls,
        workers: Any,
        prompts: Any,
        values: Any,
        *,
        gold: Any = None,
        binarize: Mapping | str | None = None,
        rescale: tuple[float, float] | None = None,
        valid_values: Any = None,
        group: Any = None,
        created_at: Any = None,
        duplicates: str = "error",
        source: str | None = None,
    ) -> LabelMatrix:
        """Build a matrix from parallel sequences of (worker, prompt, value).

        Parameters
        ----------
        workers : sequence of str or int, length L
            Worker id of each label (any hashable ids: strings or ints; no missing ids).
        prompts : sequence of str or int, length L
            Prompt id of each label.
        values : sequence, length L
            Raw value of each label: numbers, numeric strings, ``true``/``false``, or categories named
            in ``binarize``. ``None``/NaN/empty = missing (counted in ``n_missing``); values outside
            the schema are counted in ``n_invalid``. Neither is audited.
        gold : mapping {prompt id: raw gold}, pandas Series indexed by prompt, or sequence of length L
            Optional putative label per prompt, in the *raw* domain (it goes through the same
            ``binarize``/``rescale``). A per-label sequence must agree within each prompt.
        binarize : mapping or str, optional
            Raw → scaled value map, e.g. ``{1: 0, 2: 0, 3: 1, 4: 1}`` or ``"1:0,2:0,3:1,4:1"``. Raw values
            outside the map are invalid.
        rescale : (lo, hi), optional
            Linear map of ``[lo, hi]`` onto ``[0, 1]`` (for continuous ratings); outside = invalid.
        valid_values : sequence, optional
            Allowed raw values when neither ``binarize`` nor ``rescale`` is given.
        group, created_at : sequence of length L, optional
            Kept per label (as given) for metadata.
        duplicates : {"error", "first", "last", "unchecked"}
            What to do when a worker labels the same prompt twice: raise :class:`DuplicateLabelError`
            (default), or keep the first / last occurrence. ``"unchecked"`` skips the check (one
            hash pass) when the caller guarantees uniqueness, e.g. a database unique constraint;
            duplicates would then be audited as separate labels.
        source : str, optional
            Free text stored for the report (file name, campaign).

        Returns
        -------
        LabelMatrix

        Raises
        ------
        ValueError
            naming the argument: lengths differ, a missing worker/prompt id, an unknown
            ``duplicates`` policy, a bad ``binarize``/``rescale``; :class:`DuplicateLabelError` for
            duplicate (worker, prompt) pairs.

        Notes
        -----
        Cost is O(L log L) (one sort for the duplicate check) with no Python loop per label;
        ids are coded with ``np.unique`` (``pd.factorize`` above 200k labels). The sufficient
        statistics every audit starts from (:attr:`stats`) are accumulated here, while the labels
        are at hand, so audits of the matrix do not pass over the labels again.

        Examples
        --------
        >>> m = LabelMatrix.from_triples(["a", "a", "b"], [1, 2, 1], [4, 1, 3],
        ...                              binarize={1: 0, 2: 0, 3: 1, 4: 1})
        >>> m.n_workers, m.n_prompts, m.n_labels, m.value.tolist()
        (2, 2, 3, [1.0, 0.0, 1.0])
        """
        if duplicates not in ("error", "first", "last", "unchecked"):
            raise ValueError(f"duplicates: expected 'error', 'first', 'last' or 'unchecked', got {duplicates!r}")
        scale = ValueScale(binarize=binarize, rescale=rescale, valid_values=valid_values)
        (w_all, w_ids), (p_all, p_ids), (scaled, raw_num, missing, raw_str), extras = _parse_triples(
            workers, prompts, values, scale, group=group, created_at=created_at
        )
        keep = _duplicate_mask(w_all, p_all, w_ids, p_ids, duplicates)

        # a missing or invalid value is counted, and its label dropped
        isnan = np.isnan(scaled)
        valid = keep & ~isnan
        n_missing = int((keep & missing).sum())
        n_invalid = int((keep & ~missing & isnan).sum())
        take = slice(None) if bool(valid.all()) else valid
        raw_valid, raw_levels = _raw_of_valid(raw_num, raw_str, scaled, valid, take)

        # re-code so that only workers/prompts with a valid label remain
        worker, worker_ids, w_cnt, _, _ = _drop_unused(w_all[take], w_ids)
        prompt, prompt_ids, p_cnt, p_used, p_map = _drop_unused(p_all[take], p_ids)
        gold_arr, n_gold_invalid = _gold_per_prompt(gold, keep, p_all, p_used, p_map, prompt, prompt_ids, scale)

        matrix = cls(
            worker_ids=worker_ids,
            prompt_ids=prompt_ids,
            worker=np.ascontiguousarray(worker, dtype=np.intp),
            prompt=np.ascontiguousarray(prompt, dtype=np.intp),
            value=np.ascontiguousarray(scaled[take]),
            raw=np.ascontiguousarray(raw_valid),
            raw_levels=raw_levels,
            gold=gold_arr,
            n_missing=n_missing,
            n_invalid=n_invalid,
            n_gold_invalid=n_gold_invalid,
            scale=scale,
            group=None if "group" not in extras else extras["group"][take],
            created_at=None if "created_at" not in extras else extras["created_at"][take],
            source=source,
        )
        # the counts are known already: prime the cached properties
        matrix.__dict__["worker_counts"] = w_cnt
        matrix.__dict__["prompt_counts"] = p_cnt
        matrix.stats  # noqa: B018  (computed and cached now: see Notes)
        return matrix

    @classmethod
    def from_frame(
        cls,
        frame: Any,
        *,
        worker: str = "worker",
        prompt: str = "prompt",
        value: str = "value",
        gold: Any = "gold",
        group: str | None = "group",
        created_at: str | None = "created_at",
        **kwargs: Any,
    ) -> LabelMatrix:
        """Build a matrix from a long DataFrame (one row per label; crowd-kit's long format).

        Column names are parameters; ``gold``, ``group`` and ``created_at`` are used when the frame has
        them (``gold`` may also be a mapping/Series per prompt). Other columns are ignored. Keyword
        arguments go to :meth:`from_triples`.
        """
        for name, col in (("worker", worker), ("prompt", prompt), ("value", value)):
            if col not in frame.columns:
                raise ValueError(f"{name}: column {col!r} not in the frame (columns: {list(frame.columns)})")
        if isinstance(gold, str):
            gold_arg = frame[gold] if gold in frame.columns else None
        else:
            gold_arg = gold
        return cls.from_triples(
            frame[worker],
            frame[prompt],
            frame[value],
            gold=gold_arg,
            group=frame[group] if group and group in frame.columns else None,
            created_at=frame[created_at] if created_at and created_at in frame.columns else None,
            **kwargs,
        )

    # ------------------------------------------------------------------ sizes and cached views
    @property
    def n_workers(self) -> int:
        return int(self.worker_ids.shape[0])

    @property
    def n_prompts(self) -> int:
        return int(self.prompt_ids.shape[0])

    @property
    def n_labels(self) -> int:
        return int(self.value.shape[0])

    @cached_property
    def worker_counts(self) -> np.ndarray:
        """Labels per worker (int64, length n_workers)."""
        return np.bincount(self.worker, minlength=self.n_workers)

    @cached_property
    def prompt_counts(self) -> np.ndarray:
        """Labels per prompt (int64, length n_prompts)."""
        return np.bincount(self.prompt, minlength=self.n_prompts)

    @cached_property
    def value_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """``(levels, codes)``: the distinct scaled values (sorted) and each label's index into them."""
        v = self.value
        if v.size and np.all((v == 0.0) | (v == 1.0)):
            codes = v.astype(np.int32)
            return np.array([0.0, 1.0]), codes
        levels, codes = np.unique(v, return_inverse=True)
        return levels, codes.astype(np.int32)

    @property
    def has_gold(self) -> bool:
        return bool(np.isfinite(self.gold).any())

    @cached_property
    def stats(self):
        """The matrix's :class:`~audits.engine.noise.SufficientStats` (one O(L) pass: at build by
        :meth:`from_triples`, on first use for a sub-matrix from :meth:`take`)."""
        return SufficientStats.from_matrix(self)

    @cached_property
    def prompt_states(self):
        """``stats.compressed()``: identical prompt statistics merged (cached)."""
        return self.stats.compressed()

    @cached_property
    def prompt_sorted(self) -> bool:
        """True when the labels are stored grouped by prompt in prompt-code order."""
        p = self.prompt
        return bool(p.size == 0 or np.all(p[1:] >= p[:-1]))

    @property
    def prompt_starts(self) -> np.ndarray:
        """Offset of each prompt's first label (meaningful when ``prompt_sorted``)."""
        c = self.prompt_counts
        return np.r_[0, np.cumsum(c)[:-1]] if c.size else np.zeros(0, np.int64)

    @cached_property
    def is_binary(self) -> bool:
        """True when every scaled value is 0 or 1."""
        v = self.value
        return bool(np.all((v == 0.0) | (v == 1.0)))

    # ------------------------------------------------------------------ sub-matrices
    def take(self, mask: np.ndarray) -> LabelMatrix:
        """The matrix of the labels selected by a boolean mask (length n_labels).

        Workers and prompts left without labels drop out (they are not part of the matrix);
        gold and invalid/missing counts carry over.
        """
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != (self.n_labels,):
            raise ValueError(f"mask: expected shape ({self.n_labels},), got {mask.shape}")
        w, p = self.worker[mask], self.prompt[mask]
        w_used = np.bincount(w, minlength=self.n_workers) > 0
        p_used = np.bincount(p, minlength=self.n_prompts) > 0
        w_map = np.cumsum(w_used) - 1
        p_map = np.cumsum(p_used) - 1
        return LabelMatrix(
            worker_ids=self.worker_ids[w_used],
            prompt_ids=self.prompt_ids[p_used],
            worker=w_map[w],
            prompt=p_map[p],
            value=self.value[mask],
            raw=self.raw[mask],
            raw_levels=self.raw_levels,
            gold=self.gold[p_used],
            n_missing=self.n_missing,
            n_invalid=self.n_invalid,
            n_gold_invalid=self.n_gold_invalid,
            scale=self.scale,
            group=None if self.group is None else self.group[mask],
            created_at=None if self.created_at is None else self.created_at[mask],
            source=self.source,
        )

    def select_workers(self, keep: np.ndarray) -> LabelMatrix:
        """The matrix restricted to the workers where ``keep`` (boolean, length n_workers) is true."""
        keep = np.asarray(keep, dtype=bool)
        if keep.shape != (self.n_workers,):
            raise ValueError(f"keep: expected shape ({self.n_workers},), got {keep.shape}")
        return self.take(keep[self.worker])

    def transform(self, values: Any) -> np.ndarray:
        """Map raw values (e.g. a system's predictions) to scaled values with this matrix's rule."""
        return self.scale.apply(values)[0]

    def to_frame(self):
        """The labels as a long DataFrame (worker, prompt, value, raw, gold)."""
        raw = self.raw if self.raw_levels is None else self.raw_levels[self.raw.astype(np.int64)]
        return pandas().DataFrame(
            {
                "worker": self.worker_ids[self.worker],
                "prompt": self.prompt_ids[self.prompt],
                "value": self.value,
                "raw": raw,
                "gold": self.gold[self.prompt],
            }
        )

    def __repr__(self) -> str:
        return (
            f"LabelMatrix(n_workers={self.n_workers}, n_prompts={self.n_prompts}, "
            f"n_labels={self.n_labels}, n_invalid={self.n_invalid}, n_missing={self.n_missing})"
        )
