"""Worker numbers, live: each worker's bias, habit, control accuracy and speed, with the flags they raise.

The quick run of the live audit (``audits.services.audit_refresh``, in Celery, never on the label
submission path) reads them after the statistics: :func:`worker_quality` reads the campaign's
worker-quality statistics, folded in with the noise numbers' (``audits.services.quality_stats``),
and computes, with the engine (``audits.engine.workers``, ``audits.engine.flags``), every worker's bias
with its interval, the share of their most frequent answer, their accuracy on control items with its
Wilson interval and their speed, with the flags those raise in words. Its JSON is stored with the
quick snapshot (``data["worker_quality"]``), where the dashboard's workers table and the API read it,
and the campaign's quality rules are judged on it (``audits.selectors.worker_rules``).
:func:`worker_quality_from_labels` computes the same table from every counted label: the reference
the tests hold the statistics to.

Which labels count where: a worker's own numbers come from all their counted labels (excluded
workers included, so the researcher sees why they were excluded); the crowd they are compared with
(the others' mean for the bias) leaves out the workers excluded from the audit; control labels feed
only control accuracy and speed.

Cost: :func:`worker_quality` reads a few rows per worker (their counts, their values' counts, their
bias sums by number of others), none of which grows with the labels; the campaign's median seconds is walked from the
previous run's (``audits.quality_tables.campaign_median_seconds``) over the labels since, by index.
(It used to be an offset to the middle of every label's seconds: O(labels), 190 ms of a 400 ms run
at a million labels.)
:func:`worker_quality_from_labels` reads every counted label: O(labels), about 0.4 s per 100,000
labels on SQLite.
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
from django.db import OperationalError, connection, transaction
from django.db.models import F, FloatField, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast
from django.utils import timezone
from scipy import special

from annotation.models import Campaign, Label, Participation, Prompt
from annotation.models.prompts import OPTION_BASE
from annotation.models.workers import public_worker_id
from annotation.selectors import worker_control_results
from audits.engine.accuracy import MIN_SCORED_FLOOR
from audits.engine.flags import ALPHA, MIN_LABELS, MIN_SHARE, straight_lining
from audits.engine.flags import _rule as straight_lining_rule
from audits.engine.matrix import LabelMatrix
from audits.engine.workers import (
    SPEED_MIN_CAMPAIGN_SECONDS,
    SPEED_SHARE,
    control_accuracy,
    worker_bias,
    worker_speed,
    worker_speed_from_medians,
)
from audits.models import WorkerBiasStats, WorkerQualityStats, WorkerValueCount
from audits.quality_tables import campaign_median_seconds
from audits.selectors.full import value_scale


@dataclasses.dataclass
class WorkerRow:
    """One worker's numbers (None where undefined) and flags."""

    worker_id: int
    worker: str  # the public id, ``<channel>:<external id>``
    n_labels: int = 0  # counted labels of prompts that are not controls
    excluded: bool = False
    n_compared: int = 0
    bias: float | None = None
    bias_ci: list | None = None
    top_value: float | None = None  # the most frequent scaled value
    top_share: float | None = None  # its share of the worker's scaled values
    n_controls: int = 0
    n_correct: int = 0
    control_accuracy: float | None = None
    control_ci: list | None = None
    n_timed: int = 0  # labels with a time (controls included)
    median_seconds: float | None = None
    speed_ratio: float | None = None
    flags: list = dataclasses.field(default_factory=list)

    def numbers(self) -> dict:
        """The row as JSON (what a rule logs with its action, and the dashboard shows)."""
        # Shallow, field by field: dataclasses.asdict deep-copies every value (about 0.2 ms a row, a
        # fifth of a second per refresh at 1000 workers); the lists are copied, their items are plain.
        return {name: list(v) if isinstance(v := getattr(self, name), list) else v for name in _NUMBERS}


_NUMBERS = tuple(f.name for f in dataclasses.fields(WorkerRow) if f.name != "worker_id")


