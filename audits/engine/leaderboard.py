"""Several systems on one campaign: scores, ranking and, for every pair, whether the instrument can
tell them apart (issue 13, "The benchmark as an instrument"; ``noise-audit.md``, "Agreement and
instrument characteristics").

Each system is scored by :func:`audits.engine.systems.system_scores` (overall, per noise partition
with the study's two-proportion z-tests, per group, per-rater summary), all systems with one metric
(:func:`audits.engine.systems.prediction_metric`), plus against each alternative ground truth.
Every pair is compared twice:

- across raters, the paired t-test of :func:`audits.engine.instrument.compare_systems`
  (``scipy.stats.ttest_rel`` on the per-rater scores; Welty, Paritosh & Aroyo 2019);
- across prompts: for accuracy the exact McNemar test (:func:`mcnemar_exact`: a two-sided binomial
  test, ``scipy.stats.binomtest``, on the discordant prompts; McNemar 1947), for graded scores a
  seeded paired bootstrap over prompts of the difference of Spearman's ρ (:func:`bootstrap_spearman_difference`;
  Efron & Tibshirani 1993, ch. 16).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from audits.engine._util import positions, py
from audits.engine.instrument import compare_systems
from audits.engine.partitions import align_predictions, modal_labels
from audits.engine.systems import grouped_spearman, per_rater_scores, prediction_metric, system_scores

__all__ = ["RESAMPLES", "answers_leaderboard", "mcnemar_exact", "bootstrap_spearman_difference", "leaderboard"]

#: paired bootstrap resamples over prompts for graded systems (p-values to about ±0.01 near 0.05)
RESAMPLES = 1000


def mcnemar_exact(correct_a: Any, correct_b: Any, *, alpha: float = 0.05) -> dict:
    """Exact McNemar test of two systems scored on the same prompts (McNemar 1947).

    With ``b`` the prompts only A gets right and ``c`` those only B gets right, under the null of
    equal accuracy ``b ~ Binomial(b + c, 1/2)``; the two-sided p-value is
    ``scipy.stats.binomtest(b, b + c, 0.5).pvalue``.

    Parameters
    ----------
    correct_a, correct_b : array of bool
        Per prompt, whether each system is right (the same prompts, in the same order).
    alpha : float
        Significance level for ``distinguishable``.

    Returns
    -------
    dict
        ``{"test", "n", "only_a", "only_b", "p", "distinguishable"}``.

    Notes
    -----
    Without discordant prompts (``b + c = 0``) the systems agree everywhere: p is 1.

    Examples
    --------
    >>> r = mcnemar_exact([1, 1, 1, 0, 1, 1], [0, 0, 1, 0, 0, 1])
    >>> r["only_a"], r["only_b"], round(r["p"], 4)
    (3, 0, 0.25)
    """
    from scipy import stats  # imported here: scipy.stats costs ~0.8 s to import

    a, b = np.asarray(correct_a, dtype=bool), np.asarray(correct_b, dtype=bool)
    only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
    p = float(stats.binomtest(only_a, only_a + only_b, 0.5).pvalue) if only_a + only_b else 1.0
    return {
        "test": "exact McNemar (binomial test on the discordant prompts)",
        "n": int(a.size),
        "only_a": only_a,
        "only_b": only_b,
        "p": p,
        "distinguishable": p < alpha,
    }


class _Resamples:
    """Bootstrap draws over n prompts, and Spearman's ρ in each resample from the draw counts alone.

    ``counts[i, j]`` is how often resample i drew prompt j. A value's average rank in a resample is
    ``S + (T + 1) / 2`` with T the draws of that value and S the draws of smaller values (ties share
    their mean rank, as ``scipy.stats.rankdata`` gives them), so the ranks come from cumulative
    counts over the sorted values, and ρ is the count-weighted Pearson r of the ranks: no sort per
    resample. Each variable's ranks and each system's ρ are kept by key, so the systems of a
    leaderboard are resampled once however many pairs they enter.
    """

    def __init__(self, n: int, resamples: int, seed: int):
        idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
        counts = np.bincount((idx + n * np.arange(resamples)[:, None]).ravel(), minlength=resamples * n)
        self.counts = counts.reshape(resamples, n).astype(np.float64)
        self.n = n
        self._dev: dict = {}
        self._rho: dict = {}

    def _deviation(self, key, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ranks minus their mean ``(n + 1) / 2`` per resample, and their count-weighted sum of squares."""
        if key not in self._dev:
            order = np.argsort(v, kind="stable")
            levels, starts, codes = np.unique(v[order], return_index=True, return_inverse=True)
            per_level = self.counts[:, order]
            ties = levels.size < v.size
            if ties:  # one column per distinct value
                per_level = np.add.reduceat(per_level, starts, axis=1)
            ranks = np.cumsum(per_level, axis=1)
            ranks -= (per_level - 1) / 2 + (self.n + 1) / 2
            dev = np.empty_like(self.counts)
            dev[:, order] = ranks[:, codes] if ties else ranks
            self._dev[key] = dev, np.einsum("ij,ij,ij->i", self.counts, dev, dev)
        return self._dev[key]

    def spearman(self, key, x: np.ndarray, ref_key, ref: np.ndarray) -> np.ndarray:
        """ρ of ``x`` with ``ref`` in each resample (NaN where either is constant)."""
        if key not in self._rho:
            (dx, sxx), (dy, syy) = self._deviation(key, x), self._deviation(ref_key, ref)
            sxy = np.einsum("ij,ij,ij->i", self.counts, dx, dy)
            with np.errstate(invalid="ignore", divide="ignore"):
                self._rho[key] = np.where((sxx > 0) & (syy > 0), sxy / np.sqrt(sxx * syy), np.nan)
        return self._rho[key]


