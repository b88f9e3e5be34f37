"""The six numbers of a noise audit (``noise-audit.md``, "The six numbers").

Everything here is computed from *sufficient statistics*: per worker (count, sum, sum of squares),
per prompt (count, sum, sum of squares) and their totals. :func:`noise_audit` on a full matrix,
:func:`noise_from_stats` on statistics kept incrementally elsewhere (e.g. the database), the
per-worker audits of :func:`worker_noise` and the filter sweeps of :mod:`audits.engine.filters` all go
through one batched core, ``audits.engine._util.noise_core``, so there is one way to compute the numbers.

Definitions (Kejriwal et al. 2024, Eqs. 1-4; ``s_d`` is the SD with ``ddof`` d):

.. math::

    LN = s_d(\\{\\bar x_{i\\cdot}\\}_i),\\quad
    PN_{orig} = s_d(\\{\\bar x_{\\cdot j}\\}_j),\\quad
    PN_{mod} = s_d(\\{s_d(x_{\\cdot j})\\}_{j: c_j > d}),\\quad
    SN_{orig} = s_d(\\{x_{ij}\\}),

    residual = SN_{orig}^2 - LN^2 - PN_{orig}^2,\\quad
    SN_{mod} = \\sqrt{LN^2 + PN_{mod}^2 + residual}.

Pure numpy/scipy; no Django.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from audits.engine._util import check_ddof, floats, noise_core, py

__all__ = [
    "SufficientStats",
    "NoiseAudit",
    "WorkerNoise",
    "noise_from_stats",
    "noise_audit",
    "worker_noise",
    "ddof_from_sd",
    "NOISE_KEYS",
]

NOISE_KEYS = (
    "level_noise",
    "pattern_noise_orig",
    "pattern_noise_mod",
    "system_noise_orig",
    "system_noise_mod",
    "residual",
)


def ddof_from_sd(sd: str | int) -> int:
    """``"sample"`` → 1, ``"population"`` → 0 (an int 0/1 passes through).

    Raises ValueError naming ``sd`` otherwise.
    """
    if isinstance(sd, (int, np.integer)) and not isinstance(sd, bool) and int(sd) in (0, 1):
        return int(sd)
    if sd == "sample":
        return 1
    if sd == "population":
        return 0
    raise ValueError(f"sd: expected 'sample' or 'population', got {sd!r}")


def _reasons(vals: Mapping[str, float], counts: Mapping[str, float], ddof: int) -> dict[str, str]:
    """Why each undefined (NaN) number is undefined, in words."""
    need = ddof + 1
    conv = "sample" if ddof == 1 else "population"
    out: dict[str, str] = {}

    def few(n, what):
        return f"{int(n)} {what}; the {conv} SD needs at least {need}"

    if np.isnan(vals["level_noise"]):
        out["level_noise"] = few(counts["n_workers"], "worker(s)")
    if np.isnan(vals["pattern_noise_orig"]):
        out["pattern_noise_orig"] = few(counts["n_prompts"], "prompt(s)")
    if np.isnan(vals["pattern_noise_mod"]):
        out["pattern_noise_mod"] = few(counts["n_prompts_with_sd"], f"prompt(s) with a defined SD (≥ {need} labels)")
    if np.isnan(vals["system_noise_orig"]):
        out["system_noise_orig"] = few(counts["n_labels"], "label(s)")
    if np.isnan(vals["residual"]):
        missing = [k for k in ("system_noise_orig", "level_noise", "pattern_noise_orig") if k in out]
        out["residual"] = "needs " + ", ".join(missing) + ", undefined"
    if np.isnan(vals["system_noise_mod"]):
        missing = [k for k in ("level_noise", "pattern_noise_mod", "residual") if k in out]
        if missing:
            out["system_noise_mod"] = "needs " + ", ".join(missing) + ", undefined"
        else:
            out["system_noise_mod"] = (
                f"LN² + PN_mod² + residual = {vals['mod_sum']:.6g} is negative "
                "(possible with missing cells); its square root is undefined"
            )
    return out


def _none(x: float) -> float | None:
    return None if x is None or np.isnan(x) else float(x)


# --------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class NoiseAudit:
    """The six numbers of one audit (``noise-audit.md``), with counts and reasons.

    Undefined numbers are ``None`` and ``reasons[name]`` says why; they are never 0.

    Attributes
    ----------
    level_noise, pattern_noise_orig, pattern_noise_mod, system_noise_orig, system_noise_mod, residual
        The six numbers (``None`` when undefined).
    n_workers, n_prompts, n_labels : int
        Size of the matrix audited.
    n_prompts_with_sd : int
        Prompts that entered ``pattern_noise_mod`` (more than ``ddof`` labels).
    ddof : int
        1 for the sample SD (default), 0 for the population SD.
    reasons : dict
        ``{name: reason}`` for each undefined number.
    """

    level_noise: float | None
    pattern_noise_orig: float | None
    pattern_noise_mod: float | None
    system_noise_orig: float | None
    system_noise_mod: float | None
    residual: float | None
    n_workers: int
    n_prompts: int
    n_labels: int
    n_prompts_with_sd: int
    ddof: int = 1
    reasons: Mapping[str, str] = field(default_factory=dict)

    @property
    def sd(self) -> str:
        """``"sample"`` or ``"population"``."""
        return "sample" if self.ddof == 1 else "population"

    @property
    def system_noise_study(self) -> float | None:
        """The study scripts' "system noise", ``sqrt(LN² + PN_orig²) = sqrt(SN_orig² − residual)``."""
        if self.level_noise is None or self.pattern_noise_orig is None:
            return None
        return float(np.hypot(self.level_noise, self.pattern_noise_orig))

    def to_dict(self) -> dict:
        """Plain, JSON-serialisable dict with the spec's fixed keys (plus counts and reasons)."""
        d = {k: getattr(self, k) for k in NOISE_KEYS}
        d.update(
            n_workers=self.n_workers,
            n_prompts=self.n_prompts,
            n_labels=self.n_labels,
            sd=self.sd,
            n_prompts_with_sd=self.n_prompts_with_sd,
            system_noise_study=self.system_noise_study,
            reasons=dict(self.reasons),
        )
        return d

    @classmethod
    def _from_core(cls, out: Mapping[str, np.ndarray], i: int, ddof: int) -> NoiseAudit:
        vals = {k: float(out[k][i]) for k in (*NOISE_KEYS, "mod_sum")}
        counts = {k: float(out[k][i]) for k in ("n_workers", "n_prompts", "n_prompts_with_sd", "n_labels")}
        return cls(
            **{k: _none(vals[k]) for k in NOISE_KEYS},
            n_workers=int(round(counts["n_workers"])),
            n_prompts=int(round(counts["n_prompts"])),
            n_labels=int(round(counts["n_labels"])),
            n_prompts_with_sd=int(round(counts["n_prompts_with_sd"])),
            ddof=ddof,
            reasons=_reasons(vals, counts, ddof),
        )