@dataclasses.dataclass(frozen=True)
class WorkerQuality:
    """A campaign's worker table at one read: the rows, and the campaign-wide numbers they are judged by."""

    rows: list[WorkerRow]
    watermark: int  # counted labels read (controls included)
    campaign_median_seconds: float | None
    n_control_prompts: int
    min_controls: int
    computed_at: str
    duration_ms: float

    def to_dict(self) -> dict:
        return {
            "watermark": self.watermark,
            "computed_at": self.computed_at,
            "duration_ms": round(self.duration_ms, 1),
            "campaign_median_seconds": self.campaign_median_seconds,
            "n_control_prompts": self.n_control_prompts,
            "rule": {
                "min_controls": self.min_controls,
                "speed_share": SPEED_SHARE,
                "speed_min_labels": MIN_SCORED_FLOOR,
                "speed_min_campaign_seconds": SPEED_MIN_CAMPAIGN_SECONDS,
            },
            "workers": [row.numbers() for row in self.rows],
        }


def _float(x) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


def _pair(lo, hi) -> list | None:
    return [float(lo), float(hi)] if np.isfinite(lo) and np.isfinite(hi) else None


def _label_rows(campaign: Campaign) -> list[tuple]:
    """``(worker id, prompt id, value, is control, seconds from lease to label)`` of each counted label.

    The database turns the values into numbers (except per-option lists) and the two timestamps into
    seconds (to the millisecond on SQLite), so no row goes through Django's datetime and JSON
    converters: those cost most of the time on a large campaign.
    """
    table = connection.ops.quote_name(Label._meta.db_table)
    created, leased = (
        f"{table}.{connection.ops.quote_name('created_at')}",
        f"{table}.{connection.ops.quote_name('leased_at')}",
    )
    if connection.vendor == "sqlite":
        seconds = f"(julianday({created}) - julianday({leased})) * 86400.0"
    else:
        seconds = f"CAST(EXTRACT(EPOCH FROM ({created} - {leased})) AS double precision)"
    if campaign.schema == Campaign.Schema.OPTION_RATING:
        value = F("value")
    elif campaign.schema == Campaign.Schema.FREE_TEXT:  # answers are no numbers: bias and habit skip them
        value = Value(None, output_field=FloatField())
    else:
        value = Cast("value", FloatField())
    return list(
        Label.objects.counted()
        .filter(campaign=campaign)
        .annotate(number=value, seconds=RawSQL(seconds, [], output_field=FloatField()))
        .values_list("worker_id", "prompt_id", "number", "is_control", "seconds")
    )


def worker_quality_from_labels(*, campaign: Campaign) -> WorkerQuality:
    """Every worker's numbers and flags, from the campaign's counted labels as of one query: the
    reference :func:`worker_quality` equals (O(labels); the tests compare the two)."""
    started = time.perf_counter()
    rows = _label_rows(campaign)
    table = {
        worker_id: WorkerRow(
            worker_id=worker_id, worker=public_worker_id(channel, ext), excluded=excluded_at is not None
        )
        for worker_id, channel, ext, excluded_at in Participation.objects.filter(campaign=campaign).values_list(
            "worker_id", "worker__channel", "worker__external_id", "excluded_at"
        )
    }
    excluded = {worker_id for worker_id, row in table.items() if row.excluded}

    n = len(rows)
    workers = np.fromiter((r[0] for r in rows), dtype=np.int64, count=n)
    control = np.fromiter((r[3] for r in rows), dtype=bool, count=n)
    for worker_id, count in zip(*np.unique(workers[~control], return_counts=True)):
        table[int(worker_id)].n_labels = int(count)
    _bias_and_habit(campaign, [r for r, c in zip(rows, control.tolist()) if not c], table, excluded)
    n_control_prompts = Prompt.objects.filter(campaign=campaign, is_control=True).count()
    min_controls = _controls(campaign, table, n_control_prompts)
    median = _speed(workers, np.fromiter((r[4] for r in rows), dtype=np.float64, count=n), table)

    ordered = sorted(table.values(), key=lambda r: (-r.n_labels, r.worker_id))
    return WorkerQuality(
        rows=[r for r in ordered if r.n_labels or r.n_controls or r.n_timed],
        watermark=n,
        campaign_median_seconds=median,
        n_control_prompts=n_control_prompts,
        min_controls=min_controls,
        computed_at=timezone.now().isoformat(),
        duration_ms=(time.perf_counter() - started) * 1000,
    )


