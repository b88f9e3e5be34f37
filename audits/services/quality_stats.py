"""Worker quality's sufficient statistics, kept with each label as the noise numbers' are.

``quality_stats_add`` runs inside the label's transaction (``label_stats_add``) and keeps, per worker:
their counted labels and controls (and controls right), the median of their seconds per label (from
``LabelSeconds``, by index), the count of each scaled value they gave (straight-lining), and the bias's
exact sufficient statistics (``WorkerBiasStats``: per number k of reference others on a unit, the
integer sums of the worker's value x, of the others' sum o, and of x², o², x·o). A new label on a
unit changes k and o for every label already there, so it writes those changes as append-only
``WorkerBiasDelta`` rows (it never waits on, or locks, another worker's row); the next quick run
deletes and folds them in one transaction (``bias_deltas_fold``), so a process that dies between the
two loses nothing and counts nothing twice: the label and its deltas commit together, and a delta
is gone exactly when it was folded.

Labels on one prompt are serialised by the prompt's row lock (``label_submit`` increments its
``n_labels`` before the statistics), so each label sees every earlier label of its prompt. What a
label cannot fold (statistics marked for a rebuild, a changed map) is left to ``quality_stats_rebuild``,
which ``stats_rebuild`` runs from the labels; so does a void label or a worker excluded or included
(``audit_stats_invalidate``), which change the others of many labels at once.
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
    WorkerBiasDelta,
    WorkerBiasStats,
    WorkerQualityStats,
    WorkerValueCount,
)
from audits.quality_tables import BIAS_FIELDS, bias_deltas_fold, campaign_median_seconds, quote, sql


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
    table): the mean of the ((c + 1) / 2)th and ((c + 2) / 2)th smallest of c, as the engine takes it."""
    stats, seconds = quote(WorkerQualityStats._meta.db_table), quote(LabelSeconds._meta.db_table)
    return (
        f"(SELECT AVG(seconds) FROM (SELECT seconds, row_number() OVER (ORDER BY seconds) AS rn, "
        f"count(*) OVER () AS c FROM {seconds} s WHERE s.campaign_id = {stats}.campaign_id "
        f"AND s.worker_id = {stats}.worker_id) ranked WHERE rn IN ((c + 1) / 2, (c + 2) / 2))"
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


def quality_stats_add(*, label: Label, campaign: Campaign, units: list, worker_excluded: bool) -> None:
    """Fold one new counted label into its worker's quality statistics (module docstring); call it
    inside the label's transaction, after its prompt's ``n_labels`` increment. ``units`` are the
    label's valid ``(option, scaled value)`` pairs (none for a control or a free-text answer)."""
    seconds = _clamped(label_seconds_sql())
    sql(
        f"INSERT INTO {quote(LabelSeconds._meta.db_table)} (campaign_id, worker_id, label_id, seconds) "
        f"SELECT campaign_id, worker_id, id, {seconds} FROM {quote(Label._meta.db_table)} WHERE id = %s",
        [label.pk],
    )
    correct = 0
    if label.is_control:
        gold = Prompt.objects.filter(pk=label.prompt_id).values_list("gold", flat=True).first()
        correct = int(bool(_control_answer_correct(campaign.label_schema, label.value, gold)))
    table = quote(WorkerQualityStats._meta.db_table)
    control = int(bool(label.is_control))
    sql(
        f"INSERT INTO {table} (campaign_id, worker_id, n_labels, n_controls, n_correct, median_seconds) "
        f"VALUES (%s, %s, %s, %s, %s, NULL) ON CONFLICT (campaign_id, worker_id) DO UPDATE SET "
        f"n_labels = {table}.n_labels + excluded.n_labels, n_controls = {table}.n_controls + excluded.n_controls, "
        f"n_correct = {table}.n_correct + excluded.n_correct",
        [campaign.pk, label.worker_id, 1 - control, control, correct],
    )
    # A statement of its own, under the row lock the upsert took: it sees every earlier label of the
    # worker. The median of c values: the mean of the ((c + 1) / 2)th and ((c + 2) / 2)th smallest.
    sql(
        f"UPDATE {table} SET median_seconds = {_median_sql()} WHERE campaign_id = %s AND worker_id = %s",
        [campaign.pk, label.worker_id],
    )
    if not units:
        return
    counts = quote(WorkerValueCount._meta.db_table)
    values: dict[int, int] = defaultdict(int)
    for _, scaled in units:
        values[_int(scaled)] += 1
    for value in sorted(values):
        sql(
            f"INSERT INTO {counts} (campaign_id, worker_id, {quote('value')}, n) VALUES (%s, %s, %s, %s) "
            f"ON CONFLICT (campaign_id, worker_id, {quote('value')}) DO UPDATE SET n = {counts}.n + excluded.n",
            [campaign.pk, label.worker_id, value, values[value]],
        )
    labels, participations = quote(Label._meta.db_table), quote(Participation._meta.db_table)
    others = sql(
        f"SELECT l.worker_id, l.{quote('value')}, p.excluded_at IS NOT NULL FROM {labels} l "
        f"LEFT JOIN {participations} p ON p.campaign_id = l.campaign_id AND p.worker_id = l.worker_id "
        f"WHERE l.prompt_id = %s AND l.voided_at IS NULL AND NOT l.is_control AND l.id <> %s",
        [label.prompt_id, label.pk],
    )
    schema = campaign.label_schema
    on_unit: dict[int, list] = defaultdict(list)
    decode = Label._meta.get_field("value").from_db_value  # the JSON as the ORM reads it, on either database
    for worker_id, value, excluded in others:
        value = decode(value, None, connection)
        for option, scaled in selectors.label_units(schema, value):
            if scaled is not None:
                on_unit[option].append((worker_id, _int(scaled), int(not excluded)))
    acc: dict[tuple[int, int], list] = {}
    own = int(not worker_excluded)
    for option, scaled in units:
        x, there = _int(scaled), on_unit.get(option, [])
        c = sum(r for _, _, r in there)
        s = sum(xa * r for _, xa, r in there)
        if c:
            _bias_term(acc, label.worker_id, c, x, s, 1)
        if not own:
            continue
        for worker_id, xa, r in there:  # this label is one more reference other for each of them
            k, o = c - r, s - xa * r
            if k:
                _bias_term(acc, worker_id, k, xa, o, -1)
            _bias_term(acc, worker_id, k + 1, xa, o + x, 1)
    rows = [[campaign.pk, w, k, *row] for (w, k), row in sorted(acc.items()) if any(row)]
    if rows:
        sql(
            f"INSERT INTO {quote(WorkerBiasDelta._meta.db_table)} "
            f"(campaign_id, worker_id, k, {', '.join(BIAS_FIELDS)}) VALUES "
            + ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s, %s)"] * len(rows)),
            [x for row in rows for x in row],
        )


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
    ``stats_rebuild``'s transaction, which has locked the tables on PostgreSQL)."""
    for model in (WorkerQualityStats, WorkerValueCount, WorkerBiasStats, WorkerBiasDelta, LabelSeconds):
        model.objects.filter(campaign_id=campaign.pk).delete()
    rebuilt = quality_stats_from_labels(campaign=campaign)
    # Inserted ranked, with the campaign median's anchor cleared: the next read takes the median from
    # the fastest label and places the anchor anew (quality_tables.campaign_median_seconds).
    sql(
        f"INSERT INTO {quote(LabelSeconds._meta.db_table)} (campaign_id, worker_id, label_id, seconds, ranked) "
        f"SELECT campaign_id, worker_id, id, {_clamped(label_seconds_sql())}, TRUE FROM {quote(Label._meta.db_table)} "
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
    "bias_deltas_fold",
    "campaign_median_seconds",
    "label_seconds_sql",
    "quality_stats_add",
    "quality_stats_rebuild",
]
