"""The audit's running statistics, kept in SQL: ``label_stats_add`` folds each label in (the hook
``label_submit`` calls), ``stats_rebuild`` recomputes them from the labels when
``audit_stats_invalidate`` has marked them stale."""

from __future__ import annotations

import json
import os
import threading
from functools import partial

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from annotation.models import Campaign, Label, Prompt
from annotation.schemas import FREE_TEXT
from audits import selectors
from audits.conf import audit_setting
from audits.models import (
    AuditSnapshot,
    AuditStats,
    AuditStatsShard,
    LabelSeconds,
    UnitAuditStats,
    UnitStateCount,
    WorkerAuditStats,
    WorkerBiasDelta,
    WorkerBiasStats,
    WorkerQualityStats,
    WorkerValueCount,
)
from audits.services.quality_stats import quality_stats_add, quality_stats_rebuild
from audits.services.scheduling import audit_schedule_recompute


def scale_key(schema) -> dict:
    """How the statistics scale raw values, as stored in ``AuditStats.scale``: the raw → 0/1 map (JSON
    object keys are strings), or without one the scale's grid, ``{"unit_scale": [min, max, step]}``
    (``LabelSchema.audit_point``), so that adding or removing a map rebuilds the statistics."""
    if schema.binarization or schema.kind == FREE_TEXT:
        return {str(raw): scaled for raw, scaled in sorted(schema.binarization.items())}
    return {"unit_scale": [schema.scale_min, schema.scale_max, f"{schema.grid.normalize():f}"]}


def _stats_row(campaign_id: int, scale: dict, *, exclude_label: int | None = None) -> tuple[dict, bool]:
    """The campaign's ``(scale, needs_rebuild)``, creating its AuditStats row on first use (no lock)."""
    # Hand-written: every label reads it (the scale comes back as JSON text on SQLite: label_stats_add).
    stats = _q(AuditStats._meta.db_table)
    rows = _sql(f"SELECT scale, needs_rebuild FROM {stats} WHERE campaign_id = %s", [campaign_id])
    if rows:
        return rows[0]
    older = Label.objects.counted().filter(campaign_id=campaign_id)
    if exclude_label is not None:
        older = older.exclude(pk=exclude_label)
    try:
        with transaction.atomic(savepoint=True):
            # Labels from before the statistics existed (an upgrade): rebuild them from the labels.
            AuditStats.objects.create(campaign_id=campaign_id, scale=scale, needs_rebuild=older.exists())
    except IntegrityError:
        pass  # created concurrently
    return AuditStats.objects.filter(campaign_id=campaign_id).values_list("scale", "needs_rebuild").get()


def _disagreement(count: int, total: float, sumsq: float) -> float | None:
    """Sort key of the ambiguous-prompts list: the unit's population variance, None below 2 labels."""
    if count < 2:
        return None
    return max(0.0, (count * sumsq - total * total) / (count * count))


def _sql(statement: str, params: list) -> list:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