def _bias_and_habit(campaign: Campaign, audited: list, table: dict, excluded: set) -> None:
    """Bias against the (not excluded) others, and the most frequent answer's share, on scaled values.
    Free-text answers have neither (their noise is read from their clusters)."""
    if not audited or campaign.schema == Campaign.Schema.FREE_TEXT:
        return
    if campaign.schema == Campaign.Schema.OPTION_RATING:  # one unit per option, as the audit names them
        triples = [
            (w, p * OPTION_BASE + number, raw)
            for w, p, value, _, _ in audited
            for number, raw in enumerate(value, start=1)
        ]
    else:
        triples = [(w, p * OPTION_BASE, value) for w, p, value, _, _ in audited]
    workers, units, values = (np.array(column) for column in zip(*triples))
    matrix = LabelMatrix.from_triples(
        workers.astype(np.int64),
        units.astype(np.int64),
        values.astype(np.float64),
        **value_scale(campaign),
        duplicates="unchecked",
    )
    ids = [int(w) for w in matrix.worker_ids]
    bias = worker_bias(matrix, reference=np.array([w not in excluded for w in ids], dtype=bool))
    habit = straight_lining(matrix)
    for i, worker_id in enumerate(ids):
        row = table[worker_id]
        row.n_compared = int(bias.n_compared[i])
        row.bias = _float(bias.bias[i])
        row.bias_ci = _pair(*bias.ci[i])
        row.top_value = _float(habit.value[i])
        row.top_share = _float(habit.share[i])


def _controls(campaign: Campaign, table: dict, n_control_prompts: int) -> int:
    """Control accuracy and its flag; returns the flag's cut-off (``min_controls``). A campaign without
    control prompts has no control labels: it pays no query for them."""
    results = worker_control_results(campaign=campaign) if n_control_prompts else {}
    return _controls_from_counts(results, table, n_control_prompts)


def _speed(workers: np.ndarray, seconds: np.ndarray, table: dict) -> float | None:
    """Median seconds per label (controls included) against the campaign's median, and the too-fast flag."""
    if not workers.size:
        return None
    # A lease's start and its label come from one clock, the database server's or the web process's;
    # a clock stepped back between them is read as an instant label, not a negative time.
    speed = worker_speed(workers, np.maximum(seconds, 0.0))
    for i, worker_id in enumerate(speed.worker_ids.tolist()):
        row = table[worker_id]
        row.n_timed = int(speed.n_labels[i])
        row.median_seconds = _float(speed.median_seconds[i])
        row.speed_ratio = _float(speed.ratio[i])
        if speed.flagged[i]:
            row.flags.append({"kind": "too_fast", "text": "too fast: " + speed.reason(i)})
    return _float(speed.campaign_median)


