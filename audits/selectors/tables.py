"""The dashboard's tables: one row per worker with their numbers and flags in words, the agreement
coefficients with their readings, and the most ambiguous units with their labels."""

from __future__ import annotations

from django.db.models import Exists, OuterRef

from annotation.models import Campaign, Label, Participation, WorkerAction
from annotation.models.workers import public_worker_id
from audits.engine.accuracy import UNDERPOWERED_N
from audits.engine.glossary import agreement_name, agreement_reading
from audits.models import PendingLabel, UnitAuditStats, WorkerAuditStats
from audits.selectors.full import unit_name

# The live worker-quality numbers (``audits.selectors.worker_numbers``) each row of the workers table carries.
QUALITY_COLUMNS = (
    "bias",
    "bias_ci",
    "n_compared",
    "top_value",
    "top_share",
    "n_controls",
    "n_correct",
    "control_accuracy",
    "control_ci",
    "median_seconds",
    "speed_ratio",
    "excluded",
)


# A worker's standing in the campaign now, from the annotation app (``Participation.blocked_at`` and
# ``excluded_at``, a flag action not undone): each row of the workers table says each.
STANDINGS = ("blocked", "excluded_now", "flagged")


def _standings(campaign: Campaign) -> dict[str, dict]:
    """Each participant's ``worker_pk`` (for the link to their worker page), standings and the reason
    of their newest flag not undone (None without one), by public worker id. Two queries."""
    flags = {}
    for worker_id, reason in (
        WorkerAction.objects.filter(campaign=campaign, kind=WorkerAction.Kind.FLAG, undone_at__isnull=True)
        .order_by("created_at", "pk")
        .values_list("worker_id", "reason")
    ):
        flags[worker_id] = reason  # the newest last
    return {
        public_worker_id(channel, ext): {
            "worker_pk": worker_id,
            "blocked": blocked_at is not None,
            "excluded_now": excluded_at is not None,
            "flagged": worker_id in flags,
            "flag_reason": flags.get(worker_id),
        }
        for worker_id, channel, ext, blocked_at, excluded_at in Participation.objects.filter(
            campaign=campaign
        ).values_list("worker_id", "worker__channel", "worker__external_id", "blocked_at", "excluded_at")
    }


def worker_table(
    *,
    campaign: Campaign,
    full: dict | None,
    straight_lining: dict | None,
    quality: dict | None,
    skill: dict | None = None,
) -> list[dict]:
    """One row per worker: labels and mean scaled value (live, from the statistics), the
    straight-lining flag (from the latest quick snapshot, ``straight_lining``), the worker's quality
    numbers (from the same snapshot, ``quality``: ``worker_numbers``' bias with its interval, the
    most frequent answer's share, control accuracy with its Wilson interval, median seconds per
    label against the campaign's), accuracy against the others and against gold with their
    intervals (from the latest full report, ``full``), Dawid–Skene's skill (from the latest ground
    truths, ``skill``: the probability that the worker's label is the true one), and the flags in
    words. A worker with quality numbers but no audited label (only controls so far, or excluded
    from the audit) gets a row too, after the others.

    Flags:
    - straight-lining: the engine's rule (``audits.engine.flags``), taken with the quick snapshot;
    - control accuracy and too fast: ``audits.engine.workers``' rules, taken with the quick snapshot;
    - outlier: the worker's 95 % Wilson interval lies entirely below the pooled leave-one-out accuracy
      of the crowd (the worker agrees with the others significantly less than the crowd does);
    - underpowered: scored on fewer prompts than the report's cut-off (``audits.engine.accuracy.power_cutoff``);
    - excluded: the worker is excluded from the audit (their labels enter none of its numbers).

    Each row also carries the worker's standing now (``_standings``: ``worker_pk``, ``blocked``,
    ``excluded_now`` — ``excluded`` is the snapshot's, which the audit's numbers follow — ``flagged``
    and ``flag_reason``); a blocked, excluded or flagged participant without a label gets a row too.
    """
    full = full or {}
    accuracy = {row["worker"]: row for row in full.get("accuracy") or []}
    gold = {row["worker"]: row for row in full.get("accuracy_gold") or []}
    summary = full.get("accuracy_summary") or {}
    pooled = summary.get("pooled_accuracy")
    # Snapshots from before the scaled cut-off lack the key: they used the study's fixed one.
    min_scored = summary.get("min_scored_for_power", UNDERPOWERED_N)
    # Quick snapshots saved before they carried the flags have none; the next quick run adds them.
    straight = {entry["worker"]: entry for entry in (straight_lining or {}).get("workers", [])}
    # Quick snapshots saved before they carried worker quality have none; the next quick run adds it.
    live = {entry["worker"]: entry for entry in (quality or {}).get("workers", [])}
    stats = [
        (public_worker_id(channel, ext), n_labels, n_units, n_invalid, total)
        for channel, ext, n_labels, n_units, n_invalid, total in WorkerAuditStats.objects.filter(campaign=campaign)
        .values_list("worker__channel", "worker__external_id", "n_labels", "n_units", "n_invalid", "sum")
        .order_by("-n_labels", "worker_id")
    ]
    listed = {entry[0] for entry in stats}
    stats += [(public, entry["n_labels"], 0, 0, 0.0) for public, entry in live.items() if public not in listed]
    standings = _standings(campaign)
    listed = {entry[0] for entry in stats}
    stats += [
        (public, 0, 0, 0, 0.0)
        for public, standing in standings.items()
        if public not in listed and any(standing[key] for key in STANDINGS)
    ]
    # The statistics hold grid points (audits.selectors.stats.label_units): the mean is on the unit scale.
    divisor = campaign.label_schema.unit_divisor
    rows = []
    for public, n_labels, n_units, n_invalid, total in stats:
        acc, acc_gold, habit, numbers = accuracy.get(public), gold.get(public), straight.get(public), live.get(public)
        row = {
            "worker": public,
            "labels": n_labels,
            "units": n_units,
            "invalid": n_invalid,
            "mean": (total / n_units / divisor) if n_units else None,
            "accuracy": acc["accuracy"] if acc else None,
            "ci_normal": acc["ci_normal"] if acc else None,
            "ci_wilson": acc["ci_wilson"] if acc else None,
            "n_scored": acc["n_scored"] if acc else 0,
            "accuracy_gold": acc_gold["accuracy"] if acc_gold else None,
            "n_scored_gold": acc_gold["n_scored"] if acc_gold else 0,
            **{key: (numbers or {}).get(key) for key in QUALITY_COLUMNS},
            "ds_skill": (skill or {}).get(public),
            **standings.get(public, {"worker_pk": None, **dict.fromkeys(STANDINGS, False), "flag_reason": None}),
        }
        row["underpowered"] = row["n_scored"] < min_scored
        row["outlier"] = bool(acc and pooled is not None and acc["ci_wilson"][1] < pooled)
        row["straight_lining"] = habit is not None
        flags = []
        if habit is not None:
            flags.append({"kind": "straight_lining", "text": "straight-lining: " + habit["reason"]})
        flags += (numbers or {}).get("flags", [])
        if row["outlier"]:
            flags.append(
                {
                    "kind": "outlier",
                    "text": (
                        f"outlier: agrees with the others on {acc['accuracy'] * 100:.0f} % "
                        f"of {acc['n_scored']} prompts; "
                        f"its 95 % interval ends at {acc['ci_wilson'][1]:.2f}, below the crowd's {pooled:.2f}"
                    ),
                }
            )
        if acc and row["underpowered"]:
            flags.append(
                {
                    "kind": "underpowered",
                    "text": f"underpowered: {acc['n_scored']} scored prompts, fewer than {min_scored}",
                }
            )
        if row["excluded"]:
            text = "excluded from the audit: their labels enter none of its numbers"
            flags.append({"kind": "excluded", "text": text})
        row["flags"] = flags
        rows.append(row)
    return rows