def bootstrap_spearman_difference(
    pred_a: Any, pred_b: Any, reference: Any, *, resamples: int = RESAMPLES, seed: int = 0, alpha: float = 0.05
) -> dict:
    """Paired bootstrap over prompts of ``ρ_A − ρ_B``, Spearman's ρ of each system with the reference.

    Each resample draws the n prompts with replacement (``numpy.random.default_rng(seed).integers(0,
    n, (resamples, n))``; the same draw for both systems, so the pairing is kept) and recomputes both
    correlations, equal to ``scipy.stats.spearmanr`` on the drawn rows. The interval is the
    percentile interval at ``1 − alpha``; the two-sided p-value is
    ``min(1, 2 min((1 + #{Δ* ≤ 0}) / (B + 1), (1 + #{Δ* ≥ 0}) / (B + 1)))`` over the B resamples
    (Efron & Tibshirani 1993, §16.4; the +1 keeps p above 0, whose resolution is 1/B).

    Returns
    -------
    dict
        ``{"test", "n", "difference", "ci", "p", "resamples", "seed", "distinguishable"}``;
        ``difference``, ``ci`` and ``p`` are None when fewer than 4 prompts are scored by both.

    Notes
    -----
    Resamples in which a correlation is undefined (a constant draw) are left out of p and the interval.
    """
    x, y, ref = (np.asarray(v, dtype=np.float64) for v in (pred_a, pred_b, reference))
    return _bootstrap(x, y, ref, resamples=resamples, seed=seed, alpha=alpha, draws=None, keys=("a", "b"))


def _bootstrap(x, y, ref, *, resamples: int, seed: int, alpha: float, draws: _Resamples | None, keys: tuple) -> dict:
    """:func:`bootstrap_spearman_difference` on ``draws`` (made here when None), ρ* kept under ``keys``."""
    n = x.size
    out = {"test": "paired bootstrap over prompts of the Spearman difference", "n": int(n)}
    out.update(resamples=int(resamples), seed=int(seed))
    if n < 4:
        return {**out, "difference": None, "ci": None, "p": None, "distinguishable": None}
    zero = np.zeros(n, np.int64)
    observed = float(grouped_spearman(zero, x, ref, 1)[0][0] - grouped_spearman(zero, y, ref, 1)[0][0])
    draws = draws or _Resamples(n, resamples, seed)
    diff = draws.spearman(keys[0], x, None, ref) - draws.spearman(keys[1], y, None, ref)
    diff = diff[np.isfinite(diff)]
    if not diff.size or not np.isfinite(observed):
        return {**out, "difference": py(observed), "ci": None, "p": None, "distinguishable": None}
    b = diff.size
    p = float(min(1.0, 2 * min((1 + (diff <= 0).sum()) / (b + 1), (1 + (diff >= 0).sum()) / (b + 1))))
    ci = np.quantile(diff, [alpha / 2, 1 - alpha / 2]).tolist()
    return {**out, "difference": observed, "ci": ci, "p": p, "distinguishable": p < alpha}


