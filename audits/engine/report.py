"""The full audit report as plain data.

:func:`full_report` runs every analysis of ``noise-audit.md`` on one matrix and returns an
:class:`AuditReport`; :meth:`AuditReport.to_dict` gives the JSON the dashboard, the API and the
``audit`` command serialise, with the spec's fixed top-level keys (``level_noise`` …
``system_noise_mod``, ``residual``, ``n_workers``, ``n_prompts``, ``n_labels``, ``sd``,
``accuracy``, ``accuracy_gold``, ``partitions``) and further sections under their own keys (among
them ``straight_lining``, :mod:`audits.engine.flags`).
:func:`audits.engine.markdown.render_markdown` renders such a dict (so a stored report can be rendered again).
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from audits.engine._util import check_ddof, py
from audits.engine.accuracy import WorkerAccuracy, gold_accuracy, loo_accuracy, noise_accuracy_regression
from audits.engine.agreement import agreement_coefficients as agreement_section
from audits.engine.filters import FilterResult, volume_filter, volume_sweep
from audits.engine.flags import StraightLining, straight_lining
from audits.engine.instrument import compare_systems, item_precision, reproducibility
from audits.engine.intervals import NoiseIntervals, noise_intervals
from audits.engine.markdown import render_markdown
from audits.engine.noise import NOISE_KEYS, NoiseAudit, WorkerNoise, noise_audit, worker_noise
from audits.engine.partitions import Partitions, noise_partitions, partitions_by_k, score_partitions
from audits.engine.systems import per_rater_scores, prediction_metric, system_scores
from audits.engine.truths import ground_truths as ground_truth_section
from audits.engine.variance import resolution, variance_components

__all__ = ["AuditReport", "full_report", "REPORT_KEYS"]


REPORT_KEYS = (*NOISE_KEYS, "n_workers", "n_prompts", "n_labels", "sd", "accuracy", "accuracy_gold", "partitions")
SCHEMA_VERSION = 1


def _summary(x: np.ndarray) -> dict:
    if x.size == 0:
        return {"min": None, "median": None, "mean": None, "max": None}
    return {"min": int(x.min()), "median": float(np.median(x)), "mean": float(x.mean()), "max": int(x.max())}


@dataclass(frozen=True)
class AuditReport:
    """Everything one audit computed. ``to_dict()`` is the stable JSON; ``to_markdown()`` renders it.

    Sections that were not requested (or need data the matrix lacks) are None / empty, and the
    dict says why under ``notes``.
    """

    audit: NoiseAudit
    computed_on: dict
    counts: dict
    accuracy: WorkerAccuracy
    accuracy_gold: WorkerAccuracy | None
    partitions: Partitions
    sweeps: dict = field(default_factory=dict)
    filters: list = field(default_factory=list)
    worker_noise: WorkerNoise | None = None
    regressions: dict = field(default_factory=dict)
    agreement: dict | None = None
    precision: dict | None = None
    partition_scores: dict | None = None
    systems: dict | None = None
    reproducibility: dict | None = None
    notes: dict = field(default_factory=dict)
    straight_lining: StraightLining | None = None
    ground_truths: dict | None = None
    partitions_by_k: dict | None = None
    system_scores: dict | None = None
    intervals: NoiseIntervals | None = None
    variance_components: dict | None = None
    resolution: dict | None = None

    def to_dict(self) -> dict:
        a = self.audit
        d: dict[str, Any] = {k: getattr(a, k) for k in NOISE_KEYS}
        d.update(n_workers=a.n_workers, n_prompts=a.n_prompts, n_labels=a.n_labels, sd=a.sd)
        d["reasons"] = dict(a.reasons)
        d["system_noise_study"] = a.system_noise_study
        d["n_prompts_with_sd"] = a.n_prompts_with_sd
        d["schema_version"] = SCHEMA_VERSION
        d["computed_on"] = self.computed_on
        d["counts"] = self.counts
        d["accuracy"] = self.accuracy.to_dict()
        d["accuracy_summary"] = self.accuracy.summary()
        d["accuracy_gold"] = self.accuracy_gold.to_dict() if self.accuracy_gold is not None else []
        d["accuracy_gold_summary"] = self.accuracy_gold.summary() if self.accuracy_gold is not None else None
        d["partitions"] = self.partitions.to_dict()
        d["partitions_meta"] = self.partitions.meta()
        if self.partitions_by_k is not None:  # only for adaptive k: a fixed k's report keeps its keys
            d["partitions_by_k"] = {
                str(k): {str(m): n for m, n in parts.items()} for k, parts in self.partitions_by_k.items()
            }
        d["filters"] = {kind: sw.to_dict() for kind, sw in self.sweeps.items()}
        d["filter_results"] = [f.to_dict() for f in self.filters]
        d["worker_noise"] = self.worker_noise.to_dict() if self.worker_noise is not None else None
        d["noise_vs_accuracy"] = {
            ref: {k: r.to_dict() for k, r in regs.items()} for ref, regs in self.regressions.items()
        }
        d["agreement"] = self.agreement
        d["precision"] = self.precision
        d["partition_scores"] = self.partition_scores
        d["systems"] = self.systems
        d["system_scores"] = self.system_scores
        if self.intervals is not None:  # only when asked for: the bootstrap is the report's costliest part
            d["intervals"] = self.intervals.to_dict()
        d["variance_components"] = self.variance_components
        d["resolution"] = self.resolution
        d["reproducibility"] = self.reproducibility
        d["straight_lining"] = self.straight_lining.to_dict() if self.straight_lining is not None else None
        if self.ground_truths is not None:  # only when asked for: GLAD alone takes seconds on 10k labels
            d["ground_truths"] = self.ground_truths
        d["notes"] = dict(self.notes)
        # the long sections are built from .tolist() already; convert the small ones
        for k in (
            "computed_on",
            "counts",
            "accuracy_summary",
            "accuracy_gold_summary",
            "partitions_meta",
            "noise_vs_accuracy",
            "agreement",
            "partition_scores",
            "systems",
            "system_scores",
            "intervals",
            "variance_components",
            "resolution",
            "reproducibility",
            "reasons",
            "ground_truths",
        ):
            if k in d:
                d[k] = py(d[k])
        if d["precision"] is not None:
            d["precision"] = {k: (v if k == "scatter" else py(v)) for k, v in d["precision"].items()}
        for k in NOISE_KEYS + ("system_noise_study",):
            d[k] = py(d[k])
        return d

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), allow_nan=False, **kwargs)

    def to_markdown(self) -> str:
        return render_markdown(self.to_dict())


def full_report(
    matrix,
    *,
    ddof: int = 1,
    sweeps: tuple = ("min",),
    filters: tuple = (),
    k: int | None = None,
    min_scored: int | None = None,
    per_worker: bool = True,
    agreement: bool = True,
    alpha_levels: tuple | None = None,
    predictions: Any = None,
    predictions_b: Any = None,
    second=None,
    campaign: Any = None,
    filter_label: str | None = None,
    computed_at: _dt.datetime | None = None,
    ground_truths: tuple = (),
    k_range: tuple[int, int] | None = None,
    metric: str = "auto",
    bootstrap: int = 0,
    seed: int | None = 0,
) -> AuditReport:
    """Run the whole audit on a matrix.

    Parameters
    ----------
    matrix : LabelMatrix
    ddof : {1, 0}
        1 = sample SD (default), 0 = population SD.
    sweeps : tuple of {"min", "max"}
        Volume-filter sweeps over every threshold 0..max worker count.
    filters : tuple of (kind, threshold)
        Single filters to report exactly, e.g. ``(("min", 60),)``.
    k : int, optional
        Labels per prompt for the partitions (default: the most common count).
    min_scored : int, optional
        Underpowered cut-off for the accuracy; default :func:`audits.engine.accuracy.power_cutoff` of the
        prompts (60, the study's, from 240 prompts up; less on smaller campaigns).
    per_worker : bool
        Per-worker noise and its regression on accuracy (costs a sparse product).
    agreement : bool
        Krippendorff's alpha, Gwet's AC1/AC2 and item precision on the raw labels.
    alpha_levels : tuple, optional
        Alpha levels (default nominal/ordinal/interval for numeric raw labels).
    predictions, predictions_b : mapping {prompt: value}, optional
        A system's predictions: scored per partition (``partition_scores``, against scaled values)
        and, with intervals, overall, per partition and per group (``system_scores["a"]``,
        :func:`audits.engine.systems.system_scores`). With ``predictions_b`` as well,
        ``system_scores["b"]`` and the two systems compared per rater (``systems``,
        :func:`audits.engine.instrument.compare_systems`).
    metric : {"auto", "accuracy", "spearman"}
        How systems are scored; ``"auto"`` (:func:`audits.engine.systems.prediction_metric`) scores
        both systems alike, by Spearman's ρ if either gives graded scores or the labels are ratings.
    second : LabelMatrix, optional
        A second label set over the same prompts (reproducibility).
    campaign, filter_label : optional
        Stated under ``computed_on``.
    computed_at : datetime, optional
        Defaults to now (UTC).
    ground_truths : tuple of {"majority", "dawid_skene", "glad", "mace"}
        Alternative ground truths to infer (:func:`audits.engine.truths.ground_truths`), on
        the raw labels when they have at most ``GROUND_TRUTH_MAX_CATEGORIES`` distinct values, else
        on the scaled values (a note says so). Default none.
    k_range : (k_min, k_max), optional
        Adaptive k: the least and the most labels a prompt gets. Adds ``partitions_by_k``, the
        partitions per final k (:func:`audits.engine.partitions.partitions_by_k`); ``partitions``
        stays the spec's, at ``k``.
    bootstrap : int
        Resamples for ``intervals`` (:func:`audits.engine.intervals.noise_intervals`); 0 (default)
        leaves the key out.
    seed : int or None
        Seed of the bootstrap: the same seed gives the same intervals.

    Returns
    -------
    AuditReport
    """
    ddof = check_ddof(ddof)
    for kind in sweeps:
        if kind not in ("min", "max"):
            raise ValueError(f"sweeps: expected 'min' and/or 'max', got {kind!r}")
    notes: dict = {}
    audit = noise_audit(matrix, ddof=ddof)
    when = computed_at or _dt.datetime.now(_dt.UTC)
    computed_on = _computed_on(matrix, audit, campaign=campaign, filter_label=filter_label, when=when)
    counts = _counts(matrix)
    acc, acc_gold = _accuracies(matrix, min_scored, notes)
    parts = noise_partitions(matrix, k=k)
    if not matrix.is_binary:
        notes["partitions"] = "labels are not binary: minority count = k − count of the modal value"
    sw = {kind: volume_sweep(matrix, kind, ddof=ddof) for kind in sweeps}
    flt = _volume_filters(matrix, filters, ddof)
    wn, regs = _worker_noise(matrix, acc, acc_gold, ddof) if per_worker and matrix.n_labels else (None, {})
    agree, prec = _agreement(matrix, alpha_levels, ddof, notes) if agreement and matrix.n_labels else (None, None)
    pscores = systems = repro = sys_scores = raters = None
    if predictions is not None:
        pscores, sys_scores, raters, systems = _systems(matrix, predictions, predictions_b, metric=metric, k=k)
    if second is not None:
        repro = reproducibility(matrix, second, ddof=ddof).to_dict()
    truths = _ground_truths(matrix, ground_truths, notes) if ground_truths else None
    by_k = None
    if k_range is not None:
        k_min, k_most = k_range
        by_k = partitions_by_k(matrix, k_min=k_min, k_max=k_most)
    intervals = noise_intervals(matrix, n_resamples=bootstrap, seed=seed, ddof=ddof) if bootstrap else None
    return AuditReport(
        audit,
        computed_on,
        counts,
        acc,
        acc_gold,
        parts,
        sw,
        flt,
        wn,
        regs,
        agree,
        prec,
        pscores,
        systems,
        repro,
        notes,
        straight_lining(matrix),
        truths,
        by_k,
        sys_scores,
        intervals,
        variance_components(matrix),
        resolution(matrix, per_rater=raters),
    )


# The report's steps, in the order full_report takes them (``notes`` keeps that order too).


def _accuracies(matrix, min_scored: int | None, notes: dict) -> tuple:
    """Leave-one-out accuracy against the others' mode, and against gold when prompts have it."""
    acc = loo_accuracy(matrix, min_scored=min_scored)
    acc_gold = gold_accuracy(matrix, min_scored=min_scored) if matrix.has_gold else None
    if acc_gold is None:
        notes["accuracy_gold"] = "no gold labels"
    return acc, acc_gold


def _worker_noise(matrix, acc, acc_gold, ddof: int) -> tuple:
    """Per-worker noise and its regressions on each accuracy: ``(worker noise, {reference: regression})``."""
    wn = worker_noise(matrix, ddof=ddof)
    regs = {"loo_mode": noise_accuracy_regression(wn, acc)}
    if acc_gold is not None:
        regs["gold"] = noise_accuracy_regression(wn, acc_gold)
    return wn, regs


def _agreement(matrix, alpha_levels: tuple | None, ddof: int, notes: dict) -> tuple:
    """Agreement coefficients, and item precision where raw labels are numbers: ``(agreement, precision)``."""
    agree, prec = agreement_section(matrix, levels=alpha_levels), None
    if matrix.raw_levels is None:
        prec = item_precision(matrix, ddof=ddof).to_dict()
    else:
        notes["precision"] = "raw labels are categories without numeric values"
    return agree, prec


def _systems(matrix, predictions, predictions_b, *, metric: str, k: int | None) -> tuple:
    """One or two systems scored: ``(partition scores, {"a"/"b": scores}, per-rater scores, comparison)``;
    the comparison is None for one system."""
    pscores = score_partitions(matrix, predictions, k=k).to_dict()
    given = (predictions,) if predictions_b is None else (predictions, predictions_b)
    if metric == "auto":
        metric = prediction_metric(matrix, *given)
    sys_scores = {name: system_scores(matrix, p, metric=metric, k=k) for name, p in zip("ab", given)}
    raters = per_rater_scores(matrix, *given, metric=metric)
    systems = None
    if predictions_b is not None:
        systems = compare_systems(matrix, predictions, predictions_b, metric=metric).to_dict()
    return pscores, sys_scores, raters, systems


#: Raw labels with more distinct values than this (a 0–100 slider, say) are not categories: the
#: alternative ground truths are then inferred on the scaled values.
GROUND_TRUTH_MAX_CATEGORIES = 11


def _ground_truths(matrix, methods: tuple, notes: dict) -> dict:
    """The ``ground_truths`` section: each method's labels and gold accuracy, plus what it adds."""
    values = "raw"
    if len(np.unique(matrix.raw)) > GROUND_TRUTH_MAX_CATEGORIES:
        values = "scaled"
        notes["ground_truths"] = (
            f"more than {GROUND_TRUTH_MAX_CATEGORIES} distinct raw values: inferred on the scaled values"
        )
    return ground_truth_section(matrix, methods=methods, values=values)


def _computed_on(matrix, audit: NoiseAudit, *, campaign: Any, filter_label: str | None, when: _dt.datetime) -> dict:
    """What the report was computed on: the matrix's source and size, when, the SD and the scale."""
    last_label_at = None
    if matrix.created_at is not None and len(matrix.created_at):
        try:
            vals = [v for v in matrix.created_at if v is not None and str(v) != ""]
            last_label_at = str(max(vals)) if vals else None
        except TypeError:
            last_label_at = None
    return {
        "source": matrix.source,
        "campaign": py(campaign),
        "filter": filter_label,
        "n_workers": matrix.n_workers,
        "n_prompts": matrix.n_prompts,
        "n_labels": matrix.n_labels,
        "computed_at": when.isoformat(),
        "last_label_at": last_label_at,
        "sd": audit.sd,
        "scale": matrix.scale.to_dict(),
    }


def _counts(matrix) -> dict:
    """Dropped values, gold, labels per worker and per prompt, and how often each scaled value occurs."""
    wc, pc = matrix.worker_counts, matrix.prompt_counts
    return {
        "n_invalid": matrix.n_invalid,
        "n_missing": matrix.n_missing,
        "n_invalid_or_missing": matrix.n_invalid + matrix.n_missing,
        "n_gold_invalid": matrix.n_gold_invalid,
        "n_prompts_with_gold": int(np.isfinite(matrix.gold).sum()),
        "labels_per_worker": _summary(wc),
        "labels_per_prompt": _summary(pc),
        "scaled_values": {str(py(v)): int(n) for v, n in zip(*np.unique(matrix.value, return_counts=True))},
        "binary": matrix.is_binary,
    }


def _volume_filters(matrix, filters: tuple, ddof: int) -> list[FilterResult]:
    """The single volume filters asked for, as ``(kind, threshold)`` pairs; ValueError naming ``filters``."""
    flt: list[FilterResult] = []
    for kind, t in filters:
        if kind not in ("min", "max"):
            raise ValueError(f"filters: kind must be 'min' or 'max', got {kind!r}")
        flt.append(volume_filter(matrix, **({"min_labels": t} if kind == "min" else {"max_labels": t}), ddof=ddof))
    return flt
