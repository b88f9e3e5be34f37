"""Worker quality's sufficient statistics, folded in with the noise numbers' (``stats_fold``).

Per worker: their counted labels and controls (and controls right), the median of their seconds per
label (from ``LabelSeconds``, by index), the count of each scaled value they gave (straight-lining),
and the bias's exact sufficient statistics (``WorkerBiasStats``: per number k of reference others on
a unit, the integer sums of the worker's value x, of the others' sum o, and of x², o², x·o). A new
label on a unit changes k and o for every label already there, so the fold reads each unit's folded
labels and moves their workers' sums as well as the new label's own.

What a fold cannot take (statistics marked for a rebuild, a changed map) is left to
``quality_stats_rebuild``, which ``stats_rebuild`` runs from the labels; so does a void label or a
worker excluded or included (``audit_stats_invalidate``), which change the others of many labels at once.
"""

from __future__ import annotations

from collections import defaultdict

from django.db import connection

from annotation.models import Campaign, Label, Participation, Prompt
from annotation.selectors.workers import _control_answer_correct, worker_control_results
from audits import selectors
from audits.models import (
    AuditStats,
    LabelSeconds,
    PendingLabel,
    WorkerBiasStats,
    WorkerQualityStats,
    WorkerValueCount,
)
from audits.quality_tables import BIAS_FIELDS, campaign_median_seconds, quote, sql, upsert


def label_seconds_sql() -> str:
    """Seconds from lease to label of a row of the label table, computed by the database (to the
    millisecond on SQLite), not clamped."""
    table = quote(Label._meta.db_table)
    created, leased = f"{table}.{quote('created_at')}", f"{table}.{quote('leased_at')}"
    if connection.vendor == "sqlite":
        return f"(julianday({created}) - julianday({leased})) * 86400.0"
    return f"CAST(EXTRACT(EPOCH FROM ({created} - {leased})) AS double precision)"


def _clamped(expr: str) -> str:
    # A clock stepped back between lease and label is read as an instant label (worker_numbers).
    return f"MAX({expr}, 0.0)" if connection.vendor == "sqlite" else f"GREATEST({expr}, 0.0)"


def _median_sql() -> str:
    """The median of a ``WorkerQualityStats`` row's worker's ``LabelSeconds`` (in an UPDATE of that
    table): the mean of the ((c + 1) / 2)th and ((c + 2) / 2)th smallest of c, as the engine takes it.

    On PostgreSQL an offset to the middle of the worker's rows by index, c being the row's own count
    (``n_labels + n_controls``: the worker's counted labels, each with its seconds): at 1000 labels a
    worker, 6 ms for 70 workers against 72 ms ranking every row with a window. SQLite allows no outer
    column in a LIMIT, so there every row is ranked."""
    stats, seconds = quote(WorkerQualityStats._meta.db_table), quote(LabelSeconds._meta.db_table)
    mine = f"FROM {seconds} s WHERE s.campaign_id = {stats}.campaign_id AND s.worker_id = {stats}.worker_id"
    if connection.vendor == "postgresql":
        c = f"({stats}.n_labels + {stats}.n_controls)"
        middle = f"ORDER BY seconds LIMIT 2 - {c} %% 2 OFFSET ({c} - 1) / 2"  # %%: the statement takes parameters
        return f"(SELECT AVG(seconds) FROM (SELECT seconds {mine} {middle}) m)"
    return (
        f"(SELECT AVG(seconds) FROM (SELECT seconds, row_number() OVER (ORDER BY seconds) AS rn, "
        f"count(*) OVER () AS c {mine}) ranked WHERE rn IN ((c + 1) / 2, (c + 2) / 2))"
    )


def _int(x) -> int:
    # The statistics hold integers (LabelSchema.audit_point: the map's 0/1 or a grid point), so every
    # bias sum is exact; worker_quality divides by LabelSchema.unit_divisor for the unit scale.
    value = float(x)
    if not value.is_integer():
        raise ValueError(f"scaled value {x!r} is not an integer")
    return int(value)


def _bias_term(acc: dict, worker_id: int, k: int, x: int, o: int, sign: int) -> None:
    row = acc.setdefault((worker_id, k), [0] * 6)
    for i, v in enumerate((1, x, x * x, o, o * o, x * o)):
        row[i] += sign * v


def label_seconds_add(*, campaign_id: int, label_ids: list) -> list:
    """Insert the ``LabelSeconds`` rows of these labels of the campaign, the counted ones (the fold's);
    return their ``(seconds, label id)``."""
    label = quote(Label._meta.db_table)
    return sql(
        f"INSERT INTO {quote(LabelSeconds._meta.db_table)} (campaign_id, worker_id, label_id, seconds) "
        f"SELECT campaign_id, worker_id, id, {_clamped(label_seconds_sql())} FROM {label} "
        f"WHERE campaign_id = %s AND id IN ({', '.join(['%s'] * len(label_ids))}) AND voided_at IS NULL "
        "RETURNING seconds, label_id",
        [campaign_id, *label_ids],
    )