def label_stats_add(*, label: Label, campaign: Campaign, worker_excluded: bool) -> None:
    """Fold one new label into its campaign's audit statistics; schedule a recomputation on commit.
    A control label enters no statistic (it is not in ``Label.objects.audited()``), but still
    schedules the run: the worker-quality numbers the run takes read it. Nor does the label of a
    worker excluded from the campaign's audit (``worker_excluded``: their ``Participation.excluded_at``,
    which ``label_submit`` read under that row's lock, so an exclusion cannot slip in between): it
    only moves the count of complete prompts, which a rebuild takes from all counted labels too.

    Call it inside the transaction that creates the label (``label_submit``), after the prompt's
    ``n_labels`` was incremented; it joins that transaction. It runs on every label, so each step is
    one SQL statement (upserts; SQLite ≥ 3.35 and PostgreSQL share the syntax): 4 + 1 per audit
    unit statements whatever the campaign's size, and no campaign-wide lock; the worker-quality
    statistics (``audits.services.quality_stats.quality_stats_add``, controls and excluded workers'
    labels included) add 6, one of them reading the prompt's other labels (about k rows).

    Row locks, always in this order: the worker's rows (their quality statistics and value counts,
    then their audit statistics; the bias deltas of other workers are inserts, which lock nothing
    another label takes), the label's unit rows (one prompt's, by
    option), one counter shard of the campaign (the calling thread's) and, under it, that shard's
    unit-state histogram rows. Labels of one campaign queue only when their threads share a shard,
    and no two labels can deadlock. (A transaction folding several labels should fold them in
    worker order.) ``stats_rebuild`` locks the tables first.
    """
    transaction.on_commit(partial(audit_schedule_recompute, campaign_id=campaign.pk))
    schema = campaign.label_schema
    scale = scale_key(schema)
    units = [] if label.is_control else selectors.label_units(schema, label.value)
    valid = [(option, scaled) for option, scaled in units if scaled is not None]
    stored_scale, needs_rebuild = _stats_row(campaign.pk, scale, exclude_label=label.pk)
    if isinstance(stored_scale, str):
        stored_scale = json.loads(stored_scale)
    if not needs_rebuild and stored_scale == scale:  # else the rebuild takes the label from the table
        quality_stats_add(label=label, campaign=campaign, units=valid, worker_excluded=worker_excluded)
    if label.is_control:  # it measures its worker, not the prompts
        return
    now = label.created_at or timezone.now()
    n_invalid = len(units) - len(valid)
    total = float(sum(scaled for _, scaled in valid))
    total_sq = float(sum(scaled * scaled for _, scaled in valid))
    fold = not worker_excluded and not needs_rebuild and stored_scale == scale
    if fold:
        workers = _q(WorkerAuditStats._meta.db_table)
        _sql(
            f"INSERT INTO {workers} (campaign_id, worker_id, n_labels, n_units, n_invalid, {_q('sum')}, sumsq) "
            f"VALUES (%s, %s, 1, %s, %s, %s, %s) ON CONFLICT (campaign_id, worker_id) DO UPDATE SET "
            f"n_labels = {workers}.n_labels + 1, n_units = {workers}.n_units + excluded.n_units, "
            f"n_invalid = {workers}.n_invalid + excluded.n_invalid, "
            f"{_q('sum')} = {workers}.{_q('sum')} + excluded.{_q('sum')}, sumsq = {workers}.sumsq + excluded.sumsq",
            [campaign.pk, label.worker_id, len(valid), n_invalid, total, total_sq],
        )
        states = [
            _unit_add(prompt_id=label.prompt_id, campaign_id=campaign.pk, option=option, scaled=scaled)
            for option, scaled in valid
        ]

    shard = _shard()
    shards = _q(AuditStatsShard._meta.db_table)
    when = connection.ops.adapt_datetimefield_value(now)
    _sql(
        f"INSERT INTO {shards} (campaign_id, shard, n_labels, n_units, n_invalid, {_q('sum')}, sumsq, "
        f"prompts_complete, "
        f"first_unaudited_at) VALUES (%s, %s, %s, %s, %s, %s, %s, "
        f"(SELECT CASE WHEN n_labels = %s THEN 1 ELSE 0 END FROM {_q(Prompt._meta.db_table)} WHERE id = %s), %s) "
        f"ON CONFLICT (campaign_id, shard) DO UPDATE SET n_labels = {shards}.n_labels + excluded.n_labels, "
        f"n_units = {shards}.n_units + excluded.n_units, n_invalid = {shards}.n_invalid + excluded.n_invalid, "
        f"{_q('sum')} = {shards}.{_q('sum')} + excluded.{_q('sum')}, sumsq = {shards}.sumsq + excluded.sumsq, "
        f"prompts_complete = {shards}.prompts_complete + excluded.prompts_complete, "
        f"first_unaudited_at = COALESCE({shards}.first_unaudited_at, excluded.first_unaudited_at)",
        [
            campaign.pk,
            shard,
            0 if worker_excluded else 1,
            len(valid) if fold else 0,
            n_invalid if fold else 0,
            total if fold else 0.0,
            total_sq if fold else 0.0,
            campaign.k,
            label.prompt_id,
            None if worker_excluded else when,
        ],
    )
    if worker_excluded:
        return
    if not fold:
        # The map changed under existing labels (or they predate the statistics): the next run
        # rebuilds everything from the labels; meanwhile only the label count moves (so the
        # dashboard shows the audit is behind).
        if not needs_rebuild:
            AuditStats.objects.filter(campaign_id=campaign.pk).update(needs_rebuild=True)
        return
    if states:
        _states_move(
            campaign_id=campaign.pk, shard=shard, moves=[(new, scaled) for (_, scaled), new in zip(valid, states)]
        )