def worker_quality(*, campaign: Campaign) -> WorkerQuality:
    """Every worker's numbers and flags, from the campaign's worker-quality statistics
    (``audits.services.quality_stats``) read in one transaction: O(workers), whatever the campaign's
    size, and equal to :func:`worker_quality_from_labels` on the same labels (exactly for counts,
    shares and medians; the bias from exact rational sums, to the last bits of a float).

    Its one write: the campaign median's anchor, moved by the walk. On PostgreSQL the transaction is
    REPEATABLE READ, so all the tables are read at one instant (and a read that overlaps a fold,
    which shifts the anchor, is retried).
    """
    started = time.perf_counter()
    for attempt in range(3):
        try:
            stats, values, sums, table, n_control_prompts, n_timed, median = _stats_read(campaign)
            break
        except OperationalError as exc:  # a fold moved the anchor meanwhile: read again
            if attempt == 2 or getattr(exc.__cause__, "sqlstate", None) != "40001":
                raise

    for worker_id, n_labels, _, _, _ in stats:
        table[worker_id].n_labels = n_labels
    if campaign.schema != Campaign.Schema.FREE_TEXT:
        # The statistics hold grid points (audits.selectors.stats.label_units): back to the unit scale.
        schema = campaign.label_schema
        _bias_from_sums(sums, table, schema.unit_divisor)
        _habit_from_counts(values, table, schema.point_unit)
    results = {w: (c, r) for w, _, c, r, _ in stats if c} if n_control_prompts else {}
    min_controls = _controls_from_counts(results, table, n_control_prompts)
    _speed_from_medians([(w, n + c, m) for w, n, c, _, m in stats if n + c], median, table)

    ordered = sorted(table.values(), key=lambda r: (-r.n_labels, r.worker_id))
    return WorkerQuality(
        rows=[r for r in ordered if r.n_labels or r.n_controls or r.n_timed],
        watermark=n_timed,
        campaign_median_seconds=_float(median) if median is not None else None,
        n_control_prompts=n_control_prompts,
        min_controls=min_controls,
        computed_at=timezone.now().isoformat(),
        duration_ms=(time.perf_counter() - started) * 1000,
    )


def _stats_read(campaign: Campaign) -> tuple:
    """The statistics :func:`worker_quality` reads, with the campaign's median walked over the same
    snapshot's label seconds, in one transaction (REPEATABLE READ on
    PostgreSQL: one instant for every table)."""
    isolate = connection.vendor == "postgresql" and not connection.in_atomic_block
    with transaction.atomic():
        if isolate:
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        stats = list(
            WorkerQualityStats.objects.filter(campaign=campaign).values_list(
                "worker_id", "n_labels", "n_controls", "n_correct", "median_seconds"
            )
        )
        values = list(
            WorkerValueCount.objects.filter(campaign=campaign, n__gt=0).values_list("worker_id", "value", "n")
        )
        sums = list(
            WorkerBiasStats.objects.filter(campaign=campaign, n__gt=0).values_list(
                "worker_id", "k", "n", "sx", "sxx", "so", "soo", "sxo"
            )
        )
        table = {
            worker_id: WorkerRow(
                worker_id=worker_id, worker=public_worker_id(channel, ext), excluded=excluded_at is not None
            )
            for worker_id, channel, ext, excluded_at in Participation.objects.filter(campaign=campaign).values_list(
                "worker_id", "worker__channel", "worker__external_id", "excluded_at"
            )
        }
        n_control_prompts = Prompt.objects.filter(campaign=campaign, is_control=True).count()
        n_timed = sum(n + c for _, n, c, _, _ in stats)
        median = campaign_median_seconds(campaign_id=campaign.pk, n=n_timed)
    return stats, values, sums, table, n_control_prompts, n_timed, median


def _bias_from_sums(sums: list, table: dict, divisor: int = 1, confidence: float = 0.95) -> None:
    """Bias and its t interval from ``WorkerBiasStats`` (in grid points, divided by ``divisor`` at the
    end to give the unit scale): with d = x − o/k on each compared cell,
    Σd = Σ_k (Σx − Σo/k) and Σd² = Σ_k (Σx² − 2Σxo/k + Σo²/k²), exactly (integers over a common
    denominator), then as
    :func:`audits.engine.workers.worker_bias` takes them (mean, sum of squared deviations)."""
    by_worker: dict[int, list] = {}
    for worker_id, *row in sums:
        by_worker.setdefault(worker_id, []).append(row)
    ids = sorted(by_worker)
    if not ids:
        return
    count, bias_list, ss_list = [], [], []
    for worker_id in ids:
        rows = by_worker[worker_id]
        # In integers over the common denominator L of the ks (Python's int / int is correctly
        # rounded): D = L·Σd, Q = L²·Σd², and n·L²·(sum of squared deviations) = n·Q − D².
        big = math.lcm(*(row[0] for row in rows))
        n = d = q = 0
        for k, m, sx, sxx, so, soo, sxo in rows:
            f = big // k
            n += m
            d += sx * big - so * f
            q += (sxx * big - 2 * sxo * f) * big + soo * f * f
        count.append(n)
        bias_list.append(d / (n * big * divisor))
        ss_list.append(max(n * q - d * d, 0) / (n * big * big * divisor * divisor))
    n = np.array(count, dtype=np.int64)
    bias = np.array(bias_list)
    ss = np.array(ss_list)
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.sqrt(ss / (n - 1) / n)
    half = np.full(len(ids), np.nan)
    two = n >= 2
    if two.any():
        half[two] = special.stdtrit(n[two] - 1, 0.5 + confidence / 2) * se[two]
    for i, worker_id in enumerate(ids):
        row = table[worker_id]
        row.n_compared = int(n[i])
        row.bias = _float(bias[i])
        row.bias_ci = _pair(bias[i] - half[i], bias[i] + half[i])