def _numeric(matrix, predictions: Mapping) -> np.ndarray:
    """Per prompt: the prediction as a plain number (not through the schema), NaN where none."""
    keys, vals = list(predictions.keys()), list(predictions.values())
    pos = positions(matrix.prompt_ids, keys)
    keep = pos >= 0
    arr = np.empty(len(vals), dtype=object)
    arr[:] = vals
    out = np.full(matrix.n_prompts, np.nan)
    if keep.any():
        out[pos[keep]] = matrix.scale.apply(arr[keep])[1]
    return out


def _verdict(test: dict, a: str, b: str, higher: str | None, alpha: float) -> str:
    """The pair's verdict in words, naming the test and its p."""
    if test.get("p") is None and test.get("distinguishable") is False:  # equal scores everywhere
        return f"cannot tell {a} and {b} apart at this resolution: they score the same ({test['test']})"
    if test.get("p") is None:
        return f"cannot test {a} against {b} ({test['test']}): {test.get('reason') or 'too few scored prompts'}"
    if test["distinguishable"]:
        return f"the instrument separates {a} and {b}: {higher} scores higher ({test['test']}, p = {test['p']:.3g})"
    return f"cannot tell {a} and {b} apart at this resolution ({test['test']}, p = {test['p']:.3g} ≥ {alpha})"


def _across_raters(matrix, a: str, b: str, pa: Mapping, pb: Mapping, metric: str, alpha: float) -> dict:
    cmp = compare_systems(matrix, pa, pb, metric=metric, alpha=alpha)
    test = {
        "test": "paired t-test across raters",
        "n_raters": cmp.n_raters,
        "mean_a": cmp.mean_a,
        "mean_b": cmp.mean_b,
        "mean_difference": cmp.mean_difference,
        "t": cmp.t,
        "df": cmp.df,
        "p": cmp.p,
        "distinguishable": cmp.distinguishable,
        "resolution": cmp.resolution,
        "reason": None if cmp.p is not None else cmp.verdict,
    }
    higher = a if (cmp.mean_difference or 0) > 0 else b
    return {**test, "verdict": _verdict(test, a, b, higher, alpha)}


def _across_prompts(
    matrix, a: str, b: str, pa: Mapping, pb: Mapping, metric: str, alpha: float, seed: int, draws: dict
):
    """McNemar or the paired bootstrap; ``draws`` keeps one set of bootstrap draws per set of prompts."""
    if metric == "accuracy":
        modal = modal_labels(matrix)
        xa, xb = align_predictions(matrix, pa)[0], align_predictions(matrix, pb)[0]
        both = ~np.isnan(xa) & ~np.isnan(xb) & ~np.isnan(modal)
        test = mcnemar_exact(xa[both] == modal[both], xb[both] == modal[both], alpha=alpha)
        test["reference"] = "modal"
        higher = a if test["only_a"] > test["only_b"] else b
    else:
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.bincount(matrix.prompt, weights=matrix.raw, minlength=matrix.n_prompts) / matrix.prompt_counts
        xa, xb = _numeric(matrix, pa), _numeric(matrix, pb)
        both = ~np.isnan(xa) & ~np.isnan(xb) & ~np.isnan(mean)
        n, key = int(both.sum()), both.tobytes()
        if n >= 4 and key not in draws:
            draws[key] = _Resamples(n, RESAMPLES, seed)
        args = dict(resamples=RESAMPLES, seed=seed, alpha=alpha, draws=draws.get(key), keys=(a, b))
        test = _bootstrap(xa[both], xb[both], mean[both], **args)
        test["reference"] = "mean"
        higher = a if (test["difference"] or 0) > 0 else b
    return {**test, "verdict": _verdict(test, a, b, higher, alpha)}


