"""Reads of the study's tables and figures (issue 13): several campaigns side by side (Table 2), a
campaign's groups side by side, and the data of Figs. 4–6.

The compare table and the figures read the latest full snapshot (nothing is recomputed per
request); the groups are computed per request from the label matrix with
:func:`audits.engine.figures.group_rows`, since the full report has no per-group section.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from annotation.models import Campaign, Prompt
from audits.conf import audit_setting
from audits.engine.figures import (
    accuracy_by_threshold,
    box_thresholds,
    group_rows,
    matrix_row,
    regression_band,
    table_row,
)
from audits.engine.glossary import NUMBERS
from audits.engine.noise import NOISE_KEYS
from audits.models import AuditSnapshot
from audits.selectors.full import campaign_label_matrix

_NAMES = {m.key: m.name for m in NUMBERS}
#: Table 2's columns after the campaign (or group): (key of ``audits.engine.figures.TABLE_KEYS``, heading).
TABLE_COLUMNS = (
    ("n_workers", "workers"),
    ("n_prompts", "prompts"),
    ("n_labels", "labels"),
    *((k, _NAMES[k]) for k in NOISE_KEYS[:4]),
    # the study's figure, sqrt(LN² + PN²), beside the specification's (flat SD): Table 2 reads off this one
    ("system_noise_study", "System noise (study)"),
    *((k, _NAMES[k]) for k in NOISE_KEYS[4:]),
    ("alpha_nominal", "Krippendorff's α (nominal)"),
    ("accuracy_others", "accuracy vs others"),
    ("accuracy_gold", "accuracy vs gold"),
)
#: The references Fig. 6 regresses accuracy against, as the report names them (``noise_vs_accuracy``).
REFERENCES = ("loo_mode", "gold")
_BAND_POINTS = 40  # x positions of the drawn line and band


def cells(row: dict) -> list:
    """A Table 2 row's values in the order of :data:`TABLE_COLUMNS` (templates cannot look keys up)."""
    return [row.get(k) for k, _ in TABLE_COLUMNS]


def _full(campaign: Campaign, *fields: str) -> dict | None:
    """The latest full snapshot's watermark, time and the given ``data`` keys (read alone: a report's
    per-worker sections are long)."""
    row = (
        AuditSnapshot.objects.filter(campaign=campaign, kind=AuditSnapshot.Kind.FULL)
        .order_by("-watermark")
        .values("watermark", "computed_at", *(f"data__{f}" for f in fields))
        .first()
    )
    if row is None:
        return None
    return {"watermark": row["watermark"], "computed_at": row["computed_at"], **{f: row[f"data__{f}"] for f in fields}}


# ---------------------------------------------------------------------------------- Table 2
def compare_rows(*, campaigns: Sequence[Campaign]) -> list[dict]:
    """One row per campaign, in the order given: ``campaign``, ``row`` (Table 2's numbers from the
    latest full report, ``audits.engine.figures.table_row``; None before the first full audit),
    ``watermark`` and ``computed_at``."""
    fields = (
        *NOISE_KEYS,
        "system_noise_study",
        "n_workers",
        "n_prompts",
        "n_labels",
        "agreement",
        "accuracy_summary",
        "accuracy_gold_summary",
    )
    out = []
    for campaign in campaigns:
        full = _full(campaign, *fields)
        out.append(
            {
                "campaign": campaign,
                "row": table_row(full) if full else None,
                "cells": cells(table_row(full)) if full else None,
                "watermark": full["watermark"] if full else None,
                "computed_at": full["computed_at"] if full else None,
            }
        )
    return out


# ---------------------------------------------------------------------------------- groups
def prompt_groups(*, campaign: Campaign, unit_names: Sequence[str]) -> list[str]:
    """Each unit's group (``Prompt.group``, "" when none): a unit is a prompt's external id, or
    ``<external id>#<option>`` for a per-option rating (``audits.selectors.full.unit_name``)."""
    groups = dict(Prompt.objects.filter(campaign=campaign, is_control=False).values_list("external_id", "group"))
    return [groups[u] if u in groups else groups.get(u.rsplit("#", 1)[0], "") for u in unit_names]


