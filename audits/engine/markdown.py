"""The Markdown rendering of a full audit report: :func:`render_markdown` turns the dict of
:meth:`audits.engine.report.AuditReport.to_dict` (or a stored one) into headed sections and tables."""

from __future__ import annotations

from typing import Any

from audits.engine.glossary import NUMBERS, agreement_name, agreement_reading
from audits.engine.noise import NOISE_KEYS

__all__ = ["render_markdown"]


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
    unit = r.get("unit_scale")
    if unit:  # a rating scale with a binarization map: the same six numbers on its unit scale
        lines += ["", f"## The six numbers on the {unit['view']}: {unit['scale']}", ""]
        lines += _table(
            ["number", "value"],
            [[_NAMES[k], _f(unit[k], 5) if unit.get(k) is not None else "undefined"] for k in NOISE_KEYS],
        )
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
    for name, sc in (r.get("system_scores") or {}).items():
        lines += ["", f"## System {name.upper()} ({sc['metric']}, {round(sc['level'] * 100)} % intervals)", ""]
        refs = list(sc["overall"])
        cells = [("overall", sc["overall"])] + [(f"minority {d}", row) for d, row in sc["partitions"].items()]
        cells += [(f"group {g}", row) for g, row in (sc.get("groups") or {}).items()]
        lines += _table(
            ["prompts", *(f"vs {ref}" for ref in refs), *(f"N {ref}" for ref in refs)],
            [[label, *(_score(row[ref]) for ref in refs), *(row[ref]["n"] for ref in refs)] for label, row in cells],
        )
        pr = sc["per_rater"]
        lines += [
            "",
            f"Per rater ({pr['n_raters']}): min {_f(pr['min'])}, max {_f(pr['max'])}, mean {_f(pr['mean'])}, "
            f"SD {_f(pr['sd'])}.",
        ]
    sy = r.get("systems")
    if sy:
        lines += [
            "",
            "## Can the instrument tell the two systems apart?",
            "",
            f"{sy['n_raters']} raters scored by {sy.get('metric', 'accuracy')}; mean per-rater score "
            f"A {_f(sy['mean_a'])}, B {_f(sy['mean_b'])}; t = {_f(sy['t'])}, p = {_f(sy['p'])}: {sy['verdict']}.",
        ]
    iv = r.get("intervals")
    if iv:
        head = f"{iv['method']}; {iv['n_resamples']} resamples, seed {iv['seed']}."
        lines += ["", f"## {round(iv['level'] * 100)} % intervals of the six numbers", "", head, ""]
        lines += _table(
            ["number", "low", "high"],
            [[_NAMES.get(k, k), *(iv[k] or [None, None])] for k in NOISE_KEYS],
        )
    vc = r.get("variance_components")
    if vc and vc.get("reason") is None:
        lines += [
            "",
            "## Variance components",
            "",
            f"{vc['method']}: worker {_f(vc['worker'])}, prompt {_f(vc['prompt'])}, "
            f"residual {_f(vc['residual'])} ({vc['values']} values).",
        ]
    res = r.get("resolution")
    if res and res["prompts"]["least_significant"] is not None:
        rp, rs = res["prompts"], res.get("systems")
        text = f"Two prompts of {rp['k']} labels differ detectably above {_f(rp['least_significant'])}"
        if rs and rs["least_significant"] is not None:
            text += f"; two systems' mean per-rater scores above {_f(rs['least_significant'])}"
        lines += ["", "## Resolution", "", text + f" ({res['method']})."]
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


def _score(cell: dict) -> str:
    """A score with its interval (Wilson for accuracy, Fisher z for Spearman)."""
    ci = cell.get("ci_wilson", cell.get("ci"))
    if cell["score"] is None:
        return "—"
    return f"{cell['score']:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


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
