"""Confidence intervals on the six noise numbers by a crossed bootstrap (``noise-audit.md``,
"Further stable keys": ``intervals``).

Workers and prompts are both samples (of a crowd, of a population of items), and a label depends on
both, so neither resampling alone gives the numbers' sampling spread. Each resample draws the n
workers and, independently, the m prompts with replacement (the crossed design of McCullagh 2000,
Bernoulli 6:285, and Owen 2007, Annals of Applied Statistics 1:465), and recomputes each number over
the units it is an SD over, each unit keeping its own labels whole:

- level noise: the SD of the drawn workers' means (each worker's mean over all its labels);
- pattern noise (original, modified): the SD of the drawn prompts' means, of their SDs;
- system noise (original): the flat SD with label (i, j) counted ``w_i·v_j`` times (the product
  weights of the pigeonhole bootstrap); the residual and ``SN_mod`` follow from these four.

Why not the plain pigeonhole bootstrap (label (i, j) counted ``w_i·v_j`` times in every number): a
worker drawn twice becomes two workers who give every prompt the same label, so a prompt with k
labels has fewer independent ones, its mean and SD scatter more, and pattern noise and the residual
shift. On simulated crowds with 5 labels per prompt its percentile intervals covered the true
pattern noise in 1–9 % of datasets, against 89–98 % for all six numbers here
(``tests/audits/test_intervals.py``).

Each resample is a pair of multiplicity vectors, so a resample's numbers are weighted SDs of fixed
per-unit statistics and one sparse product for the flat SD, computed for a block of resamples at
once with matrix products, with no loop over labels.

Krippendorff's α gets the same crossed resamples (:func:`alpha_interval`): resample b draws the same
workers and prompts for α as for the six numbers, so the intervals on an instrument card describe
one set of resampled crowds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from audits.engine._util import check_ddof, combine_noise, var_from_sums
from audits.engine.agreement import ALPHA_LEVELS, value_count_table
from audits.engine.noise import NOISE_KEYS

__all__ = ["AlphaInterval", "NoiseIntervals", "alpha_interval", "noise_intervals", "BOOTSTRAP_METHOD", "ALPHA_METHOD"]

BOOTSTRAP_METHOD = (
    "two-way (crossed) bootstrap: workers and prompts resampled independently, each number recomputed over "
    "the resampled units it is an SD over (their labels kept whole), percentile intervals"
)

ALPHA_METHOD = (
    "two-way (crossed) bootstrap of Krippendorff's alpha: workers and prompts resampled independently, each "
    "drawn prompt a unit with its drawn workers' labels (a worker drawn twice counts twice but is never "
    "paired with itself), percentile intervals"
)

#: resamples per block: bounds the dense (block × workers) and (block × prompts) arrays to ~4M cells
_CELLS_PER_BLOCK = 4_000_000

#: ``progress(done)`` is told how many resamples are finished after each block
Progress = Callable[[int], None]


def _check(n_resamples, level) -> int:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"n_resamples: expected a positive integer, got {n_resamples!r}")
    if not 0 < level < 1:
        raise ValueError(f"level: expected a number in (0, 1), got {level!r}")
    return int(n_resamples)


def _blocks(n_resamples: int, seed, cells_per_resample: int, block_size: int | None) -> Iterator[tuple[int, int, list]]:
    """``(start, stop, generators)`` per block of resamples; resample b always draws from
    ``SeedSequence(seed).spawn(B)[b]``, so the blocking never changes the draws."""
    children = np.random.SeedSequence(seed).spawn(n_resamples)
    block = max(1, min(n_resamples, _CELLS_PER_BLOCK // max(cells_per_resample, 1), block_size or n_resamples))
    for start in range(0, n_resamples, block):
        stop = min(start + block, n_resamples)
        yield start, stop, [np.random.default_rng(s) for s in children[start:stop]]


def _percentile_bounds(draws: np.ndarray, n_resamples: int, level: float) -> tuple[tuple | None, int]:
    """Efron's percentile interval of the finite draws, None when fewer than half are finite."""
    d = draws[np.isfinite(draws)]
    alpha = 1 - level
    if d.size * 2 < n_resamples:
        return None, int(d.size)
    return tuple(float(q) for q in np.quantile(d, [alpha / 2, 1 - alpha / 2])), int(d.size)