# With two answer values every α level equals the nominal one and every AC2 weighting equals AC1, so
# the dashboard lists only these and the κs (nominal at any scale) and says why (the report keeps them all).
BINARY_AGREEMENT = ("alpha_nominal", "gwet_ac1", "cohen_kappa_mean", "fleiss_kappa")
BINARY_AGREEMENT_NOTE = (
    "The answers take two values, so α at every level equals the nominal α and AC2 under "
    "every weighting equals AC1; the report lists them all."
)


def agreement_rows(agreement: dict | None) -> tuple[list[dict], str | None]:
    """The report's agreement section as the dashboard lists it: each coefficient's name, value,
    Krippendorff's reading and the prompts and labels it was computed on; and a note when rows that
    would repeat others were left out (answers with two values: :data:`BINARY_AGREEMENT` only)."""
    rows = [
        {
            "key": key,
            "name": agreement_name(key),
            "value": v["value"],
            "reading": agreement_reading(v["value"]),
            "reason": v.get("reason"),
            "n_units": v.get("n_units"),
            "n_labels": v.get("n_labels"),
            "n_categories": v.get("n_categories"),
        }
        for key, v in (agreement or {}).items()
        if isinstance(v, dict) and "value" in v
    ]
    if rows and all(r["n_categories"] is not None and r["n_categories"] <= 2 for r in rows):
        return [r for r in rows if r["key"] in BINARY_AGREEMENT], BINARY_AGREEMENT_NOTE
    return rows, None


def ambiguous_units(*, campaign: Campaign, limit: int = 10) -> list[dict]:
    """The units with the most disagreement (an index scan, not a sort of the campaign) and their
    audited labels that the statistics hold (``Label.objects.audited()``, less those that wait for the
    quick run's fold)."""
    units = list(
        UnitAuditStats.objects.filter(campaign=campaign, disagreement__isnull=False)
        .order_by("-disagreement", "-count", "prompt_id", "option")
        .select_related("prompt")[:limit]
    )
    labels: dict[int, list] = {}
    for prompt_id, channel, ext, value in (
        Label.objects.audited()
        .filter(prompt_id__in={u.prompt_id for u in units})
        .exclude(Exists(PendingLabel.objects.filter(label_id=OuterRef("pk"))))
        .order_by("id")
        .values_list("prompt_id", "worker__channel", "worker__external_id", "value")
    ):
        labels.setdefault(prompt_id, []).append((public_worker_id(channel, ext), value))
    schema = campaign.label_schema
    out = []
    for u in units:
        text = u.prompt.text
        if u.option and u.option <= len(u.prompt.options):
            text = f"{text} — {u.prompt.options[u.option - 1]}"
        unit_labels = []
        for worker, value in labels.get(u.prompt_id, []):
            raw = value[u.option - 1] if u.option and isinstance(value, list) else value
            unit_labels.append({"worker": worker, "value": raw, "scaled": schema.unit_value(raw)})
        out.append(
            {
                "unit": unit_name(u.prompt.external_id, u.option),
                "text": text,
                "count": u.count,
                "mean": u.sum / u.count / schema.unit_divisor if u.count else None,  # on the unit scale
                "labels": unit_labels,
            }
        )
    return out