def _shard() -> int:
    """This thread's counter shard: concurrent web processes and threads spread over the shards, and a
    transaction that folds several labels (a bulk path) touches one shard only, so it cannot
    deadlock with another on them."""
    return (os.getpid() * 1_000_003 + threading.get_ident()) % int(audit_setting("SHARDS"))


def _unit_add(*, campaign_id: int, prompt_id: int, option: int, scaled: float) -> tuple[int, float, float]:
    """Upsert one unit's row with a new scaled value; return its new state (count, sum, sum of squares)."""
    units = _q(UnitAuditStats._meta.db_table)
    c, t, r = _q("count"), _q("sum"), "sumsq"
    # disagreement: the population variance (count·sumsq − sum²) / count², the ambiguous-list sort key
    n, s, q = f"({units}.{c} + 1)", f"({units}.{t} + excluded.{t})", f"({units}.{r} + excluded.{r})"
    return tuple(
        _sql(
            f"INSERT INTO {units} (campaign_id, prompt_id, {_q('option')}, {c}, {t}, {r}, disagreement) "
            f"VALUES (%s, %s, %s, 1, %s, %s, NULL) ON CONFLICT (prompt_id, {_q('option')}) DO UPDATE SET "
            f"{c} = {n}, {t} = {s}, {r} = {q}, disagreement = ({n} * {q} - {s} * {s}) / ({n} * {n}) "
            f"RETURNING {c}, {t}, {r}",
            [campaign_id, prompt_id, option, scaled, scaled * scaled],
        )[0]
    )


def _states_move(*, campaign_id: int, shard: int, moves: list) -> None:
    """Move each unit from its old state to its new one in the shard's histogram: one UPDATE for all
    the rows that exist, then an insert for each state the shard has never seen.

    The statistics hold integers (``LabelSchema.audit_point``: the map's 0/1, or a point's index on the
    scale's grid), so a unit's old state is its new one minus the value, exactly.
    """
    delta: dict[tuple, int] = {}
    for (count, total, sumsq), scaled in moves:
        delta[(count, total, sumsq)] = delta.get((count, total, sumsq), 0) + 1
        if count > 1:
            old = (count - 1, total - scaled, sumsq - scaled * scaled)
            delta[old] = delta.get(old, 0) - 1
    delta = {state: d for state, d in delta.items() if d}
    if not delta:
        return
    states = _q(UnitStateCount._meta.db_table)
    c, t, r = _q("count"), _q("sum"), "sumsq"
    match = " OR ".join(f"({c} = %s AND {t} = %s AND {r} = %s)" for _ in delta)
    case = " ".join(f"WHEN {c} = %s AND {t} = %s AND {r} = %s THEN {int(d)}" for d in delta.values())
    keys = [x for state in delta for x in state]
    found = _sql(
        f"UPDATE {states} SET n_units = n_units + CASE {case} ELSE 0 END "
        f"WHERE campaign_id = %s AND shard = %s AND ({match}) RETURNING {c}, {t}, {r}",
        [*keys, campaign_id, shard, *keys],
    )
    for state in set(delta) - {tuple(row) for row in found}:
        _sql(
            f"INSERT INTO {states} (campaign_id, shard, {c}, {t}, {r}, n_units) VALUES (%s, %s, %s, %s, %s, %s) "
            f"ON CONFLICT (campaign_id, shard, {c}, {t}, {r}) "
            f"DO UPDATE SET n_units = {states}.n_units + excluded.n_units",
            [campaign_id, shard, *state, delta[state]],
        )