def _truth_scores(matrix, predictions: Mapping, truths: Mapping, metric: str, level: float) -> dict:
    """Overall scores against each alternative ground truth: the truth stands in for gold (its raw
    labels scaled as the crowd's are for accuracy, as plain numbers for Spearman)."""
    out = {}
    for method, labels in truths.items():
        ref = _numeric(matrix, labels) if metric == "spearman" else align_predictions(matrix, labels)[0]
        as_gold = dataclasses.replace(matrix, gold=ref)
        scores = system_scores(as_gold, predictions, metric=metric, level=level)
        out[method] = scores["overall"].get("gold")
    return out


def leaderboard(
    matrix,
    systems: Mapping[str, Mapping],
    *,
    truths: Mapping[str, Mapping] | None = None,
    k: int | None = None,
    level: float = 0.95,
    alpha: float = 0.05,
    seed: int = 0,
) -> dict:
    """Score, rank and compare several systems on one label matrix.

    Parameters
    ----------
    matrix : LabelMatrix
    systems : mapping {name: {prompt id: prediction}}
    truths : mapping {method: {prompt id: raw label}}, optional
        Alternative ground truths (``audits.engine.truths.ground_truths``'s ``labels``).
    k : int, optional
        Labels per prompt of the noise partitions.
    level : float
        Confidence level of the intervals.
    alpha : float
        Significance level of the pair tests.
    seed : int
        Seed of the paired bootstrap (graded systems).

    Returns
    -------
    dict
        ``metric``; ``reference`` (the score that ranks: ``modal`` or ``mean``); ``systems``: per
        system its :func:`~audits.engine.systems.system_scores` dict plus ``truths`` (overall score
        per alternative ground truth), ``per_rater_scores`` ({worker: score}) and ``rank``;
        ``ranking`` (names, best first; systems without a score last); ``pairs``: per pair
        ``across_raters`` (paired t-test) and ``across_prompts`` (exact McNemar, or the paired
        bootstrap), each with a ``verdict`` in words.

    Notes
    -----
    One graded system makes every system graded (Spearman), as in ``prediction_metric``. A system's
    rank follows its overall score against the reference; equal scores share a rank.
    """
    names = list(systems)
    if not names:
        return {"metric": None, "reference": None, "systems": {}, "ranking": [], "pairs": []}
    metric = prediction_metric(matrix, *systems.values())
    ref = "modal" if metric == "accuracy" else "mean"
    out = {}
    for name in names:
        scores = system_scores(matrix, systems[name], metric=metric, k=k, level=level)
        scores["truths"] = _truth_scores(matrix, systems[name], truths or {}, metric, level)
        raters = per_rater_scores(matrix, systems[name], metric=metric)
        scores["per_rater_scores"] = {
            py(w): float(s) for w, s in zip(matrix.worker_ids, raters.scores[0]) if np.isfinite(s)
        }
        out[name] = scores
    score = {n: out[n]["overall"][ref]["score"] for n in names}
    ranking = sorted(names, key=lambda n: (score[n] is None, -(score[n] or 0.0), n))
    for n in names:
        better = sum(1 for m in names if score[n] is not None and score[m] is not None and score[m] > score[n])
        out[n]["rank"] = None if score[n] is None else 1 + better
    pairs, draws = [], {}
    for i, a in enumerate(ranking):
        for b in ranking[i + 1 :]:
            pa, pb = systems[a], systems[b]
            pairs.append(
                {
                    "a": a,
                    "b": b,
                    "across_raters": _across_raters(matrix, a, b, pa, pb, metric, alpha),
                    "across_prompts": _across_prompts(matrix, a, b, pa, pb, metric, alpha, seed, draws),
                }
            )
    # py(): plain Python with None for NaN, so the dict is strict JSON
    board = {"metric": metric, "reference": ref, "level": level, "alpha": alpha}
    return py({**board, "systems": out, "ranking": ranking, "pairs": pairs})


#: the free-text score that ranks systems and that the pair test compares (ProtoQA's headline metric)
ANSWERS_REFERENCE = "max_answers@10"