def folded_labels_sql(prompts: int) -> str:
    """The counted labels of ``prompts`` prompts (``IN`` parameters) that wait for no fold, as
    ``FROM … WHERE`` over the label table aliased ``l``: what the statistics hold of those prompts."""
    labels, pending = quote(Label._meta.db_table), quote(PendingLabel._meta.db_table)
    return (
        f"FROM {labels} l WHERE l.prompt_id IN ({', '.join(['%s'] * prompts)}) AND l.voided_at IS NULL "
        f"AND NOT EXISTS (SELECT 1 FROM {pending} p WHERE p.label_id = l.id)"
    )


def quality_stats_fold(*, campaign: Campaign, labels: list, excluded: set) -> None:
    """Fold counted labels (``stats_fold``'s, in label order, their seconds already inserted) into
    their workers' quality statistics; ``excluded``: the campaign's excluded workers."""
    schema = campaign.label_schema
    counts: dict[int, list] = defaultdict(lambda: [0, 0, 0])  # labels, controls, controls right
    values: dict[tuple, int] = defaultdict(int)
    gold = dict(
        Prompt.objects.filter(pk__in={lb.prompt_id for lb in labels if lb.is_control}).values_list("pk", "gold")
    )
    audited = []  # (label, [(option, x)]) of each label with a valid unit
    for label in labels:
        row = counts[label.worker_id]
        if label.is_control:
            row[1] += 1
            row[2] += int(bool(_control_answer_correct(schema, label.value, gold.get(label.prompt_id))))
            continue
        row[0] += 1
        units = [(o, _int(x)) for o, x in selectors.label_units(schema, label.value) if x is not None]
        for _, x in units:
            values[(label.worker_id, x)] += 1
        if units:
            audited.append((label, units))
    upsert(
        WorkerQualityStats,
        ("campaign_id", "worker_id"),
        ("n_labels", "n_controls", "n_correct"),
        [[campaign.pk, w, *row] for w, row in counts.items()],
        add=True,
    )
    table, workers = quote(WorkerQualityStats._meta.db_table), sorted(counts)
    for start in range(0, len(workers), 500):
        part = workers[start : start + 500]
        sql(
            f"UPDATE {table} SET median_seconds = {_median_sql()} "
            f"WHERE campaign_id = %s AND worker_id IN ({', '.join(['%s'] * len(part))})",
            [campaign.pk, *part],
        )
    upsert(
        WorkerValueCount,
        ("campaign_id", "worker_id", "value"),
        ("n",),
        [[campaign.pk, w, v, n] for (w, v), n in values.items()],
        add=True,
    )
    acc = _bias_fold(campaign, audited, excluded)
    upsert(
        WorkerBiasStats,
        ("campaign_id", "worker_id", "k"),
        BIAS_FIELDS,
        [[campaign.pk, w, k, *row] for (w, k), row in acc.items() if any(row)],
        add=True,
    )


def _bias_fold(campaign: Campaign, audited: list, excluded: set) -> dict:
    """The bias sums' changes from the fold's labels: each label against the unit's labels folded
    before it (earlier folds', then the fold's own in label order), and each of those against it."""
    if not audited:
        return {}
    schema, new = campaign.label_schema, {label.id for label, _ in audited}
    prompts = sorted({label.prompt_id for label, _ in audited})
    on_unit: dict[tuple, list] = defaultdict(list)  # (prompt, option) → [(worker, x, counts as reference)]
    decode = Label._meta.get_field("value").from_db_value  # the JSON as the ORM reads it, on either database
    for start in range(0, len(prompts), 500):
        part = prompts[start : start + 500]
        folded = sql(f"SELECT l.id, l.prompt_id, l.worker_id, l.{quote('value')} {folded_labels_sql(len(part))}", part)
        for label_id, prompt_id, worker_id, value in folded:
            if label_id in new:  # the fold's own: each meets the others in label order below
                continue
            for option, scaled in selectors.label_units(schema, decode(value, None, connection)):
                if scaled is not None:
                    on_unit[(prompt_id, option)].append((worker_id, _int(scaled), int(worker_id not in excluded)))
    acc: dict[tuple[int, int], list] = {}
    for label, units in audited:
        own = int(label.worker_id not in excluded)
        for option, x in units:
            there = on_unit[(label.prompt_id, option)]
            c = sum(r for _, _, r in there)
            s = sum(xa * r for _, xa, r in there)
            if c:
                _bias_term(acc, label.worker_id, c, x, s, 1)
            if own:
                for worker_id, xa, r in there:  # this label is one more reference other for each of them
                    k, o = c - r, s - xa * r
                    if k:
                        _bias_term(acc, worker_id, k, xa, o, -1)
                    _bias_term(acc, worker_id, k + 1, xa, o + x, 1)
            there.append((label.worker_id, x, own))
    return acc