def _vec(name: str, x: Any, *, integer: bool = False) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"{name}: expected a 1-d array, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: contains NaN or infinite values")
    if integer and (np.any(a < 0) or np.any(a != np.rint(a))):
        raise ValueError(f"{name}: counts must be non-negative integers")
    return a


@dataclass(frozen=True)
class SufficientStats:
    """Per-worker and per-prompt sufficient statistics of a label matrix (scaled values).

    Parameters
    ----------
    worker_count, worker_sum : array_like, shape (n,)
        Labels per worker and the sum of their values.
    prompt_count, prompt_sum, prompt_sumsq : array_like, shape (m,)
        Labels per prompt, the sum of their values and the sum of their squared values.
    worker_sumsq : array_like, shape (n,), optional
        Sum of squared values per worker (checked for consistency; the six numbers do not need it).
    total_count, total_sum, total_sumsq : number, optional
        Totals kept separately (e.g. in the database). When given they must agree with the
        per-prompt sums (counts exactly, sums to a relative 1e-9); the numbers use the
        per-prompt sums.

    prompt_weight : array_like, shape (m,), optional
        How many prompts each prompt entry stands for (prompts with identical count, sum and sum of
        squares can be given once, as a histogram of prompt states); default 1 each.

    Entries with count 0 are allowed and ignored (a worker or prompt without labels is not part of
    the matrix). Order within workers and within prompts does not matter.

    Raises
    ------
    ValueError
        naming the argument: wrong shape, NaN, negative or fractional counts, lengths that differ,
        totals that disagree.
    """

    worker_count: np.ndarray
    worker_sum: np.ndarray
    prompt_count: np.ndarray
    prompt_sum: np.ndarray
    prompt_sumsq: np.ndarray
    worker_sumsq: np.ndarray | None = None
    total_count: float | None = None
    total_sum: float | None = None
    total_sumsq: float | None = None
    prompt_weight: np.ndarray | None = None

    def __post_init__(self):
        wc = _vec("worker_count", self.worker_count, integer=True)
        ws = _vec("worker_sum", self.worker_sum)
        pc = _vec("prompt_count", self.prompt_count, integer=True)
        ps = _vec("prompt_sum", self.prompt_sum)
        pq = _vec("prompt_sumsq", self.prompt_sumsq)
        if ws.shape != wc.shape:
            raise ValueError(f"worker_sum: expected {wc.shape[0]} entries (as worker_count), got {ws.shape[0]}")
        if ps.shape != pc.shape:
            raise ValueError(f"prompt_sum: expected {pc.shape[0]} entries (as prompt_count), got {ps.shape[0]}")
        if pq.shape != pc.shape:
            raise ValueError(f"prompt_sumsq: expected {pc.shape[0]} entries (as prompt_count), got {pq.shape[0]}")
        if np.any(pq < 0):
            raise ValueError("prompt_sumsq: sums of squares cannot be negative")
        pw = None
        if self.prompt_weight is not None:
            pw = _vec("prompt_weight", self.prompt_weight, integer=True)
            if pw.shape != pc.shape:
                raise ValueError(f"prompt_weight: expected {pc.shape[0]} entries (as prompt_count), got {pw.shape[0]}")
            object.__setattr__(self, "prompt_weight", pw)
        object.__setattr__(self, "worker_count", wc)
        object.__setattr__(self, "worker_sum", ws)
        object.__setattr__(self, "prompt_count", pc)
        object.__setattr__(self, "prompt_sum", ps)
        object.__setattr__(self, "prompt_sumsq", pq)
        if self.worker_sumsq is not None:
            wq = _vec("worker_sumsq", self.worker_sumsq)
            if wq.shape != wc.shape:
                raise ValueError(f"worker_sumsq: expected {wc.shape[0]} entries, got {wq.shape[0]}")
            object.__setattr__(self, "worker_sumsq", wq)
        if pw is not None:  # totals over prompts count each entry weight times
            pc, ps, pq = pc * pw, ps * pw, pq * pw
        n_p, n_w = pc.sum(), wc.sum()
        if n_p != n_w:
            raise ValueError(f"worker_count: sums to {n_w:.0f} labels but prompt_count to {n_p:.0f}")

        def close(a, b):
            return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))

        if not close(ws.sum(), ps.sum()):
            raise ValueError(f"worker_sum: sums to {ws.sum()!r} but prompt_sum to {ps.sum()!r}")
        if self.worker_sumsq is not None and not close(self.worker_sumsq.sum(), pq.sum()):
            raise ValueError(f"worker_sumsq: sums to {self.worker_sumsq.sum()!r} but prompt_sumsq to {pq.sum()!r}")
        if self.total_count is not None and float(self.total_count) != n_p:
            raise ValueError(f"total_count: {self.total_count!r} but the prompt counts sum to {n_p:.0f}")
        if self.total_sum is not None and not close(float(self.total_sum), ps.sum()):
            raise ValueError(f"total_sum: {self.total_sum!r} but the prompt sums add up to {ps.sum()!r}")
        if self.total_sumsq is not None and not close(float(self.total_sumsq), pq.sum()):
            raise ValueError(f"total_sumsq: {self.total_sumsq!r} but the prompt sums of squares add up to {pq.sum()!r}")

    @classmethod
    def from_matrix(cls, matrix, *, values: np.ndarray | None = None) -> SufficientStats:
        """Statistics of a :class:`~audits.engine.matrix.LabelMatrix` (``np.bincount``, O(L)).

        ``values`` replaces the matrix's scaled values (same length), e.g. raw values.
        """
        n, m = matrix.n_workers, matrix.n_prompts
        if values is None and matrix.is_binary:
            # 0/1 values: sums are counts of ones and x² = x
            w_sum = np.bincount(matrix.worker, weights=matrix.value, minlength=n)
            if matrix.prompt_sorted and m:  # contiguous prompts: a segmented sum, faster than bincount
                p_sum = np.add.reduceat(matrix.value, matrix.prompt_starts)
            else:
                p_sum = np.bincount(matrix.prompt, weights=matrix.value, minlength=m)
            return cls._trusted(
                worker_count=matrix.worker_counts,
                worker_sum=w_sum,
                prompt_count=matrix.prompt_counts,
                prompt_sum=p_sum,
                prompt_sumsq=p_sum,
                worker_sumsq=w_sum,
            )
        v = matrix.value if values is None else np.asarray(values, dtype=np.float64)
        v2 = v * v
        return cls._trusted(
            worker_count=matrix.worker_counts,
            worker_sum=np.bincount(matrix.worker, weights=v, minlength=n),
            worker_sumsq=np.bincount(matrix.worker, weights=v2, minlength=n),
            prompt_count=matrix.prompt_counts,
            prompt_sum=np.bincount(matrix.prompt, weights=v, minlength=m),
            prompt_sumsq=np.bincount(matrix.prompt, weights=v2, minlength=m),
        )

    def compressed(self) -> SufficientStats:
        """The same statistics with identical prompt entries merged (``prompt_weight`` = how many).

        With integer labels and a few labels per prompt, millions of prompts share a handful of
        (count, sum, sum of squares) states, so the six numbers then cost O(workers + states).
        Gives ``self`` when the prompt entries are not integer-valued or already weighted.
        """
        if self.prompt_weight is not None or self.prompt_count.size == 0:
            return self
        c, t, r = self.prompt_count, self.prompt_sum, self.prompt_sumsq
        ci, ti = c.astype(np.int64), t.astype(np.int64)
        if not np.array_equal(ti, t):  # not integer-valued (the cast truncated, or NaN)
            return self
        # 0/1 labels have x² = x, so the sums of squares are the sums (from_matrix passes one array)
        same = r is t
        ri = ti if same else r.astype(np.int64)
        if not (same or np.array_equal(ri, r)):
            return self
        t0, r0 = int(ti.min()), int(ri.min())
        nc, nt, nr = int(ci.max()) + 1, int(ti.max()) - t0 + 1, 1 if same else int(ri.max()) - r0 + 1
        if nc * nt * nr > 4 * c.size + 1_000_000:  # states too spread out to be worth a dense count
            return self
        key = ci * nt + (ti - t0)
        if not same:
            key = key * nr + (ri - r0)
        counts = np.bincount(key, minlength=nc * nt * nr)
        keys = np.flatnonzero(counts)
        rr, rest = keys % nr + r0, keys // nr
        tt, cc = rest % nt + t0, rest // nt
        if same:
            rr = tt
        return SufficientStats._trusted(
            worker_count=self.worker_count,
            worker_sum=self.worker_sum,
            worker_sumsq=self.worker_sumsq,
            prompt_count=cc,
            prompt_sum=tt,
            prompt_sumsq=rr,
            prompt_weight=counts[keys],
            total_count=self.total_count,
            total_sum=self.total_sum,
            total_sumsq=self.total_sumsq,
        )

    @classmethod
    def _trusted(cls, **arrays) -> SufficientStats:
        """Build without the input checks (the arrays come from a LabelMatrix, so they hold)."""
        obj = object.__new__(cls)
        for f in ("worker_count", "worker_sum", "prompt_count", "prompt_sum", "prompt_sumsq"):
            object.__setattr__(obj, f, np.asarray(arrays[f], dtype=np.float64))
        for f in ("worker_sumsq", "total_count", "total_sum", "total_sumsq", "prompt_weight"):
            object.__setattr__(obj, f, arrays.get(f))
        if obj.prompt_weight is not None:
            object.__setattr__(obj, "prompt_weight", np.asarray(obj.prompt_weight, dtype=np.float64))
        return obj