def answers_leaderboard(
    targets: Mapping[str, Mapping],
    systems: Mapping[str, tuple[Mapping, Mapping | None]],
    *,
    level: float = 0.95,
    alpha: float = 0.05,
) -> dict:
    """Score, rank and compare free-text systems (ranked answer lists, ProtoQA) on one campaign.

    Parameters
    ----------
    targets : mapping {prompt id: {cluster name: (count, answers)}}
        The prompts' final answer clusterings: the only prompts scored.
    systems : mapping {name: (ranked answers {prompt id: [answers]}, samples {prompt id: [answers]} or None)}
    level, alpha : float
        Confidence level of the intervals; significance level of the pair tests.

    Returns
    -------
    dict
        ``metric`` (``"max_answers"``), ``reference`` (:data:`ANSWERS_REFERENCE`), ``matching``
        (``"exact"``: the official evaluator's exact match after its normalisation), ``n_prompts``;
        ``systems``: per system its mean Max Answers@k / Max Incorrect@k over the scored prompts
        (:func:`audits.engine.protoqa_scoring.score_protoqa`; a prompt it left out scores 0), ProbEval's
        KL when samples were uploaded, a Student-t interval of the mean of the reference score
        (``mean ± t_{n−1} s/√n``) and ``rank``; ``ranking``; ``pairs``: per pair ``across_prompts``,
        the two-sided Wilcoxon signed-rank test of the reference score's per-prompt differences
        (``scipy.stats.wilcoxon``, zero differences dropped; Wilcoxon 1945), with a ``verdict``.
    """
    from scipy import stats  # noqa: PLC0415 (scipy.stats takes a few tenths of a second to import)

    from audits.engine.protoqa_scoring import Question, score_protoqa  # noqa: PLC0415 (free text only)

    questions = {pid: Question(id=pid, question="", clusters=dict(c)) for pid, c in targets.items()}
    base = {"metric": "max_answers", "reference": ANSWERS_REFERENCE, "matching": "exact", "level": level}
    base |= {"alpha": alpha, "n_prompts": len(questions)}
    if not questions or not systems:
        return {**base, "systems": {}, "ranking": [], "pairs": []}
    per_prompt, out = {}, {}
    for name, (ranked, samples) in systems.items():
        scored = score_protoqa(questions, ranked, samples, matching="exact")
        values = np.array([q[ANSWERS_REFERENCE] for q in scored["questions"].values()], dtype=float)
        per_prompt[name] = values
        ok = values[~np.isnan(values)]
        mean = float(ok.mean()) if len(ok) else None
        ci = None
        if len(ok) > 1:
            half = stats.t.ppf(0.5 + level / 2, len(ok) - 1) * ok.std(ddof=1) / np.sqrt(len(ok))
            ci = [mean - half, mean + half]
        n_answered = sum(1 for pid in questions if ranked.get(pid))
        out[name] = {"metrics": scored["metrics"], "score": mean, "ci": ci, "n_prompts": len(ok)}
        out[name] |= {"n_answered": n_answered, "has_samples": samples is not None}
    ranking = sorted(out, key=lambda n: (out[n]["score"] is None, -(out[n]["score"] or 0.0), n))
    for n in out:
        s = out[n]["score"]
        out[n]["rank"] = None if s is None else 1 + sum(1 for m in out if (out[m]["score"] or -1) > s)
    pairs = []
    for i, a in enumerate(ranking):
        for b in ranking[i + 1 :]:
            d = per_prompt[a] - per_prompt[b]
            d = d[~np.isnan(d)]
            test = {"test": "Wilcoxon signed-rank test across prompts", "n": int(len(d)), "p": None}
            test |= {"statistic": None, "distinguishable": None, "mean_difference": float(d.mean()) if len(d) else None}
            if len(d) and not np.any(d):
                test |= {"distinguishable": False}
            elif np.count_nonzero(d) >= 2:
                res = stats.wilcoxon(d, zero_method="wilcox")
                test |= {"statistic": float(res.statistic), "p": float(res.pvalue)}
                test["distinguishable"] = bool(res.pvalue < alpha)
            else:
                test["reason"] = "fewer than two prompts where the two systems differ"
            higher = a if (test["mean_difference"] or 0) > 0 else b
            pairs.append({"a": a, "b": b, "across_prompts": {**test, "verdict": _verdict(test, a, b, higher, alpha)}})
    return py({**base, "systems": out, "ranking": ranking, "pairs": pairs})
