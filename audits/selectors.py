"""Reads of the live audit: the label matrix from the database, the cheap audit from the statistics,
snapshots and their history, the dashboard's tables.

Every number comes from the audit engine (``audits.noise``, ``audits.report``); these functions only
gather its inputs from the database and shape its outputs for the dashboard.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from datetime import timedelta

import numpy as np
from django.db.models import Sum
from django.utils import timezone

from annotation.models import Campaign, Label, Prompt, Worker
from annotation.selectors import Progress
from audits.accuracy import UNDERPOWERED_N
from audits.flags import straight_lining_binary
from audits.glossary import agreement_name, agreement_reading
from audits.matrix import LabelMatrix
from audits.models import AuditSnapshot, AuditStats, UnitAuditStats, UnitStateCount, WorkerAuditStats
from audits.noise import noise_from_stats
from audits.services import audit_setting, campaign_prompt_count, campaign_totals

# An audit unit of a per-option prompt is coded prompt_pk * OPTION_BASE + option (options < 1024).
OPTION_BASE = 1024


def unit_name(external_id: str, option: int) -> str:
    """The unit's name in exports and reports: the prompt's id, or ``<id>#<option>``."""
    return external_id if option == 0 else f"{external_id}#{option}"


# ---------------------------------------------------------------------------------- the matrix
def campaign_label_matrix(*, campaign: Campaign) -> tuple[LabelMatrix, int]:
    """The campaign's label matrix (through the engine's ``LabelMatrix.from_triples``) and its
    watermark (the number of label rows it was built from).

    The labels come from one query, so they are a consistent set whatever is being submitted
    meanwhile. Units are named as in the label export (``<external id>`` or ``<external id>#<n>``);
    workers by their public id (``<channel>:<id>``); gold comes from the prompts; raw values go
    through the campaign's binarization map (values it leaves out are counted invalid).
    """
    rows = list(Label.objects.counted().filter(campaign=campaign).values_list("worker_id", "prompt_id", "value"))
    watermark = len(rows)
    per_option = campaign.schema == Campaign.Schema.OPTION_RATING
    prompts = {pk: (ext, gold) for pk, ext, gold in Prompt.objects.filter(campaign=campaign).values_list("pk", "external_id", "gold")}
    if per_option:
        workers, units, values = [], [], []
        for worker_id, prompt_id, value in rows:
            for number, raw in enumerate(value, start=1):
                workers.append(worker_id)
                units.append(prompt_id * OPTION_BASE + number)
                values.append(raw)
        gold = {}
        for pk, (_, g) in prompts.items():
            if isinstance(g, list):
                for number, raw in enumerate(g, start=1):
                    if raw is not None:
                        gold[pk * OPTION_BASE + number] = raw
    else:
        workers = np.fromiter((r[0] for r in rows), dtype=np.int64, count=watermark)
        units = np.fromiter((r[1] * OPTION_BASE for r in rows), dtype=np.int64, count=watermark)
        values = np.array([r[2] for r in rows]) if rows else np.zeros(0)
        gold = {pk * OPTION_BASE: g for pk, (_, g) in prompts.items() if g is not None and not isinstance(g, list)}
    matrix = LabelMatrix.from_triples(
        np.asarray(workers, dtype=np.int64), np.asarray(units, dtype=np.int64), values,
        gold=gold or None, binarize=dict(campaign.label_schema.binarization), source=f"campaign {campaign.slug}",
    )
    names = dict(
        (pk, f"{channel}:{ext}")
        for pk, channel, ext in Worker.objects.filter(participations__campaign=campaign).values_list("pk", "channel", "external_id")
    )
    missing = [int(w) for w in matrix.worker_ids if int(w) not in names]
    if missing:
        names.update((pk, f"{c}:{e}") for pk, c, e in Worker.objects.filter(pk__in=missing).values_list("pk", "channel", "external_id"))
    worker_ids = np.array([names[int(w)] for w in matrix.worker_ids], dtype=object)
    prompt_ids = np.array(
        [unit_name(prompts[int(u) // OPTION_BASE][0], int(u) % OPTION_BASE) for u in matrix.prompt_ids], dtype=object
    )
    return dataclasses.replace(matrix, worker_ids=worker_ids, prompt_ids=prompt_ids), watermark


# ---------------------------------------------------------------------------------- the cheap audit
def campaign_sufficient_stats(*, campaign: Campaign, totals) -> dict:
    """The engine's sufficient-statistics arrays, read from the statistics tables.

    The prompt side comes from the unit-state histogram (a handful of rows per shard), expanded to one
    entry per unit for ``noise_from_stats``; the worker side has one row per worker. Call it inside
    one consistent read with ``totals`` (``audits.services.campaign_totals``).
    """
    workers = np.array(
        list(WorkerAuditStats.objects.filter(campaign=campaign, n_units__gt=0).values_list("n_units", "sum", "sumsq")),
        dtype=np.float64,
    ).reshape(-1, 3)
    states = np.array(
        list(
            UnitStateCount.objects.filter(campaign=campaign).values("count", "sum", "sumsq")
            .annotate(n=Sum("n_units")).filter(n__gt=0).order_by("count", "sum", "sumsq")
            .values_list("count", "sum", "sumsq", "n")
        ),
        dtype=np.float64,
    ).reshape(-1, 4)
    repeat = states[:, 3].astype(np.int64)
    return {
        "worker_count": workers[:, 0], "worker_sum": workers[:, 1], "worker_sumsq": workers[:, 2],
        "prompt_count": np.repeat(states[:, 0], repeat), "prompt_sum": np.repeat(states[:, 1], repeat),
        "prompt_sumsq": np.repeat(states[:, 2], repeat),
        "total_count": float(totals.n_units), "total_sum": totals.sum, "total_sumsq": totals.sumsq,
        "_states": states,
    }


def _binary_partitions(states: np.ndarray, k: int) -> dict | None:
    """Units with exactly k labels by minority count min(#1, #0) (the engine's ``noise_partitions``
    on binary units, read off the state histogram); None unless every unit value is 0 or 1."""
    if states.size == 0 or not np.all(states[:, 1] == states[:, 2]):  # Σx² = Σx for integers iff x ∈ {0, 1}
        return None
    out = {str(d): 0 for d in range(k // 2 + 1)}
    for count, total, _, n in states.tolist():
        if int(count) == k:
            d = int(min(total, count - total))
            out[str(d)] += int(n)
    return out


def cheap_audit_data(*, campaign: Campaign, totals) -> dict:
    """The cheap snapshot's data: the six numbers (``noise_from_stats``), progress, partitions.

    Call it inside one consistent read of the statistics, with the totals read there.
    """
    ddof = audit_setting("DDOF")
    arrays = campaign_sufficient_stats(campaign=campaign, totals=totals)
    states = arrays.pop("_states")
    audit = noise_from_stats(ddof=ddof, **arrays)
    progress = Progress(
        n_prompts=campaign_prompt_count(campaign=campaign), k=campaign.k, labels=totals.n_labels,
        prompts_complete=totals.prompts_complete,
    )
    data = audit.to_dict()
    data.update(
        kind=AuditSnapshot.Kind.CHEAP,
        campaign=campaign.slug,
        watermark=totals.n_labels,
        n_invalid=totals.n_invalid,
        computed_at=timezone.now().isoformat(),
        progress={**dataclasses.asdict(progress), "labels_wanted": progress.labels_wanted,
                  "percent": round(progress.percent, 2)},
        units_by_label_count={str(int(c)): int(n) for c, n in _count_hist(states).items()},
        partitions=_binary_partitions(states, campaign.k),
    )
    return data


def _count_hist(states: np.ndarray) -> dict:
    out: dict = {}
    for count, _, _, n in states.tolist():
        out[count] = out.get(count, 0) + n
    return dict(sorted(out.items()))


# ---------------------------------------------------------------------------------- snapshots
def latest_snapshot(*, campaign: Campaign, kind: str = AuditSnapshot.Kind.CHEAP) -> AuditSnapshot | None:
    return AuditSnapshot.objects.filter(campaign=campaign, kind=kind).order_by("-watermark").first()


def snapshot_history(*, campaign: Campaign, kind: str = AuditSnapshot.Kind.CHEAP, max_points: int = 300) -> list[dict]:
    """The time series of the six numbers: at most ``max_points`` snapshots, evenly thinned, oldest first."""
    from audits.noise import NOISE_KEYS

    rows = list(
        AuditSnapshot.objects.filter(campaign=campaign, kind=kind).order_by("watermark").values_list("pk", flat=True)
    )
    if len(rows) > max_points:
        step = (len(rows) - 1) / (max_points - 1)
        rows = sorted({rows[round(i * step)] for i in range(max_points)})
    out = []
    for row in (
        AuditSnapshot.objects.filter(pk__in=rows).order_by("watermark")
        .values("watermark", "computed_at", *(f"data__{k}" for k in NOISE_KEYS))
    ):
        point = {"watermark": row["watermark"], "computed_at": row["computed_at"].isoformat()}
        point.update({k: row[f"data__{k}"] for k in NOISE_KEYS})
        out.append(point)
    return out


def audit_status(*, campaign: Campaign, now=None) -> dict:
    """How current the audit is: labels, labels audited, and whether (and since when) it is stale.

    Stale = some label is not in the latest snapshot and the oldest such label is older than
    ``STALE_AFTER`` seconds (a running recomputation normally catches up well within that).
    """
    now = now or timezone.now()
    stats = AuditStats.objects.filter(campaign=campaign).first()
    totals = campaign_totals(campaign_id=campaign.pk)
    if stats is None:
        return {"labels": 0, "audited_labels": 0, "behind": 0, "rebuilding": False, "rebuilds": 0, "stale": False,
                "stale_since": None, "audited_at": None, "age_seconds": None, "first_unaudited_at": None}
    behind = max(0, totals.n_labels - stats.audited_labels)
    since = (totals.first_unaudited_at or stats.audited_at) if behind else None
    stale = bool(behind and since is not None and (now - since) > timedelta(seconds=audit_setting("STALE_AFTER")))
    return {
        "labels": totals.n_labels,
        "audited_labels": stats.audited_labels,
        "behind": behind,
        "rebuilding": stats.needs_rebuild,
        "rebuilds": stats.rebuilds,
        "first_unaudited_at": since.isoformat() if since else None,
        "stale": stale,
        "stale_since": since.isoformat() if stale else None,
        "audited_at": stats.audited_at.isoformat() if stats.audited_at else None,
        "age_seconds": (now - stats.audited_at).total_seconds() if stats.audited_at else None,
    }


# ---------------------------------------------------------------------------------- dashboard tables
def unit_value_names(campaign: Campaign) -> dict[float, str]:
    """The words a researcher knows the unit values by: the binary answers' texts, or the raw
    ratings the binarization map sends to 0 and to 1 (``{1.0: "3 or 4", 0.0: "1 or 2"}``)."""
    if campaign.schema == Campaign.Schema.BINARY:
        return {1.0: campaign.positive_text, 0.0: campaign.negative_text}
    names = {}
    for unit in (0, 1):
        raws = [str(raw) for raw in sorted(int(raw) for raw, u in campaign.binarization.items() if u == unit)]
        if raws:
            names[float(unit)] = raws[0] if len(raws) == 1 else ", ".join(raws[:-1]) + " or " + raws[-1]
    return names


def worker_table(*, campaign: Campaign, full: dict | None) -> list[dict]:
    """One row per worker: labels, mean unit label and the straight-lining flag (live, from the
    statistics), accuracy against the others and against gold with their intervals (from the latest
    full report), and the flags in words.

    Flags:
    - straight-lining: the engine's rule (``audits.flags``) on each worker's count of 1s among the
      whole campaign's (unit values are 0/1, so the statistics' sum is that count);
    - outlier: the worker's 95 % Wilson interval lies entirely below the pooled leave-one-out accuracy
      of the crowd (the worker agrees with the others significantly less than the crowd does);
    - underpowered: scored on fewer prompts than the report's cut-off (``audits.accuracy.power_cutoff``).
    """
    full = full or {}
    accuracy = {row["worker"]: row for row in full.get("accuracy") or []}
    gold = {row["worker"]: row for row in full.get("accuracy_gold") or []}
    summary = full.get("accuracy_summary") or {}
    pooled = summary.get("pooled_accuracy")
    # Snapshots from before the scaled cut-off lack the key: they used the study's fixed one.
    min_scored = summary.get("min_scored_for_power", UNDERPOWERED_N)
    stats = list(
        WorkerAuditStats.objects.filter(campaign=campaign)
        .values_list("worker__channel", "worker__external_id", "n_labels", "n_units", "n_invalid", "sum")
        .order_by("-n_labels", "worker_id")
    )
    straight = straight_lining_binary([f"{c}:{e}" for c, e, *_ in stats], [r[3] for r in stats], [r[5] for r in stats])
    names = unit_value_names(campaign)
    rows = []
    for i, (channel, ext, n_labels, n_units, n_invalid, total) in enumerate(stats):
        public = f"{channel}:{ext}"
        acc, acc_gold = accuracy.get(public), gold.get(public)
        row = {
            "worker": public, "labels": n_labels, "units": n_units, "invalid": n_invalid,
            "mean": (total / n_units) if n_units else None,
            "accuracy": acc["accuracy"] if acc else None,
            "ci_normal": acc["ci_normal"] if acc else None,
            "ci_wilson": acc["ci_wilson"] if acc else None,
            "n_scored": acc["n_scored"] if acc else 0,
            "accuracy_gold": acc_gold["accuracy"] if acc_gold else None,
            "n_scored_gold": acc_gold["n_scored"] if acc_gold else 0,
        }
        row["underpowered"] = row["n_scored"] < min_scored
        row["outlier"] = bool(acc and pooled is not None and acc["ci_wilson"][1] < pooled)
        row["straight_lining"] = bool(straight.flagged[i])
        flags = []
        if row["straight_lining"]:
            flags.append({"kind": "straight_lining", "text": "straight-lining: " + straight.reason(i, names)})
        if row["outlier"]:
            flags.append({"kind": "outlier", "text": (
                f"outlier: agrees with the others on {acc['accuracy'] * 100:.0f} % of {acc['n_scored']} prompts; "
                f"its 95 % interval ends at {acc['ci_wilson'][1]:.2f}, below the crowd's {pooled:.2f}")})
        if acc and row["underpowered"]:
            flags.append({"kind": "underpowered", "text": f"underpowered: {acc['n_scored']} scored prompts, fewer than {min_scored}"})
        row["flags"] = flags
        rows.append(row)
    return rows


def agreement_rows(agreement: dict | None) -> list[dict]:
    """The report's agreement section as the dashboard lists it: each coefficient's name, value,
    Krippendorff's reading and the prompts and labels it was computed on."""
    return [
        {"key": key, "name": agreement_name(key), "value": v["value"], "reading": agreement_reading(v["value"]),
         "reason": v.get("reason"), "n_units": v.get("n_units"), "n_labels": v.get("n_labels"),
         "n_categories": v.get("n_categories")}
        for key, v in (agreement or {}).items() if isinstance(v, dict) and "value" in v
    ]


def ambiguous_units(*, campaign: Campaign, limit: int = 10) -> list[dict]:
    """The units with the most disagreement (an index scan, not a sort of the campaign) and their labels."""
    units = list(
        UnitAuditStats.objects.filter(campaign=campaign, disagreement__isnull=False)
        .order_by("-disagreement", "-count", "prompt_id", "option")
        .select_related("prompt")[:limit]
    )
    labels: dict[int, list] = {}
    for prompt_id, channel, ext, value in (
        Label.objects.counted().filter(prompt_id__in={u.prompt_id for u in units})
        .order_by("id").values_list("prompt_id", "worker__channel", "worker__external_id", "value")
    ):
        labels.setdefault(prompt_id, []).append((f"{channel}:{ext}", value))
    schema = campaign.label_schema
    out = []
    for u in units:
        text = u.prompt.text
        if u.option and u.option <= len(u.prompt.options):
            text = f"{text} — {u.prompt.options[u.option - 1]}"
        unit_labels = []
        for worker, value in labels.get(u.prompt_id, []):
            raw = value[u.option - 1] if u.option and isinstance(value, list) else value
            unit_labels.append({"worker": worker, "value": raw, "unit": schema.binarize(raw)})
        out.append({
            "unit": unit_name(u.prompt.external_id, u.option), "text": text, "count": u.count,
            "mean": u.sum / u.count if u.count else None, "labels": unit_labels,
        })
    return out


# ---------------------------------------------------------------------------------- the dashboard feed
FULL_SECTIONS = ("filters", "accuracy", "accuracy_summary", "noise_vs_accuracy", "worker_noise", "agreement",
                 "partitions", "partitions_meta", "counts", "reasons", "computed_on", "notes")


def _summary_head(summary: dict | None) -> dict | None:
    """An accuracy summary without its list of underpowered workers (one entry per worker)."""
    return None if summary is None else {k: v for k, v in summary.items() if k != "underpowered"}


def _snapshot_meta(snapshot: AuditSnapshot) -> dict:
    return {"watermark": snapshot.watermark, "computed_at": snapshot.computed_at.isoformat(),
            "duration_ms": round(snapshot.duration_ms, 1), "cpu_ms": round(snapshot.cpu_ms, 1)}


def dashboard_version(*, campaign: Campaign, have_full: int = -1) -> str:
    """A tag that changes whenever :func:`dashboard_data` would say something new (the feed's ETag).

    Built from what the feed is computed from: the latest cheap and full snapshots, the label and
    audit counters (labels, audited labels, a rebuild, staleness — which turns on by the clock
    alone), the campaign's own fields, and the client's ``have_full``. It costs a few indexed
    reads, so an unchanged dashboard is answered without building the feed.
    """
    latest = {
        kind: AuditSnapshot.objects.filter(campaign=campaign, kind=kind).order_by("-watermark")
        .values_list("pk", "watermark").first()
        for kind in (AuditSnapshot.Kind.CHEAP, AuditSnapshot.Kind.FULL)
    }
    status = audit_status(campaign=campaign)
    parts = [campaign.title, campaign.k, campaign.schema, campaign.positive_text, campaign.negative_text,
             campaign.binarization, latest, have_full,
             [status[k] for k in ("labels", "audited_labels", "behind", "rebuilding", "rebuilds", "stale",
                                  "first_unaudited_at")]]
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


def dashboard_data(*, campaign: Campaign, have_full: int = -1) -> dict:
    """Everything the dashboard shows, as JSON. The full report's sections are read and sent only
    when the client does not have that watermark yet (``have_full``), so polling stays light."""
    from audits.noise import NOISE_KEYS

    now = timezone.now()
    cheap = latest_snapshot(campaign=campaign)
    numbers = (*NOISE_KEYS, "n_workers", "n_prompts", "n_labels")
    full = (
        AuditSnapshot.objects.filter(campaign=campaign, kind=AuditSnapshot.Kind.FULL).order_by("-watermark")
        .values("pk", "watermark", "computed_at", "duration_ms", "cpu_ms", "data__accuracy", "data__accuracy_summary",
                "data__accuracy_gold", "data__accuracy_gold_summary", *(f"data__{k}" for k in numbers))
        .first()
    )
    full_out = None
    if full is not None:
        full_out = {"watermark": full["watermark"], "computed_at": full["computed_at"].isoformat(),
                    "duration_ms": round(full["duration_ms"], 1), "cpu_ms": round(full["cpu_ms"], 1),
                    "numbers": {k: full[f"data__{k}"] for k in numbers},
                    "accuracy_summary": _summary_head(full["data__accuracy_summary"]),
                    "accuracy_gold_summary": _summary_head(full["data__accuracy_gold_summary"])}
        if full["watermark"] != have_full:
            data = AuditSnapshot.objects.values_list("data", flat=True).get(pk=full["pk"])
            full_out["report"] = {k: data.get(k) for k in FULL_SECTIONS}
            full_out["agreement"] = agreement_rows(data.get("agreement"))
        accuracy = {k: full[f"data__{k}"] for k in ("accuracy", "accuracy_summary", "accuracy_gold")}
    return {
        "campaign": {"slug": campaign.slug, "title": campaign.title, "k": campaign.k, "schema": campaign.schema},
        "now": now.isoformat(),
        "status": audit_status(campaign=campaign, now=now),
        "cheap": ({**cheap.data, **_snapshot_meta(cheap)} if cheap else None),
        "history": snapshot_history(campaign=campaign),
        "workers": worker_table(campaign=campaign, full=accuracy if full else None),
        "ambiguous": ambiguous_units(campaign=campaign),
        "full": full_out,
    }