def noise_from_stats(stats: SufficientStats | None = None, *, ddof: int = 1, **arrays: Any) -> NoiseAudit:
    """The six numbers from sufficient statistics.

    Call either ``noise_from_stats(SufficientStats(...), ddof=1)`` or with the arrays as keywords:
    ``noise_from_stats(worker_count=..., worker_sum=..., prompt_count=..., prompt_sum=...,
    prompt_sumsq=..., [worker_sumsq=..., total_count=..., total_sum=..., total_sumsq=...], ddof=1)``.

    Formulas (Kejriwal et al. 2024, Eqs. 1-4), with ``s_d`` the SD with ``ddof`` d:

    - worker mean ``sum_i / count_i``; ``LN = s_d`` of those over workers (Eq. 1);
    - prompt mean ``sum_j / count_j``; ``PN_orig = s_d`` of those over prompts (Eq. 2);
    - prompt SD ``sqrt((c·q − t²) / (c·(c − d)))`` for prompts with ``c > d``; ``PN_mod = s_d`` of those;
    - ``SN_orig = sqrt((N·Q − S²) / (N·(N − d)))`` from the totals (Eq. 4);
    - ``residual = SN_orig² − LN² − PN_orig²``; ``SN_mod = sqrt(LN² + PN_mod² + residual)``.

    Parameters
    ----------
    stats : SufficientStats, optional
    ddof : {1, 0}
        1 = sample SD (divide by N − 1, the study's convention; default), 0 = population SD.

    Returns
    -------
    NoiseAudit

    Notes
    -----
    - An SD of at most ``ddof`` values is undefined: it is left out of any outer SD that would use it
      (a prompt with one label has no SD under ``ddof=1``) and an undefined top-level number is
      ``None`` with a reason.
    - ``residual`` may be negative with missing cells; it is reported, never clamped.
      ``SN_mod`` is ``None`` when ``LN² + PN_mod² + residual < 0``.
    - Workers/prompts with count 0 are ignored.
    - With integer values below 2**53 the inner variances are exact; otherwise a variance within
      rounding error of zero is set to 0.

    Examples
    --------
    >>> a = noise_from_stats(worker_count=[2, 2], worker_sum=[1, 1], prompt_count=[2, 2],
    ...                      prompt_sum=[2, 0], prompt_sumsq=[2, 0])
    >>> a.level_noise, a.pattern_noise_mod, round(a.pattern_noise_orig, 6)
    (0.0, 0.0, 0.707107)
    """
    ddof = check_ddof(ddof)
    if stats is None:
        stats = SufficientStats(**arrays)
    elif arrays:
        raise ValueError(f"stats: give a SufficientStats or keyword arrays, not both ({sorted(arrays)})")
    n, m = stats.worker_count.shape[0], stats.prompt_count.shape[0]
    out = noise_core(
        1,
        ddof,
        np.zeros(n, np.int64),
        stats.worker_count,
        stats.worker_sum,
        None,
        np.zeros(m, np.int64),
        stats.prompt_count,
        stats.prompt_sum,
        stats.prompt_sumsq,
        stats.prompt_weight,
    )
    return NoiseAudit._from_core(out, 0, ddof)


