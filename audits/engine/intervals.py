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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from audits.engine._util import check_ddof, combine_noise, var_from_sums
from audits.engine.noise import NOISE_KEYS

__all__ = ["NoiseIntervals", "noise_intervals", "BOOTSTRAP_METHOD"]

BOOTSTRAP_METHOD = (
    "two-way (crossed) bootstrap: workers and prompts resampled independently, each number recomputed over "
    "the resampled units it is an SD over (their labels kept whole), percentile intervals"
)

#: resamples per block: bounds the dense (block × workers) and (block × prompts) arrays to ~4M cells
_CELLS_PER_BLOCK = 4_000_000


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
    matrix, *, n_resamples: int = 1000, level: float = 0.95, seed: int | None = 0, ddof: int = 1
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
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"n_resamples: expected a positive integer, got {n_resamples!r}")
    if not 0 < level < 1:
        raise ValueError(f"level: expected a number in (0, 1), got {level!r}")
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
    children = np.random.SeedSequence(seed).spawn(int(n_resamples))
    block = max(1, min(int(n_resamples), _CELLS_PER_BLOCK // max(n + m, 1)))
    draws = {key: np.empty(int(n_resamples)) for key in NOISE_KEYS}
    for start in range(0, int(n_resamples), block):
        stop = min(start + block, int(n_resamples))
        rngs = [np.random.default_rng(s) for s in children[start:stop]]
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
    alpha = 1 - level
    bounds, n_defined = {}, {}
    for key in NOISE_KEYS:
        d = draws[key][np.isfinite(draws[key])]
        n_defined[key] = int(d.size)
        bounds[key] = tuple(np.quantile(d, [alpha / 2, 1 - alpha / 2])) if d.size * 2 >= n_resamples else None
    return NoiseIntervals(int(n_resamples), float(level), seed, bounds, n_defined, ddof)
