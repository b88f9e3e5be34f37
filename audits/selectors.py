"""Reads of the live audit: the running statistics and their totals, the label matrix, the quick
audit, the full audit's cadence, snapshots and their history, the dashboard's feed.

Every number comes from the audit engine (``audits.engine``); these functions only gather its
inputs from the database and shape its outputs for the dashboard. They write nothing (writes are in
``audits.services``, which calls them) and read the settings from ``audits.conf``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from datetime import datetime, timedelta

import numpy as np
from django.db import connection, transaction
from django.db.models import Count, IntegerField, Min, Q, Subquery, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.models import Campaign, ImportBatch, Label, Prompt, Worker
from annotation.models.prompts import OPTION_BASE
from annotation.selectors import Progress
from audits.conf import audit_setting
from audits.engine.accuracy import UNDERPOWERED_N
from audits.engine.flags import straight_lining_binary
from audits.engine.glossary import NUMBERS, agreement_name, agreement_reading
from audits.engine.matrix import LabelMatrix
from audits.engine.noise import NOISE_KEYS, noise_from_stats
from audits.engine.report import full_report
from audits.models import AuditSnapshot, AuditStats, AuditStatsShard, UnitAuditStats, UnitStateCount, WorkerAuditStats


def unit_name(external_id: str, option: int) -> str:
    """The unit's name in exports and reports: the prompt's id, or ``<id>#<option>``."""
    return external_id if option == 0 else f"{external_id}#{option}"