def noise_audit(matrix, *, ddof: int = 1) -> NoiseAudit:
    """The six numbers of a label matrix: ``noise_from_stats(matrix.stats)``.

    ``matrix.stats`` (:meth:`SufficientStats.from_matrix`) is accumulated when the matrix is built,
    so an audit costs O(workers + prompts); the :meth:`SufficientStats.compressed` form (identical
    prompt states merged) is cached on first use, after which an audit costs O(workers + states).

    Parameters
    ----------
    matrix : LabelMatrix
    ddof : {1, 0}
        1 = sample SD (default, the study's convention), 0 = population SD.

    Returns
    -------
    NoiseAudit

    Notes
    -----
    See :func:`noise_from_stats` for the formulas and every edge case.

    Examples
    --------
    The spec's worked example: 100 prompts, 5 workers in perfect agreement, 60 prompts labeled 1.

    >>> from audits.engine.matrix import LabelMatrix
    >>> w = [f"w{i}" for j in range(100) for i in range(5)]
    >>> p = [j for j in range(100) for i in range(5)]
    >>> v = [int(j < 60) for j in range(100) for i in range(5)]
    >>> a = noise_audit(LabelMatrix.from_triples(w, p, v))
    >>> a.level_noise, a.pattern_noise_mod, round(a.pattern_noise_orig, 5)
    (0.0, 0.0, 0.49237)
    """
    ddof = check_ddof(ddof)
    return noise_from_stats(matrix.prompt_states, ddof=ddof)