def group_table(*, campaign: Campaign) -> dict:
    """The campaign's groups side by side: ``rows`` (``audits.engine.figures.group_rows`` on the
    current labels), ``whole`` (the same row for the whole campaign), ``n_ungrouped`` (prompts
    without a group) and ``n_labels`` (the labels it was computed on)."""
    matrix, watermark = campaign_label_matrix(campaign=campaign)
    groups = prompt_groups(campaign=campaign, unit_names=[str(u) for u in matrix.prompt_ids])
    ddof = audit_setting("DDOF")
    whole = matrix_row(matrix, ddof=ddof)
    return {
        "rows": [{**r, "cells": cells(r)} for r in group_rows(matrix, groups, ddof=ddof)],
        "whole": {**whole, "cells": cells(whole)},
        "n_ungrouped": sum(1 for g in groups if not g),
        "n_labels": watermark,
    }


# ---------------------------------------------------------------------------------- Figs. 4–6
def figures_data(*, campaign: Campaign) -> dict | None:
    """The data of Figs. 4–6 from the latest full report; None before the first full audit.

    - ``boxes``: Fig. 5, ``[(threshold, accuracies)]`` of the workers the minimum filter keeps at
      each threshold (``audits.engine.figures.accuracy_by_threshold``), against the others and,
      with gold, against gold (``boxes_gold``);
    - ``regressions``: Fig. 6, per reference and noise number: the workers' (noise, accuracy)
      points, the stored least-squares fit, and its line and 95 % band
      (``audits.engine.figures.regression_band``) over the points' noise range;
    - ``gold_vs_others``: Fig. 4, each worker's (accuracy vs gold, accuracy vs others).
    """
    full = _full(campaign, "accuracy", "accuracy_gold", "worker_noise", "noise_vs_accuracy", "sd")
    if full is None:
        return None
    others = full["accuracy"] or []
    gold = full["accuracy_gold"] or []
    counts = [r["n_labels"] for r in others]
    thresholds = box_thresholds(counts)
    noise = {w["worker"]: w for w in full["worker_noise"] or []}
    regressions = []
    for ref in REFERENCES:
        fits = (full["noise_vs_accuracy"] or {}).get(ref)
        if not fits:
            continue
        acc = {r["worker"]: r["accuracy"] for r in (others if ref == "loo_mode" else gold)}
        for key in NOISE_KEYS:
            regressions.append(
                {"reference": ref, "noise": key, "name": _NAMES[key]} | _fit(fits.get(key) or {}, noise, acc, key)
            )
    gold_by_worker = {r["worker"]: r["accuracy"] for r in gold}
    return {
        "watermark": full["watermark"],
        "computed_at": full["computed_at"],
        "sd": full["sd"],
        "thresholds": thresholds,
        "boxes": accuracy_by_threshold(counts, [r["accuracy"] for r in others], thresholds),
        "boxes_gold": (
            accuracy_by_threshold([r["n_labels"] for r in gold], [r["accuracy"] for r in gold], thresholds)
            if gold
            else None
        ),
        "regressions": regressions,
        "gold_vs_others": [
            (gold_by_worker[r["worker"]], r["accuracy"])
            for r in others
            if gold_by_worker.get(r["worker"]) is not None and r["accuracy"] is not None
        ],
    }


def _fit(fit: dict, noise: dict, accuracy: dict, key: str) -> dict:
    """One Fig. 6 panel: the points that entered the stored fit (both values defined), the fit, and
    its line and band; no line when the report gives a reason instead of a fit."""
    points = [
        (noise[w][key], a) for w, a in accuracy.items() if a is not None and w in noise and noise[w][key] is not None
    ]
    out = {"points": points, "fit": fit, "line": None, "band": None}
    if fit.get("slope") is None or len(points) < 3:
        return out
    x = np.array([p[0] for p in points])
    at = np.linspace(x.min(), x.max(), _BAND_POINTS)
    line, lo, hi = regression_band(x, [p[1] for p in points], at)
    out["line"] = list(zip(at.tolist(), line.tolist()))
    out["band"] = list(zip(at.tolist(), lo.tolist(), hi.tolist()))
    return out