def _habit_from_counts(values: list, table: dict, to_unit=float) -> None:
    """The most frequent answer (on the unit scale: ``to_unit`` of the grid point, the schema's
    ``point_unit``) and its share (``audits.engine.flags.straight_lining``) from each worker's count
    of each grid point."""
    counts: dict[int, dict] = {}
    per_value: dict[int, int] = {}
    for worker_id, value, n in values:
        counts.setdefault(worker_id, {})[value] = n
        per_value[value] = per_value.get(value, 0) + n
    if not counts:
        return
    ids = sorted(counts)
    total = sum(per_value.values())
    n, top, top_value, others = [], [], [], []
    for worker_id in ids:
        mine = counts[worker_id]
        value = min(mine, key=lambda v: (-mine[v], v))  # the smallest value on a tie, as the matrix path
        cells = sum(mine.values())
        rest = total - cells
        n.append(cells)
        top.append(mine[value])
        top_value.append(to_unit(value))
        others.append((per_value[value] - mine[value]) / rest if rest > 0 else np.nan)
    habit = straight_lining_rule(
        ids, n, top_value, top, others, min_labels=MIN_LABELS, min_share=MIN_SHARE, alpha=ALPHA
    )
    for i, worker_id in enumerate(ids):
        row = table[worker_id]
        row.top_value = _float(habit.value[i])
        row.top_share = _float(habit.share[i])


def _controls_from_counts(results: dict, table: dict, n_control_prompts: int) -> int:
    """Control accuracy and its flag from each worker's ``(controls, right)``; returns ``min_controls``."""
    ids = [w for w in results if w in table]
    result = control_accuracy(
        ids, [results[w][0] for w in ids], [results[w][1] for w in ids], n_control_prompts=n_control_prompts
    )
    for i, worker_id in enumerate(ids):
        row = table[worker_id]
        row.n_controls, row.n_correct = int(result.n_controls[i]), int(result.n_correct[i])
        row.control_accuracy = _float(result.accuracy[i])
        row.control_ci = _pair(*result.ci_wilson[i])
        if result.flagged[i]:
            row.flags.append({"kind": "control_accuracy", "text": result.reason(i)})
    return result.min_controls


def _speed_from_medians(timed: list, campaign_median: float | None, table: dict) -> None:
    """Too fast (``audits.engine.workers.worker_speed``) from each worker's stored median."""
    if not timed:
        return
    speed = worker_speed_from_medians(
        [w for w, _, _ in timed], [n for _, n, _ in timed], [m for _, _, m in timed], campaign_median
    )
    for i, worker_id in enumerate(speed.worker_ids.tolist()):
        row = table[worker_id]
        row.n_timed = int(speed.n_labels[i])
        row.median_seconds = _float(speed.median_seconds[i])
        row.speed_ratio = _float(speed.ratio[i])
        if speed.flagged[i]:
            row.flags.append({"kind": "too_fast", "text": "too fast: " + speed.reason(i)})


__all__ = ["WorkerQuality", "WorkerRow", "worker_quality", "worker_quality_from_labels"]