# --------------------------------------------------------------------------------------- per worker
@dataclass(frozen=True)
class WorkerNoise:
    """Per-worker audits: the six numbers on the sub-matrix of the prompts each worker labeled.

    Columnar: every attribute but ``ddof`` is an array of length ``n_workers`` in the matrix's
    worker order; NaN marks an undefined number (e.g. a worker whose prompts were labeled by
    nobody else has ``level_noise`` NaN under the sample SD).
    """

    worker_ids: np.ndarray
    level_noise: np.ndarray
    pattern_noise_orig: np.ndarray
    pattern_noise_mod: np.ndarray
    system_noise_orig: np.ndarray
    system_noise_mod: np.ndarray
    residual: np.ndarray
    n_workers: np.ndarray
    n_prompts: np.ndarray
    n_labels: np.ndarray
    ddof: int = 1

    def audit(self, i: int) -> dict:
        """Worker ``i``'s six numbers as a dict (None = undefined)."""
        return {k: _none(getattr(self, k)[i]) for k in NOISE_KEYS}

    def to_dict(self) -> list[dict]:
        """One dict per worker: ``worker``, the six numbers (None = undefined) and the sub-matrix size."""
        ids = py(self.worker_ids)
        cols = [floats(getattr(self, k)) for k in NOISE_KEYS]
        nw, npr, nl = self.n_workers.tolist(), self.n_prompts.tolist(), self.n_labels.tolist()
        rows = []
        for i, wid in enumerate(ids):
            row = {"worker": wid}
            for k, col in zip(NOISE_KEYS, cols):
                row[k] = col[i]
            row.update(n_workers=nw[i], n_prompts=npr[i], n_labels=nl[i])
            rows.append(row)
        return rows