@dataclass(frozen=True)
class NoiseIntervals:
    """Percentile intervals of the six numbers over crossed-bootstrap resamples.

    Attributes
    ----------
    bounds : dict {noise key: (lo, hi)}
        None where fewer than half the resamples define the number.
    n_defined : dict {noise key: int}
        Resamples in which the number was defined (an SD needs two values; ``system_noise_mod`` is
        undefined when its square is negative).
    """

    n_resamples: int
    level: float
    seed: int | None
    bounds: dict
    n_defined: dict
    ddof: int

    def to_dict(self) -> dict:
        out: dict = {"method": BOOTSTRAP_METHOD, "level": self.level, "n_resamples": self.n_resamples}
        out.update({k: None if v is None else [float(v[0]), float(v[1])] for k, v in self.bounds.items()})
        out["seed"] = self.seed
        out["sd"] = "sample" if self.ddof == 1 else "population"
        out["n_defined"] = dict(self.n_defined)
        return out


def _multiplicities(rngs: list, size: int) -> np.ndarray:
    """One row per generator: how often each of ``size`` units is drawn in ``size`` draws."""
    out = np.zeros((len(rngs), size))
    for r, rng in enumerate(rngs):
        out[r] = np.bincount(rng.integers(0, size, size), minlength=size)
    return out


def _weighted_sd(w: np.ndarray, x: np.ndarray, ddof: int) -> np.ndarray:
    """Per row of ``w``: the SD of ``x`` with frequency weights ``w`` (NaN where ``Σw <= ddof``)."""
    if x.size == 0:
        return np.full(w.shape[0], np.nan)
    d = x - x[0]  # shifted by a member, so identical values give exactly 0
    n = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (w @ d) / n
        ss = np.einsum("bi,bi->b", w, (d[None, :] - mean[:, None]) ** 2)
        return np.sqrt(np.where(n > ddof, ss / (n - ddof), np.nan))