def quality_stats_from_labels(*, campaign: Campaign) -> dict:
    """The campaign's quality statistics recomputed from its counted labels (what the rebuild stores):
    ``{"workers": {id: [n_labels, n_controls, n_correct]}, "values": {(id, value): n},
    "bias": {(id, k): [n, sx, sxx, so, soo, sxo]}}`` (seconds: ``quality_stats_rebuild``)."""
    schema = campaign.label_schema
    excluded = set(
        Participation.objects.filter(campaign=campaign, excluded_at__isnull=False).values_list("worker_id", flat=True)
    )
    workers: dict[int, list] = defaultdict(lambda: [0, 0, 0])
    values: dict[tuple, int] = defaultdict(int)
    units: dict[tuple, list] = defaultdict(list)
    rows = (
        Label.objects.counted()
        .filter(campaign=campaign, is_control=False)
        .values_list("worker_id", "prompt_id", "value")
        .iterator(chunk_size=5000)
    )
    for worker_id, prompt_id, value in rows:
        workers[worker_id][0] += 1
        for option, scaled in selectors.label_units(schema, value):
            if scaled is not None:
                x = _int(scaled)
                values[(worker_id, x)] += 1
                units[(prompt_id, option)].append((worker_id, x, int(worker_id not in excluded)))
    for worker_id, (n, correct) in worker_control_results(campaign=campaign).items():
        workers[worker_id][1] += n
        workers[worker_id][2] += correct
    bias: dict[tuple, list] = {}
    for there in units.values():
        c = sum(r for _, _, r in there)
        s = sum(x * r for _, x, r in there)
        for worker_id, x, r in there:
            if c - r:
                _bias_term(bias, worker_id, c - r, x, s - x * r, 1)
    return {"workers": dict(workers), "values": dict(values), "bias": bias}


def quality_stats_rebuild(*, campaign: Campaign) -> None:
    """Replace the campaign's quality statistics with their recomputation from the labels (inside
    ``stats_rebuild``'s transaction, which holds the campaign's AuditStats row)."""
    for model in (WorkerQualityStats, WorkerValueCount, WorkerBiasStats, LabelSeconds):
        model.objects.filter(campaign_id=campaign.pk).delete()
    rebuilt = quality_stats_from_labels(campaign=campaign)
    # With the campaign median's anchor cleared: the next read takes the median from the fastest
    # label and places the anchor anew (quality_tables.campaign_median_seconds).
    sql(
        f"INSERT INTO {quote(LabelSeconds._meta.db_table)} (campaign_id, worker_id, label_id, seconds) "
        f"SELECT campaign_id, worker_id, id, {_clamped(label_seconds_sql())} FROM {quote(Label._meta.db_table)} "
        "WHERE campaign_id = %s AND voided_at IS NULL",
        [campaign.pk],
    )
    AuditStats.objects.filter(campaign_id=campaign.pk).update(
        median_seconds_at=None, median_label_at=None, median_rank_at=0, median_of=0
    )
    WorkerQualityStats.objects.bulk_create(
        (
            WorkerQualityStats(
                campaign_id=campaign.pk,
                worker_id=worker_id,
                n_labels=n_labels,
                n_controls=n_controls,
                n_correct=n_correct,
            )
            for worker_id, (n_labels, n_controls, n_correct) in rebuilt["workers"].items()
        ),
        batch_size=2000,
    )
    table = quote(WorkerQualityStats._meta.db_table)
    sql(f"UPDATE {table} SET median_seconds = {_median_sql()} WHERE campaign_id = %s", [campaign.pk])
    WorkerValueCount.objects.bulk_create(
        (
            WorkerValueCount(campaign_id=campaign.pk, worker_id=w, value=v, n=n)
            for (w, v), n in rebuilt["values"].items()
        ),
        batch_size=2000,
    )
    WorkerBiasStats.objects.bulk_create(
        (
            WorkerBiasStats(campaign_id=campaign.pk, worker_id=w, k=k, **dict(zip(BIAS_FIELDS, row)))
            for (w, k), row in rebuilt["bias"].items()
            if any(row)
        ),
        batch_size=2000,
    )


__all__ = [
    "campaign_median_seconds",
    "folded_labels_sql",
    "label_seconds_add",
    "label_seconds_sql",
    "quality_stats_fold",
    "quality_stats_rebuild",
]