# ---------------------------------------------------------------------------------- the matrix
def campaign_label_matrix(*, campaign: Campaign) -> tuple[LabelMatrix, int]:
    """The campaign's label matrix (through the engine's ``LabelMatrix.from_triples``) and its
    watermark (the number of label rows it was built from): its audited labels
    (``Label.objects.audited()``: counted, not controls, no worker excluded from the audit).

    The labels come from one query, so they are a consistent set whatever is being submitted
    meanwhile. Units are named as in the label export (``<external id>`` or ``<external id>#<n>``);
    workers by their public id (``<channel>:<id>``); gold comes from the prompts; raw values go
    through the campaign's binarization map (values it leaves out are counted invalid).
    """
    rows = list(Label.objects.audited().filter(campaign=campaign).values_list("worker_id", "prompt_id", "value"))
    watermark = len(rows)
    per_option = campaign.schema == Campaign.Schema.OPTION_RATING
    prompts = Prompt.objects.filter(campaign=campaign, is_control=False)
    prompts = {pk: (ext, gold) for pk, ext, gold in prompts.values_list("pk", "external_id", "gold")}
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
        np.asarray(workers, dtype=np.int64),
        np.asarray(units, dtype=np.int64),
        values,
        gold=gold or None,
        binarize=dict(campaign.label_schema.binarization),
        source=f"campaign {campaign.slug}",
    )
    names = dict(
        (pk, f"{channel}:{ext}")
        for pk, channel, ext in Worker.objects.filter(participations__campaign=campaign).values_list(
            "pk", "channel", "external_id"
        )
    )
    missing = [int(w) for w in matrix.worker_ids if int(w) not in names]
    if missing:
        names.update(
            (pk, f"{c}:{e}")
            for pk, c, e in Worker.objects.filter(pk__in=missing).values_list("pk", "channel", "external_id")
        )
    worker_ids = np.array([names[int(w)] for w in matrix.worker_ids], dtype=object)
    prompt_ids = np.array(
        [unit_name(prompts[int(u) // OPTION_BASE][0], int(u) % OPTION_BASE) for u in matrix.prompt_ids], dtype=object
    )
    return dataclasses.replace(matrix, worker_ids=worker_ids, prompt_ids=prompt_ids), watermark


# ---------------------------------------------------------------------------------- the statistics
@dataclasses.dataclass(frozen=True)
class Totals:
    """A campaign's label counters, summed over its shards."""

    n_labels: int = 0
    n_units: int = 0
    n_invalid: int = 0
    sum: float = 0.0
    sumsq: float = 0.0
    prompts_complete: int = 0
    first_unaudited_at: datetime | None = None


def campaign_totals(*, campaign_id: int) -> Totals:
    row = AuditStatsShard.objects.filter(campaign_id=campaign_id).aggregate(
        n_labels=Sum("n_labels"),
        n_units=Sum("n_units"),
        n_invalid=Sum("n_invalid"),
        sum=Sum("sum"),
        sumsq=Sum("sumsq"),
        prompts_complete=Sum("prompts_complete"),
        first_unaudited_at=Min("first_unaudited_at"),
    )
    return Totals(**{k: (v if v is not None else getattr(Totals, k)) for k, v in row.items()})


def campaign_prompt_count(*, campaign: Campaign) -> int:
    """Prompts in the campaign that are not controls: those of its import batches (one row per imported
    file, not per prompt) less its control prompts (a few, marked so). One query."""
    controls = Prompt.objects.filter(campaign=campaign, is_control=True).order_by().values("campaign")
    controls = Subquery(controls.annotate(n=Count("pk")).values("n"), output_field=IntegerField())
    n = ImportBatch.objects.filter(campaign=campaign).aggregate(n=Sum("n_prompts") - Coalesce(controls, 0))["n"]
    return n or 0


def label_units(schema, value) -> list[tuple[int, float | None]]:
    """A label's units and its scaled value on each: ``[(option, scaled value or None)]``.

    A binary or rating label is one unit (option 0); a per-option label is one unit per option
    (1, 2, …), as ``annotation.selectors.label_export_rows`` names them (``<external id>#<n>``).
    The value goes through the campaign's ``LabelSchema.binarize``; None means the map leaves the
    raw value out (counted invalid, not audited).
    """
    if isinstance(value, list):
        return [(number, _scaled(schema, raw)) for number, raw in enumerate(value, start=1)]
    return [(0, _scaled(schema, value))]


def _scaled(schema, raw) -> float | None:
    scaled = schema.binarize(raw)
    return None if scaled is None else float(scaled)


@dataclasses.dataclass(frozen=True)
class LabelStats:
    """A campaign's statistics recomputed from its counted labels (what ``services.stats_rebuild`` stores)."""

    n_labels: int
    workers: dict  # worker id → [labels, scaled values, invalid values, sum, sum of squares]
    units: dict  # (prompt id, option) → [count, sum, sum of squares]
    totals: list  # [scaled values, invalid values, sum, sum of squares]


def stats_from_labels(*, campaign: Campaign) -> LabelStats:
    """The statistics ``services.label_stats_add`` keeps, recomputed from the audited labels (one query)."""
    schema = campaign.label_schema
    rows = Label.objects.audited().filter(campaign=campaign).values_list("worker_id", "prompt_id", "value")
    n_labels, workers, units, totals = 0, {}, {}, [0, 0, 0.0, 0.0]
    for worker_id, prompt_id, value in rows:
        n_labels += 1
        w = workers.setdefault(worker_id, [0, 0, 0, 0.0, 0.0])
        w[0] += 1
        for option, scaled in label_units(schema, value):
            if scaled is None:
                w[2] += 1
                totals[1] += 1
                continue
            w[1] += 1
            w[3] += scaled
            w[4] += scaled * scaled
            u = units.setdefault((prompt_id, option), [0, 0.0, 0.0])
            u[0] += 1
            u[1] += scaled
            u[2] += scaled * scaled
            totals[0] += 1
            totals[2] += scaled
            totals[3] += scaled * scaled
    return LabelStats(n_labels, workers, units, totals)


def audit_progress() -> list[tuple[int, int, int, bool]]:
    """``(campaign id, labels, audited labels, needs rebuild)`` of every campaign with statistics:
    one grouped query over a few shard rows per campaign, and one over ``AuditStats``."""
    labels = dict(
        AuditStatsShard.objects.values("campaign_id").annotate(n=Sum("n_labels")).values_list("campaign_id", "n")
    )
    return [
        (campaign_id, labels.get(campaign_id, 0), audited, rebuild)
        for campaign_id, audited, rebuild in AuditStats.objects.values_list(
            "campaign_id", "audited_labels", "needs_rebuild"
        )
    ]


def audit_behind(*, campaign_id: int) -> bool:
    """Whether labels are not in the latest quick snapshot yet, or the statistics need a rebuild."""
    labels = campaign_totals(campaign_id=campaign_id).n_labels
    return (
        AuditStats.objects.filter(campaign_id=campaign_id)
        .filter(Q(audited_labels__lt=labels) | Q(needs_rebuild=True))
        .exists()
    )


def _consistent_read():
    """A read-only view of the statistics as of one instant: REPEATABLE READ on PostgreSQL (no locks,
    labels go on committing); on SQLite the transaction itself holds the database's write lock."""
    atomic = transaction.atomic(durable=True)

    class _Read:
        def __enter__(self):
            outermost = not connection.in_atomic_block  # inside a test's transaction there is no new one
            atomic.__enter__()
            if connection.vendor == "postgresql" and outermost:
                with connection.cursor() as cursor:
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            return self

        def __exit__(self, *exc):
            return atomic.__exit__(*exc)

    return _Read()


# ---------------------------------------------------------------------------------- the quick audit
def _worker_stats(campaign: Campaign) -> list[tuple[str, int, float, float]]:
    """``(public worker id, scaled values, their sum, their sum of squares)`` of each worker with any."""
    return [
        (f"{channel}:{ext}", n, total, sumsq)
        for channel, ext, n, total, sumsq in WorkerAuditStats.objects.filter(
            campaign=campaign, n_units__gt=0
        ).values_list("worker__channel", "worker__external_id", "n_units", "sum", "sumsq")
    ]


def _unit_states(campaign: Campaign) -> np.ndarray:
    """The unit-state histogram summed over shards: rows ``(count, sum, sumsq, units)``."""
    return np.array(
        list(
            UnitStateCount.objects.filter(campaign=campaign)
            .values("count", "sum", "sumsq")
            .annotate(n=Sum("n_units"))
            .filter(n__gt=0)
            .order_by("count", "sum", "sumsq")
            .values_list("count", "sum", "sumsq", "n")
        ),
        dtype=np.float64,
    ).reshape(-1, 4)


def _sufficient_stats(workers: list, states: np.ndarray, totals: Totals) -> dict:
    """The engine's sufficient-statistics arrays (``noise_from_stats``' keywords): one entry per
    worker, and the prompt side expanded from the unit-state histogram to one entry per unit."""
    w = np.array([row[1:] for row in workers], dtype=np.float64).reshape(-1, 3)
    repeat = states[:, 3].astype(np.int64)
    return {
        "worker_count": w[:, 0],
        "worker_sum": w[:, 1],
        "worker_sumsq": w[:, 2],
        "prompt_count": np.repeat(states[:, 0], repeat),
        "prompt_sum": np.repeat(states[:, 1], repeat),
        "prompt_sumsq": np.repeat(states[:, 2], repeat),
        "total_count": float(totals.n_units),
        "total_sum": totals.sum,
        "total_sumsq": totals.sumsq,
    }


def _binary_partitions(states: np.ndarray, k: int) -> dict | None:
    """Units with exactly k labels by minority count min(#1, #0) (the engine's ``noise_partitions``
    on binary units, read off the state histogram); None unless every scaled value is 0 or 1."""
    if states.size == 0 or not np.all(states[:, 1] == states[:, 2]):  # Σx² = Σx for integers iff x ∈ {0, 1}
        return None
    out = {str(d): 0 for d in range(k // 2 + 1)}
    for count, total, _, n in states.tolist():
        if int(count) == k:
            d = int(min(total, count - total))
            out[str(d)] += int(n)
    return out


def quick_audit_data(*, campaign: Campaign, totals: Totals) -> dict:
    """The quick snapshot's data: the six numbers (``noise_from_stats``), progress, partitions, and
    the straight-lining flags (``straight_lining_binary`` on each worker's count of 1s: scaled values
    are 0/1, so the statistics' sum is that count), as the full report's ``straight_lining`` section.

    Call it inside one consistent read of the statistics, with the totals read there.
    """
    workers = _worker_stats(campaign)
    states = _unit_states(campaign)
    audit = noise_from_stats(ddof=audit_setting("DDOF"), **_sufficient_stats(workers, states, totals))
    straight = straight_lining_binary([w[0] for w in workers], [w[1] for w in workers], [w[2] for w in workers])
    progress = Progress(
        n_prompts=campaign_prompt_count(campaign=campaign),
        k=campaign.k,
        labels=totals.n_labels,
        prompts_complete=totals.prompts_complete,
    )
    data = audit.to_dict()
    data.update(
        kind=AuditSnapshot.Kind.QUICK,
        campaign=campaign.slug,
        watermark=totals.n_labels,
        n_invalid=totals.n_invalid,
        computed_at=timezone.now().isoformat(),
        progress={
            **dataclasses.asdict(progress),
            "labels_wanted": progress.labels_wanted,
            "percent": round(progress.percent, 2),
        },
        units_by_label_count={str(int(c)): int(n) for c, n in _count_hist(states).items()},
        partitions=_binary_partitions(states, campaign.k),
        straight_lining=straight.to_dict(scaled_value_names(campaign)),
    )
    return data


def _count_hist(states: np.ndarray) -> dict:
    out: dict = {}
    for count, _, _, n in states.tolist():
        out[count] = out.get(count, 0) + n
    return dict(sorted(out.items()))


def quick_audit_read(*, campaign: Campaign) -> tuple[Totals, list[tuple[int, int]], dict] | None:
    """What a quick run reads, as of one instant and without blocking any label: the totals, each
    shard's label count, and the snapshot's data (:func:`quick_audit_data`).

    None when the statistics need a rebuild (the map changed again). Raises ValueError when the
    engine finds the statistics inconsistent (they never should be).
    """
    with _consistent_read():
        if AuditStats.objects.filter(campaign=campaign, needs_rebuild=True).exists():
            return None
        shards = list(AuditStatsShard.objects.filter(campaign=campaign).values_list("shard", "n_labels"))
        totals = campaign_totals(campaign_id=campaign.pk)
        return totals, shards, quick_audit_data(campaign=campaign, totals=totals)


# ---------------------------------------------------------------------------------- the full audit
def full_audit_due(campaign_id: int, n_labels: int, now: datetime) -> bool:
    """Whether the campaign's full audit should run again (the slow cadence).

    Due when labels arrived since the last full run and either enough of them arrived
    (``FULL_EVERY_LABELS``, or ``FULL_GROWTH`` times the labels that run saw) or that run is older
    than ``FULL_MAX_AGE`` seconds; never sooner than ``FULL_MIN_INTERVAL`` seconds, nor than
    ``FULL_DUTY`` times the last run's duration after it (so full runs take at most 1/FULL_DUTY of
    a worker's time however big the campaign grows).
    """
    last = (
        AuditSnapshot.objects.filter(campaign_id=campaign_id, kind=AuditSnapshot.Kind.FULL)
        .order_by("-watermark")
        .values("watermark", "computed_at", "duration_ms")
        .first()
    )
    if last is None:
        return n_labels > 0
    new = n_labels - last["watermark"]
    if new <= 0:
        return False
    age = (now - last["computed_at"]).total_seconds()
    if age < max(audit_setting("FULL_MIN_INTERVAL"), audit_setting("FULL_DUTY") * last["duration_ms"] / 1000):
        return False
    enough = new >= min(audit_setting("FULL_EVERY_LABELS"), max(1.0, audit_setting("FULL_GROWTH") * last["watermark"]))
    return enough or age >= audit_setting("FULL_MAX_AGE")


def full_report_data(*, campaign: Campaign, matrix: LabelMatrix, watermark: int) -> dict:
    """The engine's full report (``audits.engine.report.full_report``) as a JSON-serialisable dict, with
    both volume-filter sweeps, and the watermark under ``computed_on``."""
    report = full_report(
        matrix,
        ddof=audit_setting("DDOF"),
        sweeps=("min", "max"),
        k=campaign.k,
        campaign=campaign.slug,
        computed_at=timezone.now(),
        # Adaptive k: the partitions per final k as well (``partitions`` stays at the least k).
        k_range=(campaign.k, campaign.k_max) if campaign.k_max else None,
    ).to_dict()
    report["computed_on"]["watermark"] = watermark
    return report


# ---------------------------------------------------------------------------------- snapshots
def latest_snapshot(*, campaign: Campaign, kind: str = AuditSnapshot.Kind.QUICK) -> AuditSnapshot | None:
    return AuditSnapshot.objects.filter(campaign=campaign, kind=kind).order_by("-watermark").first()


def snapshot_history(*, campaign: Campaign, kind: str = AuditSnapshot.Kind.QUICK, max_points: int = 300) -> list[dict]:
    """The time series of the six numbers: at most ``max_points`` snapshots, evenly thinned, oldest first."""
    rows = list(
        AuditSnapshot.objects.filter(campaign=campaign, kind=kind).order_by("watermark").values_list("pk", flat=True)
    )
    if len(rows) > max_points:
        step = (len(rows) - 1) / (max_points - 1)
        rows = sorted({rows[round(i * step)] for i in range(max_points)})
    out = []
    for row in (
        AuditSnapshot.objects.filter(pk__in=rows)
        .order_by("watermark")
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
        return {
            "labels": 0,
            "audited_labels": 0,
            "behind": 0,
            "rebuilding": False,
            "rebuilds": 0,
            "stale": False,
            "stale_since": None,
            "audited_at": None,
            "age_seconds": None,
            "first_unaudited_at": None,
        }
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
def scaled_value_names(campaign: Campaign) -> dict[float, str]:
    """The words a researcher knows the scaled values by: the binary answers' texts, or the raw
    ratings the binarization map sends to 0 and to 1 (``{1.0: "3 or 4", 0.0: "1 or 2"}``)."""
    if campaign.schema == Campaign.Schema.BINARY:
        return {1.0: campaign.positive_text, 0.0: campaign.negative_text}
    names = {}
    for scaled in (0, 1):
        raws = [str(raw) for raw in sorted(int(raw) for raw, s in campaign.binarization.items() if s == scaled)]
        if raws:
            names[float(scaled)] = raws[0] if len(raws) == 1 else ", ".join(raws[:-1]) + " or " + raws[-1]
    return names


# The live worker-quality numbers (``audits.quality``) each row of the workers table carries.
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


def worker_table(
    *, campaign: Campaign, full: dict | None, straight_lining: dict | None, quality: dict | None
) -> list[dict]:
    """One row per worker: labels and mean scaled value (live, from the statistics), the
    straight-lining flag (from the latest quick snapshot, ``straight_lining``), the worker's quality
    numbers (from the same snapshot, ``quality``: ``audits.quality``'s bias with its interval, the
    most frequent answer's share, control accuracy with its Wilson interval, median seconds per
    label against the campaign's), accuracy against the others and against gold with their
    intervals (from the latest full report, ``full``), and the flags in words. A worker with quality
    numbers but no audited label (only controls so far, or excluded from the audit) gets a row too,
    after the others.

    Flags:
    - straight-lining: the engine's rule (``audits.engine.flags``), taken with the quick snapshot;
    - control accuracy and too fast: ``audits.engine.workers``' rules, taken with the quick snapshot;
    - outlier: the worker's 95 % Wilson interval lies entirely below the pooled leave-one-out accuracy
      of the crowd (the worker agrees with the others significantly less than the crowd does);
    - underpowered: scored on fewer prompts than the report's cut-off (``audits.engine.accuracy.power_cutoff``);
    - excluded: the worker is excluded from the audit (their labels enter none of its numbers).
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
        (f"{channel}:{ext}", n_labels, n_units, n_invalid, total)
        for channel, ext, n_labels, n_units, n_invalid, total in WorkerAuditStats.objects.filter(campaign=campaign)
        .values_list("worker__channel", "worker__external_id", "n_labels", "n_units", "n_invalid", "sum")
        .order_by("-n_labels", "worker_id")
    ]
    listed = {entry[0] for entry in stats}
    stats += [(public, entry["n_labels"], 0, 0, 0.0) for public, entry in live.items() if public not in listed]
    rows = []
    for public, n_labels, n_units, n_invalid, total in stats:
        acc, acc_gold, habit, numbers = accuracy.get(public), gold.get(public), straight.get(public), live.get(public)
        row = {
            "worker": public,
            "labels": n_labels,
            "units": n_units,
            "invalid": n_invalid,
            "mean": (total / n_units) if n_units else None,
            "accuracy": acc["accuracy"] if acc else None,
            "ci_normal": acc["ci_normal"] if acc else None,
            "ci_wilson": acc["ci_wilson"] if acc else None,
            "n_scored": acc["n_scored"] if acc else 0,
            "accuracy_gold": acc_gold["accuracy"] if acc_gold else None,
            "n_scored_gold": acc_gold["n_scored"] if acc_gold else 0,
            **{key: (numbers or {}).get(key) for key in QUALITY_COLUMNS},
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
# the dashboard lists only these two and says why (the report keeps them all).
BINARY_AGREEMENT = ("alpha_nominal", "gwet_ac1")
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
    audited labels (``Label.objects.audited()``: the labels the units' statistics hold)."""
    units = list(
        UnitAuditStats.objects.filter(campaign=campaign, disagreement__isnull=False)
        .order_by("-disagreement", "-count", "prompt_id", "option")
        .select_related("prompt")[:limit]
    )
    labels: dict[int, list] = {}
    for prompt_id, channel, ext, value in (
        Label.objects.audited()
        .filter(prompt_id__in={u.prompt_id for u in units})
        .order_by("id")
        .values_list("prompt_id", "worker__channel", "worker__external_id", "value")
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
            unit_labels.append({"worker": worker, "value": raw, "scaled": schema.binarize(raw)})
        out.append(
            {
                "unit": unit_name(u.prompt.external_id, u.option),
                "text": text,
                "count": u.count,
                "mean": u.sum / u.count if u.count else None,
                "labels": unit_labels,
            }
        )
    return out


# ---------------------------------------------------------------------------------- the dashboard feed
FULL_SECTIONS = (
    "filters",
    "accuracy",
    "accuracy_summary",
    "noise_vs_accuracy",
    "worker_noise",
    "agreement",
    "partitions",
    "partitions_meta",
    "counts",
    "reasons",
    "computed_on",
    "notes",
)
# The six numbers as the dashboard's charts name them (its cards take the rest from the glossary):
# the symbol with its subscript ("PN orig"), or the name where there is no symbol ("residual").
FEED_NUMBERS = tuple(
    {"key": m.key, "name": m.name, "short": f"{m.symbol} {m.sub}".strip() or m.name.lower()} for m in NUMBERS
)


def _summary_head(summary: dict | None) -> dict | None:
    """An accuracy summary without its list of underpowered workers (one entry per worker)."""
    return None if summary is None else {k: v for k, v in summary.items() if k != "underpowered"}


def _quality_head(quality: dict | None) -> dict | None:
    """A quick snapshot's worker quality without its rows (the workers table carries them)."""
    return None if quality is None else {k: v for k, v in quality.items() if k != "workers"}


def _snapshot_meta(snapshot: AuditSnapshot) -> dict:
    return {
        "watermark": snapshot.watermark,
        "computed_at": snapshot.computed_at.isoformat(),
        "duration_ms": round(snapshot.duration_ms, 1),
        "cpu_ms": round(snapshot.cpu_ms, 1),
    }


def dashboard_version(*, campaign: Campaign, status: dict, have_full: int = -1) -> str:
    """A tag that changes whenever :func:`dashboard_data` would say something new (the feed's ETag).

    Built from what the feed is computed from: the latest quick and full snapshots (and when each
    was computed: a rerun at the same watermark, after a control label, brings new worker quality),
    the label and audit counters of ``status`` (:func:`audit_status`: labels, audited labels, a
    rebuild, staleness — which turns on by the clock alone), the campaign's own fields, and the
    client's ``have_full``. It costs a few indexed reads besides the status, so an unchanged dashboard is
    answered without building the feed.
    """
    latest = {
        kind: AuditSnapshot.objects.filter(campaign=campaign, kind=kind)
        .order_by("-watermark")
        .values_list("pk", "watermark", "computed_at")
        .first()
        for kind in (AuditSnapshot.Kind.QUICK, AuditSnapshot.Kind.FULL)
    }
    parts = [
        campaign.title,
        campaign.k,
        campaign.schema,
        campaign.positive_text,
        campaign.negative_text,
        campaign.binarization,
        latest,
        have_full,
        [
            status[k]
            for k in ("labels", "audited_labels", "behind", "rebuilding", "rebuilds", "stale", "first_unaudited_at")
        ],
    ]
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


def dashboard_data(*, campaign: Campaign, have_full: int = -1, status: dict | None = None) -> dict:
    """Everything the dashboard shows, as JSON. The full report's sections are read and sent only
    when the client does not have that watermark yet (``have_full``), so polling stays light.
    ``status`` is :func:`audit_status`, when the caller has read it already (for the ETag)."""
    now = timezone.now()
    quick = latest_snapshot(campaign=campaign)
    numbers = (*NOISE_KEYS, "n_workers", "n_prompts", "n_labels")
    full = (
        AuditSnapshot.objects.filter(campaign=campaign, kind=AuditSnapshot.Kind.FULL)
        .order_by("-watermark")
        .values(
            "pk",
            "watermark",
            "computed_at",
            "duration_ms",
            "cpu_ms",
            "data__accuracy",
            "data__accuracy_summary",
            "data__accuracy_gold",
            "data__accuracy_gold_summary",
            *(f"data__{k}" for k in numbers),
        )
        .first()
    )
    full_out = None
    if full is not None:
        full_out = {
            "watermark": full["watermark"],
            "computed_at": full["computed_at"].isoformat(),
            "duration_ms": round(full["duration_ms"], 1),
            "cpu_ms": round(full["cpu_ms"], 1),
            "numbers": {k: full[f"data__{k}"] for k in numbers},
            "accuracy_summary": _summary_head(full["data__accuracy_summary"]),
            "accuracy_gold_summary": _summary_head(full["data__accuracy_gold_summary"]),
        }
        if full["watermark"] != have_full:
            data = AuditSnapshot.objects.values_list("data", flat=True).get(pk=full["pk"])
            full_out["report"] = {k: data.get(k) for k in FULL_SECTIONS}
            full_out["agreement"], full_out["agreement_note"] = agreement_rows(data.get("agreement"))
        accuracy = {k: full[f"data__{k}"] for k in ("accuracy", "accuracy_summary", "accuracy_gold")}
    return {
        "campaign": {"slug": campaign.slug, "title": campaign.title, "k": campaign.k, "schema": campaign.schema},
        "now": now.isoformat(),
        "numbers": FEED_NUMBERS,
        "status": status if status is not None else audit_status(campaign=campaign, now=now),
        "quick": (
            {**quick.data, "worker_quality": _quality_head(quick.data.get("worker_quality")), **_snapshot_meta(quick)}
            if quick
            else None
        ),
        "history": snapshot_history(campaign=campaign),
        "workers": worker_table(
            campaign=campaign,
            full=accuracy if full else None,
            straight_lining=quick.data.get("straight_lining") if quick else None,
            quality=quick.data.get("worker_quality") if quick else None,
        ),
        "ambiguous": ambiguous_units(campaign=campaign),
        "full": full_out,
    }