def worker_noise(matrix, *, ddof: int = 1, chunk_pairs: int = 4_000_000) -> WorkerNoise:
    """Per-worker six numbers: for worker a, the audit of every label on the prompts a labeled.

    For worker a with prompt set ``P_a`` the sub-matrix holds all labels (of all workers) on
    ``P_a``: its prompt statistics are the full prompt statistics restricted to ``P_a``, and each
    co-labeling worker b enters ``LN`` with its mean over ``P_a ∩ P_b``. The co-labeling counts and
    sums come from sparse products ``A Aᵀ`` and ``A Xᵀ`` (A the indicator, X the values; one
    product ``A (BIG + X)ᵀ`` when the values are integers, decoded exactly), computed
    in chunks of workers of at most ``chunk_pairs`` (worker, prompt, co-worker) triples; the six
    numbers then come from the same core as :func:`noise_from_stats`.

    Returns
    -------
    WorkerNoise
    """
    from scipy import sparse  # imported here: scipy.sparse costs a few tenths of a second to import

    ddof = check_ddof(ddof)
    n, m = matrix.n_workers, matrix.n_prompts
    nan = np.full(n, np.nan)
    if matrix.n_labels == 0:
        z = np.zeros(0)
        return WorkerNoise(matrix.worker_ids, z, z, z, z, z, z, z, z, z, ddof)
    v = matrix.value
    stats = matrix.stats
    shift = float(v.min()) - 1.0  # stored values v - shift >= 1 keep A·Xᵀ's sparsity equal to A·Aᵀ's
    A = sparse.csr_matrix((np.ones(matrix.n_labels), (matrix.worker, matrix.prompt)), shape=(n, m))
    xs = v - shift
    # integer values: one product carries both the co-label count and the sum, as BIG·count + sum
    # (exact while below 2**53); otherwise two products with the same sparsity
    max_count = float(matrix.worker_counts.max())
    big = 2.0 ** np.ceil(np.log2(max_count * float(xs.max()) + 2))
    packed = bool(np.all(xs == np.rint(xs))) and max_count * big * 2 < 2.0**52
    if packed:
        Xt = sparse.csr_matrix((big + xs, (matrix.prompt, matrix.worker)), shape=(m, n))
    else:
        Xt = sparse.csr_matrix((xs, (matrix.prompt, matrix.worker)), shape=(m, n))
        At = A.T.tocsr()
    # cost of worker a's chunk row: sum over its prompts of the prompt's label count
    cost = np.bincount(matrix.worker, weights=stats.prompt_count[matrix.prompt], minlength=n)
    bounds = [0]
    csum = np.cumsum(cost)
    while bounds[-1] < n:
        start = bounds[-1]
        base = csum[start - 1] if start else 0.0
        stop = int(np.searchsorted(csum, base + chunk_pairs, side="right"))
        stop = max(stop, start + 1)
        bounds.append(min(stop, n))
    res = {k: nan.copy() for k in (*NOISE_KEYS, "n_workers", "n_prompts", "n_labels")}
    for start, stop in zip(bounds[:-1], bounds[1:]):
        rows = A[start:stop]
        if packed:
            P = (rows @ Xt).tocsr()
            w_count = np.floor(P.data / big)
            w_sum = (P.data - big * w_count) + shift * w_count
            indptr = P.indptr
            del P
        else:
            C = (rows @ At).tocsr()
            S = (rows @ Xt).tocsr()
            C.sort_indices()
            S.sort_indices()
            if not (np.array_equal(C.indptr, S.indptr) and np.array_equal(C.indices, S.indices)):
                raise RuntimeError("worker_noise: sparsity patterns of A·Aᵀ and A·Xᵀ differ")
            w_count, w_sum, indptr = C.data, S.data + shift * C.data, C.indptr
            del C, S
        wg = np.repeat(np.arange(stop - start), np.diff(indptr))
        rows_csr = rows.tocsr()
        pg = np.repeat(np.arange(stop - start), np.diff(rows_csr.indptr))
        pj = rows_csr.indices
        out = noise_core(
            stop - start,
            ddof,
            wg,
            w_count,
            w_sum,
            None,
            pg,
            stats.prompt_count[pj],
            stats.prompt_sum[pj],
            stats.prompt_sumsq[pj],
            None,
        )
        for k in res:
            res[k][start:stop] = out[k]
    return WorkerNoise(
        worker_ids=matrix.worker_ids,
        **{k: res[k] for k in NOISE_KEYS},
        n_workers=res["n_workers"].round().astype(np.int64),
        n_prompts=res["n_prompts"].round().astype(np.int64),
        n_labels=res["n_labels"].round().astype(np.int64),
        ddof=ddof,
    )
