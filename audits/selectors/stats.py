"""The running statistics that the quick run folds each label into (``audits.services.stats`` keeps
them), and the quick audit computed from them, read as of one instant without blocking any label."""

from __future__ import annotations

import dataclasses
from datetime import datetime

import numpy as np
from django.db import connection, transaction
from django.db.models import Count, IntegerField, Min, Q, Subquery, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.models import Campaign, ImportBatch, Label, Prompt
from annotation.models.workers import public_worker_id
from annotation.schemas import FREE_TEXT
from annotation.selectors import Progress, campaign_progress
from audits.conf import audit_setting
from audits.engine.flags import straight_lining_binary
from audits.engine.noise import noise_from_stats
from audits.models import AuditSnapshot, AuditStats, AuditStatsShard, PendingLabel, UnitStateCount, WorkerAuditStats


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
    """A label's units and the integer the statistics hold for it on each: ``[(option, point or None)]``.

    A binary or rating label is one unit (option 0); a per-option label is one unit per option
    (1, 2, …), as ``annotation.selectors.label_export_rows`` names them (``<external id>#<n>``).
    The value goes through the campaign's ``LabelSchema.audit_point``: the binarization map's 0/1, or
    the point's index on the scale's grid (the unit scale times ``LabelSchema.unit_divisor``, so every
    running sum stays an exact integer); None means it is not audited (counted invalid). A free-text
    answer has no unit: it is counted, never scaled (its noise is read from the answer clusters,
    ``audits.selectors.clustering``).
    """
    if schema.kind == FREE_TEXT:
        return []
    if isinstance(value, list):
        return [(number, _scaled(schema, raw)) for number, raw in enumerate(value, start=1)]
    return [(0, _scaled(schema, value))]


def _scaled(schema, raw) -> float | None:
    point = schema.audit_point(raw)
    return None if point is None else float(point)


@dataclasses.dataclass(frozen=True)
class LabelStats:
    """A campaign's statistics recomputed from its counted labels (what ``services.stats_rebuild`` stores)."""

    n_labels: int
    workers: dict  # worker id → [labels, scaled values, invalid values, sum, sum of squares]
    units: dict  # (prompt id, option) → [count, sum, sum of squares]
    totals: list  # [scaled values, invalid values, sum, sum of squares]


def stats_from_labels(*, campaign: Campaign) -> LabelStats:
    """The statistics ``services.stats_fold`` keeps, recomputed from the audited labels (one query)."""
    rows = Label.objects.audited().filter(campaign=campaign).values_list("worker_id", "prompt_id", "value")
    return label_stats_of(campaign.label_schema, rows)


def label_stats_of(schema, rows) -> LabelStats:
    """The statistics of audited labels given as ``(worker id, prompt id, value)`` rows: of a whole
    campaign (:func:`stats_from_labels`), or of the labels one fold adds (``services.stats_fold``)."""
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
    """``(campaign id, labels, audited labels, quick run due)`` of every campaign with statistics or a
    label waiting for its fold: one grouped query over a few shard rows per campaign, one over
    ``AuditStats`` and one over the waiting labels (the few since each campaign's last run). A quick
    run is due when labels wait, the snapshot is behind the statistics, or they need a rebuild."""
    labels = dict(
        AuditStatsShard.objects.values("campaign_id").annotate(n=Sum("n_labels")).values_list("campaign_id", "n")
    )
    waiting = set(PendingLabel.objects.order_by().values_list("campaign_id", flat=True).distinct())
    rows = {
        campaign_id: (labels.get(campaign_id, 0), audited, rebuild or campaign_id in waiting)
        for campaign_id, audited, rebuild in AuditStats.objects.values_list(
            "campaign_id", "audited_labels", "needs_rebuild"
        )
    }
    for campaign_id in waiting - set(rows):  # its first labels: the fold creates its statistics
        rows[campaign_id] = (0, 0, True)
    return [(c, n, audited, due or n > audited) for c, (n, audited, due) in sorted(rows.items())]


def labels_waiting(*, campaign_id: int) -> tuple[int, datetime | None]:
    """How many counted labels of the campaign wait for the quick run's fold, and the oldest's time."""
    row = PendingLabel.objects.filter(campaign_id=campaign_id).aggregate(n=Count("pk"), first=Min("label__created_at"))
    return row["n"], row["first"]


def audit_behind(*, campaign_id: int) -> bool:
    """Whether labels are not in the latest quick snapshot yet (folded or waiting for the fold), or the
    statistics need a rebuild."""
    if PendingLabel.objects.filter(campaign_id=campaign_id).exists():
        return True
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
        (public_worker_id(channel, ext), n, total, sumsq)
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


def _sufficient_stats(workers: list, states: np.ndarray, totals: Totals, divisor: int = 1) -> dict:
    """The engine's sufficient-statistics arrays (``noise_from_stats``' keywords) on the unit scale:
    one entry per worker, and the prompt side expanded from the unit-state histogram to one entry per
    unit. The statistics hold grid points (``label_units``): a sum is divided by ``divisor``
    (``LabelSchema.unit_divisor``), a sum of squares by its square, so x/d sums to Σx/d, x²/d² to Σx²/d²."""
    w = np.array([row[1:] for row in workers], dtype=np.float64).reshape(-1, 3)
    repeat = states[:, 3].astype(np.int64)
    d, d2 = float(divisor), float(divisor) ** 2
    return {
        "worker_count": w[:, 0],
        "worker_sum": w[:, 1] / d,
        "worker_sumsq": w[:, 2] / d2,
        "prompt_count": np.repeat(states[:, 0], repeat),
        "prompt_sum": np.repeat(states[:, 1], repeat) / d,
        "prompt_sumsq": np.repeat(states[:, 2], repeat) / d2,
        "total_count": float(totals.n_units),
        "total_sum": totals.sum / d,
        "total_sumsq": totals.sumsq / d2,
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
    """The quick snapshot's data: the six numbers (``noise_from_stats``) on the unit scale, progress,
    partitions, and the straight-lining flags (``straight_lining_binary`` on each worker's count of 1s,
    which is the statistics' sum when the values are 0/1: binary answers or a binarization map; a
    rating scale audited on the unit scale has no such flags here, ``worker_quality`` has its habits),
    as the full report's ``straight_lining`` section.

    Call it inside one consistent read of the statistics, with the totals read there.
    """
    workers = _worker_stats(campaign)
    states = _unit_states(campaign)
    divisor = campaign.label_schema.unit_divisor
    audit = noise_from_stats(ddof=audit_setting("DDOF"), **_sufficient_stats(workers, states, totals, divisor))
    straight = None
    if divisor == 1:
        straight = straight_lining_binary([w[0] for w in workers], [w[1] for w in workers], [w[2] for w in workers])
    if campaign.k_max is None:
        progress = Progress(
            n_prompts=campaign_prompt_count(campaign=campaign),
            k=campaign.k,
            labels=totals.n_labels,
            prompts_complete=totals.prompts_complete,
        )
    else:
        # Adaptive k: a prompt is complete when its rule stopped it (no open slot), not at its k-th label,
        # and the labels wanted are the slots so far: read from the slots, as the campaign page does.
        progress = dataclasses.replace(campaign_progress(campaign=campaign), labels=totals.n_labels)
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
        # Grid points 0/1 are 0/1 answers only when nothing divides them (a half-point scale's 0 and 0.5 are not).
        partitions=_binary_partitions(states, campaign.k) if divisor == 1 else None,
        straight_lining=straight.to_dict(scaled_value_names(campaign)) if straight is not None else None,
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