def noise_intervals(
    matrix,
    *,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int | None = 0,
    ddof: int = 1,
    progress: Progress | None = None,
    block_size: int | None = None,
) -> NoiseIntervals:
    """Crossed-bootstrap percentile intervals of level, pattern and system noise and the residual.

    Parameters
    ----------
    matrix : LabelMatrix
    n_resamples : int
        Bootstrap resamples (B).
    level : float
        Confidence level; the interval is the ``(1 − level)/2`` and ``(1 + level)/2`` quantiles of
        the resampled values (Efron's percentile interval).
    seed : int or None
        Resample b draws from ``numpy.random.SeedSequence(seed).spawn(B)[b]``, so the same seed gives
        the same intervals however the resamples are blocked.
    ddof : {1, 0}
        SD convention of the numbers.
    progress : callable, optional
        Called with the number of finished resamples after each block.
    block_size : int, optional
        Most resamples per block (default: as many as ~4M cells allow); smaller blocks report
        progress more often and change nothing else.

    Returns
    -------
    NoiseIntervals

    Notes
    -----
    A resample draws n workers from the n with replacement and, independently, m prompts from the m
    (multiplicities ``w``, ``v``). Level noise is the ``w``-weighted SD of the workers' means,
    pattern noise the ``v``-weighted SDs of the prompts' means and SDs (prompts with an SD), system
    noise the flat SD with label (i, j) weighted ``w_i·v_j``; a drawn copy counts as a unit of its
    own, as the SD's ``ddof`` sees it. Resamples in which a number is undefined are left out of its
    quantiles (``n_defined`` says how many remain); with fewer than half defined the interval is
    None. Cost: O(B·(L + n + m)) for L labels, in blocks.

    Examples
    --------
    >>> from audits.engine.matrix import LabelMatrix
    >>> m = LabelMatrix.from_triples(list("abcabcabc"), [1, 1, 1, 2, 2, 2, 3, 3, 3], [1, 1, 0, 0, 0, 1, 1, 1, 1])
    >>> iv = noise_intervals(m, n_resamples=200, seed=1)
    >>> lo, hi = iv.bounds["system_noise_orig"]
    >>> 0 <= lo <= hi
    True
    """
    from scipy import sparse  # imported here: few reports ask for intervals

    ddof = check_ddof(ddof)
    n_resamples = _check(n_resamples, level)
    n, m = matrix.n_workers, matrix.n_prompts
    x = matrix.value
    st = matrix.stats
    w_mean = st.worker_sum / st.worker_count
    p_count, p_sum, p_sumsq = st.prompt_count, st.prompt_sum, st.prompt_sumsq
    p_mean = p_sum / p_count
    p_var = var_from_sums(p_count, p_sum, p_sumsq, ddof)
    has_sd = ~np.isnan(p_var)
    p_sd = np.sqrt(p_var[has_sd])
    # label (i, j) enters the flat SD with weight w_i·v_j: per resample, w·(A v) for A = 1, x, x²
    cells = [sparse.csr_matrix((c, (matrix.worker, matrix.prompt)), shape=(n, m)) for c in (np.ones(x.size), x, x * x)]
    draws = {key: np.empty(n_resamples) for key in NOISE_KEYS}
    for start, stop, rngs in _blocks(n_resamples, seed, n + m, block_size):
        w = _multiplicities(rngs, n)  # resamples × workers, drawn first from each resample's generator
        v = _multiplicities(rngs, m)  # resamples × prompts
        ln = _weighted_sd(w, w_mean, ddof)
        pn_orig = _weighted_sd(v, p_mean, ddof)
        pn_mod = _weighted_sd(v[:, has_sd], p_sd, ddof)
        big_n, big_s, big_q = (np.einsum("bi,ib->b", w, c @ v.T) for c in cells)
        sn = np.sqrt(var_from_sums(big_n, big_s, big_q, ddof))
        out = combine_noise(ln, pn_orig, pn_mod, sn)
        for key in NOISE_KEYS:
            draws[key][start:stop] = out[key]
        if progress is not None:
            progress(stop)
    bounds, n_defined = {}, {}
    for key in NOISE_KEYS:
        bounds[key], n_defined[key] = _percentile_bounds(draws[key], n_resamples, level)
    return NoiseIntervals(n_resamples, float(level), seed, bounds, n_defined, ddof)


# ---------------------------------------------------------------------------------- Krippendorff's alpha
@dataclass(frozen=True)
class AlphaInterval:
    """Percentile interval of Krippendorff's α over crossed-bootstrap resamples.

    ``estimate`` is α of the labels themselves (every multiplicity 1: Krippendorff's α exactly);
    ``bounds`` is None (with ``reason``) when fewer than half the resamples define α.
    """

    alpha_level: str
    estimate: float | None
    bounds: tuple | None
    n_resamples: int
    level: float
    seed: int | None
    n_defined: int
    reason: str | None = None

    def to_dict(self) -> dict:
        return {
            "method": ALPHA_METHOD,
            "alpha_level": self.alpha_level,
            "estimate": self.estimate,
            "interval": None if self.bounds is None else [float(self.bounds[0]), float(self.bounds[1])],
            "level": self.level,
            "n_resamples": self.n_resamples,
            "seed": self.seed,
            "n_defined": self.n_defined,
            "reason": self.reason,
        }