def stats_rebuild(*, campaign_id: int) -> AuditStats | None:
    """Recompute a campaign's statistics from the labels its audit takes (``Label.objects.audited()``:
    after a change of the binarization map, a label made void, a worker excluded from the audit or
    included again, or for labels that predate the statistics), in one transaction.

    The snapshots at and above the rebuilt label count are deleted: they were computed on other
    labels or another map, and keeping them would let a stale one pass for the latest (snapshots are
    keyed by their label count, which a void label lowers). The next runs replace them.

    On PostgreSQL it first locks the statistics tables against writes, waiting for labels in flight:
    labels (of every campaign) wait meanwhile and are folded in after it, on the new map. This is
    rare (a changed map) and takes seconds per million labels.
    """
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    if campaign is None:
        return None
    schema = campaign.label_schema
    scale = scale_key(schema)
    shards = int(audit_setting("SHARDS"))
    with transaction.atomic(durable=True):
        if connection.vendor == "postgresql":
            tables = ", ".join(
                _q(m._meta.db_table)
                for m in (
                    WorkerAuditStats,
                    UnitAuditStats,
                    AuditStatsShard,
                    UnitStateCount,
                    LabelSeconds,
                    WorkerQualityStats,
                    WorkerValueCount,
                    WorkerBiasDelta,
                    WorkerBiasStats,
                )
            )
            with connection.cursor() as cursor:
                cursor.execute(f"LOCK TABLE {tables} IN SHARE ROW EXCLUSIVE MODE")
        _stats_row(campaign_id, scale)
        stats = AuditStats.objects.select_for_update().get(campaign_id=campaign_id)
        rebuilt = selectors.stats_from_labels(campaign=campaign)
        workers, units, totals = rebuilt.workers, rebuilt.units, rebuilt.totals
        for model in (WorkerAuditStats, UnitAuditStats, UnitStateCount, AuditStatsShard):
            model.objects.filter(campaign_id=campaign_id).delete()
        WorkerAuditStats.objects.bulk_create(
            (
                WorkerAuditStats(
                    campaign_id=campaign_id,
                    worker_id=wid,
                    n_labels=w[0],
                    n_units=w[1],
                    n_invalid=w[2],
                    sum=w[3],
                    sumsq=w[4],
                )
                for wid, w in workers.items()
            ),
            batch_size=2000,
        )
        UnitAuditStats.objects.bulk_create(
            (
                UnitAuditStats(
                    campaign_id=campaign_id,
                    prompt_id=pid,
                    option=opt,
                    count=u[0],
                    sum=u[1],
                    sumsq=u[2],
                    disagreement=_disagreement(*u),
                )
                for (pid, opt), u in units.items()
            ),
            batch_size=2000,
        )
        states: dict[tuple, int] = {}
        for u in units.values():
            states[tuple(u)] = states.get(tuple(u), 0) + 1
        UnitStateCount.objects.bulk_create(
            UnitStateCount(campaign_id=campaign_id, shard=0, count=c, sum=s, sumsq=q, n_units=n)
            for (c, s, q), n in states.items()
        )
        now = timezone.now()
        complete = Prompt.objects.filter(campaign_id=campaign_id, is_control=False, n_labels__gte=campaign.k).count()
        AuditStatsShard.objects.bulk_create(
            [
                AuditStatsShard(
                    campaign_id=campaign_id,
                    shard=0,
                    n_labels=rebuilt.n_labels,
                    n_units=totals[0],
                    n_invalid=totals[1],
                    sum=totals[2],
                    sumsq=totals[3],
                    prompts_complete=complete,
                    first_unaudited_at=now if rebuilt.n_labels else None,
                ),
                *(AuditStatsShard(campaign_id=campaign_id, shard=i) for i in range(1, shards)),
            ]
        )
        quality_stats_rebuild(campaign=campaign)
        AuditSnapshot.objects.filter(campaign_id=campaign_id, watermark__gte=rebuilt.n_labels).delete()
        stats.scale = scale
        stats.needs_rebuild = False
        stats.audited_labels = 0  # earlier snapshots used other statistics: audit again
        stats.rebuilds += 1
        # Only these: quality_stats_rebuild has cleared the median's anchor on the row meanwhile.
        stats.save(update_fields=["scale", "needs_rebuild", "audited_labels", "rebuilds"])
    return stats


def audit_stats_invalidate(*, campaign_id: int) -> None:
    """The campaign's statistics no longer match its labels (its binarization map changed, a label
    became void, a worker was excluded from the audit or included again): mark them for a rebuild and
    schedule it, so the audit follows even when no further label arrives (a paused or closed
    campaign). Called inside the transaction that made the change."""
    AuditStats.objects.filter(campaign_id=campaign_id).update(needs_rebuild=True)
    transaction.on_commit(partial(audit_schedule_recompute, campaign_id=campaign_id))
