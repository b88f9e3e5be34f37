"""The full audit report as plain data, and its Markdown rendering.

:func:`full_report` runs every analysis of ``noise-audit.md`` on one matrix and returns an
:class:`AuditReport`; :meth:`AuditReport.to_dict` gives the JSON the dashboard, the API and the
``audit`` command serialise, with the spec's fixed top-level keys (``level_noise`` …
``system_noise_mod``, ``residual``, ``n_workers``, ``n_prompts``, ``n_labels``, ``sd``,
``accuracy``, ``accuracy_gold``, ``partitions``) and further sections under their own keys (among
them ``straight_lining``, :mod:`audits.engine.flags`).
:func:`render_markdown` renders such a dict (so a stored report can be rendered again).
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
from audits.engine.glossary import NUMBERS, agreement_name, agreement_reading
from audits.engine.instrument import compare_systems, item_precision, reproducibility
from audits.engine.noise import NOISE_KEYS, NoiseAudit, WorkerNoise, noise_audit, worker_noise
from audits.engine.partitions import Partitions, noise_partitions, partitions_by_k, score_partitions
from audits.engine.truths import ground_truths as ground_truth_section

__all__ = ["AuditReport", "full_report", "render_markdown", "REPORT_KEYS"]

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
        A system's predictions (scored per partition); with ``predictions_b`` as well, the two
        systems are compared per rater.
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
    acc = loo_accuracy(matrix, min_scored=min_scored)
    acc_gold = gold_accuracy(matrix, min_scored=min_scored) if matrix.has_gold else None
    if acc_gold is None:
        notes["accuracy_gold"] = "no gold labels"
    parts = noise_partitions(matrix, k=k)
    if not matrix.is_binary:
        notes["partitions"] = "labels are not binary: minority count = k − count of the modal value"
    sw = {kind: volume_sweep(matrix, kind, ddof=ddof) for kind in sweeps}
    flt = _volume_filters(matrix, filters, ddof)
    wn = None
    regs: dict = {}
    if per_worker and matrix.n_labels:
        wn = worker_noise(matrix, ddof=ddof)
        regs["loo_mode"] = noise_accuracy_regression(wn, acc)
        if acc_gold is not None:
            regs["gold"] = noise_accuracy_regression(wn, acc_gold)
    agree = prec = None
    if agreement and matrix.n_labels:
        agree = agreement_section(matrix, levels=alpha_levels)
        if matrix.raw_levels is None:
            prec = item_precision(matrix, ddof=ddof).to_dict()
        else:
            notes["precision"] = "raw labels are categories without numeric values"
    pscores = systems = repro = None
    if predictions is not None:
        pscores = score_partitions(matrix, predictions, k=k).to_dict()
        if predictions_b is not None:
            systems = compare_systems(matrix, predictions, predictions_b).to_dict()
    if second is not None:
        repro = reproducibility(matrix, second, ddof=ddof).to_dict()
    truths = _ground_truths(matrix, ground_truths, notes) if ground_truths else None
    by_k = None
    if k_range is not None:
        k_min, k_most = k_range
        by_k = partitions_by_k(matrix, k_min=k_min, k_max=k_most)
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
    )


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


# --------------------------------------------------------------------------------------- markdown
def _f(x: Any, nd: int = 4) -> str:
    if x is None:
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return str(x)


_NAMES = {m.key: f"{m.name} ({m.symbol}{'_' + m.sub if m.sub else ''})" if m.symbol else m.name for m in NUMBERS}


def _table(head: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    out += ["| " + " | ".join(_f(c) for c in r) + " |" for r in rows]
    return out


def render_markdown(report: dict, *, max_rows: int = 40) -> str:
    """Render a report dict (from :meth:`AuditReport.to_dict`) as Markdown.

    Long lists (workers, sweep thresholds) are cut to ``max_rows`` rows with a note saying so. When
    ``computed_on`` has a ``"watermark"`` (the live audit's snapshots set it), the header states it.
    """
    r = report
    lines = ["# Noise audit", ""]
    lines += _md_computed_on(r)
    lines += _md_six_numbers(r)
    lines += _md_partitions(r)
    lines += _md_accuracy(r, max_rows)
    lines += _md_sweeps(r, max_rows)
    lines += _md_filter_results(r)
    lines += _md_regressions(r)
    lines += _md_straight_lining(r, max_rows)
    lines += _md_agreement(r)
    lines += _md_instrument(r)
    lines += _md_ground_truths(r)
    notes = r.get("notes") or {}
    if notes:
        lines += ["", "## Notes", ""] + [f"- {k}: {v}" for k, v in notes.items()]
    return "\n".join(lines) + "\n"


def _md_computed_on(r: dict) -> list[str]:
    """The header: what was audited, when, with which SD (and the snapshot's watermark, if any)."""
    on = r.get("computed_on") or {}
    what = on.get("campaign") or on.get("source") or "labels"
    watermark = f" (watermark: {on['watermark']} counted label rows)" if "watermark" in on else ""
    lines = [
        f"Computed on **{what}**"
        + (f", filter {on['filter']}" if on.get("filter") else "")
        + f": {r['n_workers']} workers, {r['n_prompts']} prompts, {r['n_labels']} labels; "
        f"{r['sd']} SD; at {on.get('computed_at', '—')}{watermark}."
    ]
    c = r.get("counts") or {}
    if c:
        lines.append(f"Invalid / missing values: {c.get('n_invalid', 0)} / {c.get('n_missing', 0)} (not audited).")
    return lines


def _md_six_numbers(r: dict) -> list[str]:
    """The six numbers (with the reason for each undefined one), the study's system noise, the counts."""
    lines = ["", "## The six numbers", ""]
    rows = []
    for k in NOISE_KEYS:
        v = r.get(k)
        rows.append([_NAMES[k], _f(v, 5) if v is not None else f"undefined: {r.get('reasons', {}).get(k, '')}"])
    lines += _table(["number", "value"], rows)
    if r.get("system_noise_study") is not None:
        lines += ["", f'The study\'s "system noise" sqrt(LN² + PN_orig²) = {r["system_noise_study"]:.5f}.']
    c = r.get("counts") or {}
    if c:
        lw, lp = c["labels_per_worker"], c["labels_per_prompt"]
        lines += ["", "## Counts", ""]
        lines += _table(
            ["", "min", "median", "mean", "max"],
            [
                ["labels per worker", lw["min"], lw["median"], lw["mean"], lw["max"]],
                ["labels per prompt", lp["min"], lp["median"], lp["mean"], lp["max"]],
            ],
        )
    return lines


def _md_partitions(r: dict) -> list[str]:
    pm = r.get("partitions_meta") or {}
    lines = ["", f"## Noise partitions (prompts with k = {pm.get('k', '?')} labels)", ""]
    lines += _table(["minority count", "prompts"], [[d, n] for d, n in r.get("partitions", {}).items()])
    if pm.get("n_prompts_other"):
        lines.append(f"\n{pm['n_prompts_other']} prompts have another label count and are not partitioned.")
    by_k = r.get("partitions_by_k")
    if by_k:
        widest = max(len(parts) for parts in by_k.values())
        lines += ["", "## Noise partitions per final k (adaptive k)", ""]
        lines += _table(
            ["final k", "prompts", *(f"minority {d}" for d in range(widest))],
            [[k, sum(parts.values()), *(parts.get(str(d), "") for d in range(widest))] for k, parts in by_k.items()],
        )
    return lines


def _md_accuracy(r: dict, max_rows: int) -> list[str]:
    """Leave-one-worker-out accuracy and accuracy against gold: summary line and per-worker table."""
    lines: list[str] = []
    for key, title in (
        ("accuracy", "Leave-one-worker-out accuracy (vs. mode of the others)"),
        ("accuracy_gold", "Accuracy against gold"),
    ):
        rows_acc = r.get(key) or []
        summ = r.get(key + "_summary") or {}
        lines += ["", f"## {title}", ""]
        if not rows_acc:
            lines.append((r.get("notes") or {}).get(key, "No worker could be scored."))
            continue
        rule = summ.get("min_scored_rule")
        lines.append(
            f"{summ.get('n_workers_scored')} workers scored; pooled accuracy {_f(summ.get('pooled_accuracy'))}; "
            f"{summ.get('n_underpowered')} underpowered (N < {summ.get('min_scored_for_power')}"
            + (f" = {rule}" if rule and rule != "fixed" else "")
            + "); "
            f"skipped: {summ.get('skipped_ties', 0)} ties, {summ.get('skipped_alone', 0)} prompts nobody else labeled."
        )
        lines.append("")
        show = rows_acc[:max_rows]
        lines += _table(
            ["worker", "labels", "N", "accuracy", "95% normal", "95% Wilson"],
            [
                [
                    e["worker"],
                    e["n_labels"],
                    e["n_scored"],
                    e["accuracy"],
                    f"{e['ci_normal'][0]:.3f}–{e['ci_normal'][1]:.3f}",
                    f"{e['ci_wilson'][0]:.3f}–{e['ci_wilson'][1]:.3f}",
                ]
                for e in show
            ],
        )
        if len(rows_acc) > len(show):
            lines.append(f"\n({len(rows_acc) - len(show)} more workers in the JSON report.)")
    return lines


def _md_sweeps(r: dict, max_rows: int) -> list[str]:
    """Each volume-filter sweep, at the thresholds where the kept set changes (at most ``max_rows``)."""
    lines: list[str] = []
    for kind, sw in (r.get("filters") or {}).items():
        lines += ["", f"## {'Minimum' if kind == 'min' else 'Maximum'}-labels filter sweep", ""]
        thr = sw["threshold"]
        # rows where something changes
        keep = [i for i in range(len(thr)) if i == 0 or sw["labels_kept"][i] != sw["labels_kept"][i - 1]]
        if len(keep) > max_rows:
            step = len(keep) / max_rows
            keep = [keep[int(j * step)] for j in range(max_rows)]
        dist_keys = list(sw["prompt_distribution"].keys())
        head = [
            "t",
            "workers",
            "labels",
            "% labels",
            "LN",
            "PN_orig",
            "PN_mod",
            "SN_orig",
            "SN_mod",
            "residual",
            "prompts by labels left (" + ",".join(dist_keys) + ")",
        ]
        lines += _table(
            head,
            [
                [
                    thr[i],
                    sw["workers_kept"][i],
                    sw["labels_kept"][i],
                    sw["labels_kept_pct"][i],
                    *(
                        sw[k][i]
                        for k in (
                            "level_noise",
                            "pattern_noise_orig",
                            "pattern_noise_mod",
                            "system_noise_orig",
                            "system_noise_mod",
                            "residual",
                        )
                    ),
                    "/".join(str(sw["prompt_distribution"][d][i]) for d in dist_keys),
                ]
                for i in keep
            ],
        )
        lines.append("\n(Rows where the kept set changes; every threshold is in the JSON report.)")
    return lines


def _md_filter_results(r: dict) -> list[str]:
    lines: list[str] = []
    for f in r.get("filter_results") or []:
        lines += ["", f"## Filter {f['kind']} {f['threshold']}", ""]
        lines += _table(["number", "value"], [[_NAMES[k], f[k]] for k in NOISE_KEYS])
        lines.append(
            f"\nWorkers kept {f['workers_kept']}, labels kept {f['labels_kept']} ({f['labels_kept_pct']:.1f} %)."
        )
    return lines


def _md_regressions(r: dict) -> list[str]:
    lines: list[str] = []
    nva = r.get("noise_vs_accuracy") or {}
    for ref, regs in nva.items():
        lines += ["", f"## Worker accuracy ({ref}) regressed on per-worker noise", ""]
        lines += _table(
            ["noise", "n", "slope", "intercept", "r²", "F", "p"],
            [
                [k, g["n"], g["slope"], g["intercept"], g["r2"], g["f"], g["p"]]
                if g["slope"] is not None
                else [k, g["n"], g["reason"], "", "", "", ""]
                for k, g in regs.items()
            ],
        )
    return lines


def _md_straight_lining(r: dict, max_rows: int) -> list[str]:
    sl = r.get("straight_lining")
    if sl is None:
        return []
    rule = sl["rule"]
    lines = [
        "",
        "## Straight-lining (one answer to nearly everything)",
        "",
        f"Flagged: at least {rule['min_labels']} labels, "
        f"one value on at least {rule['min_share'] * 100:.0f} % of them, "
        f"and a binomial tail below {rule['alpha']} against that value's share among the other workers' labels.",
        "",
    ]
    if sl["workers"]:
        lines += _table(
            ["worker", "labels", "reason", "p"],
            [[e["worker"], e["n_labels"], e["reason"], f"{e['p']:.2g}"] for e in sl["workers"][:max_rows]],
        )
    else:
        lines.append("No worker is flagged.")
    return lines


def _md_agreement(r: dict) -> list[str]:
    ag = r.get("agreement")
    if not ag:
        return []
    lines = [
        "",
        "## Agreement (raw labels)",
        "",
        "Krippendorff's reading: ≥ 0.8 reliable, 0.667–0.8 tentative, below 0.667 not reliable.",
        "",
    ]
    rows = []
    for k, v in ag.items():
        if isinstance(v, dict) and "value" in v:
            rows.append(
                [
                    agreement_name(k),
                    v["value"] if v["value"] is not None else f"undefined: {v.get('reason')}",
                    agreement_reading(v["value"]) or "",
                    v.get("n_units"),
                    v.get("n_labels", ""),
                ]
            )
    lines += _table(["coefficient", "value", "reading", "prompts", "labels"], rows)
    return lines


def _md_instrument(r: dict) -> list[str]:
    """Instrument precision, a system scored per partition, two systems compared, reproducibility."""
    lines: list[str] = []
    pr = r.get("precision")
    if pr:
        lines += [
            "",
            "## Instrument precision",
            "",
            f"Item SD of raw labels ({pr['sd']} SD): mean {_f(pr['mean_item_sd'])}, SD {_f(pr['sd_item_sd'])} "
            f"over {pr['n_items_with_sd']} of {pr['n_items']} prompts.",
        ]
    ps = r.get("partition_scores")
    if ps:
        lines += ["", "## System scored per partition", ""]
        lines += _table(
            ["minority", "prompts", "acc. vs modal", "N modal", "acc. vs gold", "N gold"],
            [
                [d, s["n_prompts"], s["accuracy_modal"], s["n_modal"], s["accuracy_gold"], s["n_gold"]]
                for d, s in ps["partitions"].items()
            ],
        )
        lines.append("")
        lines += _table(
            ["reference", "partitions", "z", "p"],
            [
                [t["reference"], f"{t['a']} vs {t['b']}", t["z"], t["p"] if t["p"] is not None else t["reason"]]
                for t in ps["tests"]
            ],
        )
    sy = r.get("systems")
    if sy:
        lines += [
            "",
            "## Can the instrument tell the two systems apart?",
            "",
            f"{sy['n_raters']} raters; mean per-rater score A {_f(sy['mean_a'])}, B {_f(sy['mean_b'])}; "
            f"t = {_f(sy['t'])}, p = {_f(sy['p'])}: {sy['verdict']}.",
        ]
    rp = r.get("reproducibility")
    if rp:
        lines += [
            "",
            "## Reproducibility",
            "",
            f"{rp['n_common']} common prompts; Spearman of item means {_f(rp['spearman_means'])}, "
            f"Pearson of item SDs {_f(rp['pearson_sds'])}; alpha ({rp['alpha_level']}) "
            f"{_f(rp['alpha_a'])} vs {_f(rp['alpha_b'])}.",
        ]
    return lines


def _md_ground_truths(r: dict) -> list[str]:
    truths = r.get("ground_truths")
    if not truths:
        return []
    methods = list(truths)
    rows = [
        [m, t.get("accuracy_gold"), t.get("n_gold"), *("—" if o == m else t.get("changes", {}).get(o) for o in methods)]
        for m, t in truths.items()
    ]
    lines = ["", "## Alternative ground truths", ""]
    lines += _table(["method", "acc. vs gold", "N gold", *(f"differs from {o}" for o in methods)], rows)
    ties = truths.get("majority", {}).get("n_ties")
    if ties:
        lines += [
            "",
            f"Majority vote settled {ties} ties by its rule: the label given most often overall, then the smallest.",
        ]
    return lines