def _distances(cats: np.ndarray, alpha_level: str, n_v: np.ndarray) -> np.ndarray:
    """Krippendorff's squared distances δ²_ck between the categories (Krippendorff 2011, "Computing
    Krippendorff's Alpha-Reliability", §4): per resample (leading axis of ``n_v``, the pairable
    values per category) for the ordinal metric, which depends on them; shared otherwise."""
    c = cats.astype(np.float64)
    if alpha_level == "nominal":
        return 1.0 - np.eye(c.size)
    if alpha_level == "interval":
        return (c[:, None] - c[None, :]) ** 2
    if alpha_level == "ratio":
        total = c[:, None] + c[None, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(total != 0, ((c[:, None] - c[None, :]) / total) ** 2, 0.0)
    # ordinal: (Σ_{g=c..k} n_g − (n_c + n_k)/2)², from the cumulative counts
    cum = np.cumsum(n_v, axis=-1)
    lo, hi = (
        np.minimum.outer(np.arange(c.size), np.arange(c.size)),
        np.maximum.outer(np.arange(c.size), np.arange(c.size)),
    )
    between = cum[..., hi] - cum[..., lo] + n_v[..., lo]
    return (between - (n_v[..., :, None] + n_v[..., None, :]) / 2) ** 2


def _alpha_draws(
    w: np.ndarray, v: np.ndarray, worker: np.ndarray, prompt: np.ndarray, code: np.ndarray, cats, alpha_level
) -> np.ndarray:
    """α for each resample of a block (rows of ``w``: worker multiplicities, of ``v``: prompt ones).

    Within a drawn prompt, label (i, j) counts ``w_i`` times; a unit's pairable values number
    ``m_u = Σ w_i`` and its pairs of values from different workers ``P_u = m_u² − Σ w_i²`` (copies of
    one worker are never paired: that would add agreement nobody gave). Each pair is weighted
    ``m_u / P_u``, so every value's pairs weigh 1 in all, and with all multiplicities 1 this is
    Krippendorff's coincidence matrix (weight ``1/(m_u − 1)``). Then, over the units with ``P_u > 0``,
    each counted ``v_j`` times, ``α = 1 − (n − 1) Σ_u v_u (m_u/P_u) r_uᵀ Δ r_u / (Nᵀ Δ N)`` with
    ``r_u`` the unit's weighted category counts, ``N = Σ_u v_u r_u`` and ``n = Σ_c N_c``.
    """
    b, m, q = w.shape[0], v.shape[1], cats.size
    lw = w[:, worker]  # resamples × labels: each label's weight
    rows = np.arange(b)[:, None]
    r = np.bincount((rows * (m * q) + prompt * q + code).ravel(), weights=lw.ravel(), minlength=b * m * q)
    r = r.reshape(b, m, q)
    self_pairs = np.bincount((rows * m + prompt).ravel(), weights=(lw * lw).ravel(), minlength=b * m).reshape(b, m)
    m_u = r.sum(axis=2)
    pairs = m_u * m_u - self_pairs
    pairable = pairs > 0.5  # integer-valued: at least two distinct workers
    unit_w = np.where(pairable, v, 0.0)
    big_n = np.einsum("bu,buc->bc", unit_w, r)  # pairable values per category
    delta = _distances(cats, alpha_level, big_n)
    rd = r @ delta if delta.ndim == 2 else np.matmul(r, delta)
    quad = np.einsum("buc,buc->bu", rd, r)
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = np.sum(unit_w * np.where(pairable, m_u * quad / pairs, 0.0), axis=1)
        n = big_n.sum(axis=1)
        nd = big_n @ delta if delta.ndim == 2 else np.einsum("bc,bck->bk", big_n, delta)
        expected = np.einsum("bk,bk->b", nd, big_n)
        alpha = 1 - (n - 1) * observed / expected
    return np.where((expected > 0) & (n > 1), alpha, np.nan)


def alpha_interval(
    matrix,
    *,
    alpha_level: str = "nominal",
    values: str = "raw",
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int | None = 0,
    progress: Progress | None = None,
    block_size: int | None = None,
) -> AlphaInterval:
    """Crossed-bootstrap percentile interval of Krippendorff's α (:func:`audits.engine.agreement.krippendorff_alpha`).

    .. math:: \\alpha = 1 - \\frac{D_o}{D_e}

    recomputed on each resample: the n workers and, independently, the m prompts drawn with
    replacement (the crossed design of the six numbers' intervals, :func:`noise_intervals`, with the
    same draws for the same seed); within a drawn prompt a drawn worker's label counts as often as the
    worker was drawn, and copies of one worker are never paired with each other (see
    ``_alpha_draws``).

    Parameters
    ----------
    matrix : LabelMatrix
    alpha_level : {"nominal", "ordinal", "interval", "ratio"}
    values : {"raw", "scaled"}
    n_resamples, level, seed, progress, block_size
        As for :func:`noise_intervals`.

    Returns
    -------
    AlphaInterval
        ``estimate`` equals ``krippendorff_alpha(matrix, level=alpha_level, values=values).value``.

    Notes
    -----
    α is undefined (None, with the reason) in the cases :func:`krippendorff_alpha` names: one
    category, no prompt with two labels, an ordered level on categories without numbers. A resample
    in which every pairable value is the same defines no α and is left out of the quantiles. Cost:
    O(B·(L + m·q²)) for B resamples, L labels, m prompts and q categories, in blocks, with no loop
    over labels or resamples.

    Examples
    --------
    >>> from audits.engine.matrix import LabelMatrix
    >>> m = LabelMatrix.from_triples(list("abcabcabc"), [1, 1, 1, 2, 2, 2, 3, 3, 3], [1, 1, 0, 0, 0, 0, 1, 1, 1])
    >>> iv = alpha_interval(m, n_resamples=200, seed=1)
    >>> round(iv.estimate, 4), iv.bounds[0] <= iv.estimate <= iv.bounds[1]
    (0.6, True)
    """
    n_resamples = _check(n_resamples, level)
    if alpha_level not in ALPHA_LEVELS:
        raise ValueError(f"alpha_level: expected one of {ALPHA_LEVELS}, got {alpha_level!r}")

    def undefined(reason: str) -> AlphaInterval:
        return AlphaInterval(alpha_level, None, None, n_resamples, float(level), seed, 0, reason)

    if alpha_level != "nominal" and values == "raw" and matrix.raw_levels is not None:
        return undefined("raw labels are categories without numeric values: only nominal alpha applies")
    _, cats = value_count_table(matrix, values=values)
    if cats.size < 2:
        return undefined("only one distinct value: no disagreement to measure against")
    labels = matrix.raw if values == "raw" else matrix.value
    code = np.searchsorted(cats, labels)
    worker, prompt = matrix.worker, matrix.prompt
    n, m, q = matrix.n_workers, matrix.n_prompts, cats.size

    def draws_of(w, v):
        return _alpha_draws(w, v, worker, prompt, code, cats, alpha_level)

    estimate = float(draws_of(np.ones((1, n)), np.ones((1, m)))[0])
    if not np.isfinite(estimate):
        return undefined("no prompt has two or more labels, or every pairable label is the same")
    draws = np.empty(n_resamples)
    # a block holds (block × labels) weights and (block × prompts × categories) counts
    for start, stop, rngs in _blocks(n_resamples, seed, max(n + m, matrix.n_labels, m * q), block_size):
        w = _multiplicities(rngs, n)
        v = _multiplicities(rngs, m)
        draws[start:stop] = draws_of(w, v)
        if progress is not None:
            progress(stop)
    bounds, n_defined = _percentile_bounds(draws, n_resamples, level)
    reason = None if bounds is not None else "fewer than half the resamples define alpha"
    return AlphaInterval(alpha_level, estimate, bounds, n_resamples, float(level), seed, n_defined, reason)
