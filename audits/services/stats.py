"""The audit's running statistics, kept in SQL: ``label_stats_add`` marks each new label in its
transaction (the hook ``label_submit`` calls), ``stats_fold`` folds the marked labels in (the quick
run, off the request path), ``stats_rebuild`` recomputes them from the labels when
``audit_stats_invalidate`` has marked them stale."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from django.db import IntegrityError, OperationalError, connection, transaction
from django.utils import timezone

from annotation.models import Campaign, Label, Participation, Prompt
from annotation.rows import for_update
from annotation.schemas import FREE_TEXT
from audits import selectors
from audits.models import (
    AuditSnapshot,
    AuditStats,
    AuditStatsShard,
    PendingLabel,
    UnitAuditStats,
    UnitStateCount,
    WorkerAuditStats,
)
from audits.quality_tables import median_anchor_shift, quote, sql, upsert
from audits.services.quality_stats import (
    folded_labels_sql,
    label_seconds_add,
    quality_stats_fold,
    quality_stats_rebuild,
)
from audits.services.scheduling import audit_schedule_recompute


def scale_key(schema) -> dict:
    """How the statistics scale raw values, as stored in ``AuditStats.scale``: the raw → 0/1 map (JSON
    object keys are strings), or without one the scale's grid, ``{"unit_scale": [min, max, step]}``
    (``LabelSchema.audit_point``), so that adding or removing a map rebuilds the statistics."""
    if schema.binarization or schema.kind == FREE_TEXT:
        return {str(raw): scaled for raw, scaled in sorted(schema.binarization.items())}
    return {"unit_scale": [schema.scale_min, schema.scale_max, f"{schema.grid.normalize():f}"]}


def _stats_row_ensure(campaign_id: int, scale: dict) -> None:
    """Create the campaign's AuditStats row if labels wait for their first fold (in a transaction of
    its own, so that the fold's snapshot sees it). A row created here needs a rebuild when the
    campaign has counted labels that wait for no fold: they predate the statistics (an upgrade)."""
    pending = PendingLabel.objects.filter(campaign_id=campaign_id)
    if AuditStats.objects.filter(campaign_id=campaign_id).exists() or not pending.exists():
        return
    older = Label.objects.counted().filter(campaign_id=campaign_id).exclude(pk__in=pending.values("label_id"))
    try:
        with transaction.atomic():
            AuditStats.objects.create(campaign_id=campaign_id, scale=scale, needs_rebuild=older.exists())
    except IntegrityError:
        pass  # created concurrently


def campaign_key_share(campaign_id: int) -> None:
    """Share-lock the campaign's row (PostgreSQL's ``FOR KEY SHARE``, what a foreign key to it takes on
    an insert anyway, at the latest on commit), first in a transaction that then writes the campaign's
    AuditStats row: an edit of the campaign holds that row, then marks the statistics stale under
    this one, so taking them the other way round could deadlock."""
    if connection.features.has_select_for_update:
        sql(f"SELECT 1 FROM {quote(Campaign._meta.db_table)} WHERE id = %s FOR KEY SHARE", [campaign_id])


def _stats_locked(campaign_id: int) -> tuple[dict, bool] | None:
    """The campaign's ``(scale, needs_rebuild)``, its AuditStats row locked (after the campaign's
    share lock): the fold's and the rebuild's lock, so they run one at a time per campaign (None
    without a row)."""
    campaign_key_share(campaign_id)
    stats = quote(AuditStats._meta.db_table)
    read = f"SELECT scale, needs_rebuild FROM {stats} WHERE campaign_id = %s" + for_update(stats)
    rows = sql(read, [campaign_id])
    if not rows:
        return None
    scale, needs_rebuild = rows[0]
    return (json.loads(scale) if isinstance(scale, str) else scale), needs_rebuild


def _disagreement(count: int, total: float, sumsq: float) -> float | None:
    """Sort key of the ambiguous-prompts list: the unit's population variance, None below 2 labels."""
    if count < 2:
        return None
    return max(0.0, (count * sumsq - total * total) / (count * count))


def label_mark_sql(labels: str) -> str:
    """The statement that marks new counted labels for the next fold (``PendingLabel``): an INSERT of the
    ``id`` and ``campaign_id`` of each row of ``labels``, a table expression. ``label_submit`` makes it a
    part of the label's own INSERT on PostgreSQL (a data-modifying ``WITH``), one statement for both."""
    pending = quote(PendingLabel._meta.db_table)
    return f"INSERT INTO {pending} (label_id, campaign_id) SELECT id, campaign_id FROM {labels}"


def label_stats_add(*, label: Label, marked: bool = False) -> None:
    """Mark one new counted label for the next fold (``label_mark_sql``), unless its INSERT already did
    (``marked``), and schedule the quick run on commit: the live audit's one write in a label's
    transaction (``label_submit``), whose row lock it never waits on. Call it inside that transaction:
    the label and its mark commit together, so the fold sees either both or neither."""
    transaction.on_commit(partial(audit_schedule_recompute, campaign_id=label.campaign_id))
    if not marked:
        sql(label_mark_sql("(SELECT %s AS id, %s AS campaign_id) AS added"), [label.pk, label.campaign_id])


@dataclass(frozen=True)
class FoldLabel:
    """A label as the fold reads it (``value`` decoded)."""

    id: int
    worker_id: int
    prompt_id: int
    value: object
    is_control: bool
    created_at: datetime


def stats_fold(*, campaign_id: int) -> int:
    """Fold the campaign's labels that came since the last fold (``PendingLabel``) into its statistics,
    in one transaction, and return how many (the quick run calls it before its reads).

    Exactly once: the fold first locks the campaign's AuditStats row (folds and rebuilds of one
    campaign queue there), then deletes the marks it takes (``DELETE … RETURNING``) and folds their
    labels, all in one transaction; a label that commits meanwhile keeps its mark for the next fold.
    Each statement after the lock sees what committed before it (READ COMMITTED), so it sees every
    earlier fold whole. A label's "others" (the labels already on its unit, for the bias) and a
    prompt's count of folded labels are read as the prompt's counted labels that wait for no fold.
    Statistics marked for a rebuild, or built on another map, fold nothing: the rebuild takes every
    label from the table and deletes the marks. A change that marks them (a void label, an exclusion,
    a new map) waits for the fold's lock, so a fold that read the labels before it is rebuilt after.

    What it writes: the label seconds (``LabelSeconds``) and the campaign median's anchor; per worker
    the noise statistics, the quality counts, medians, value counts and bias sums; per unit its
    statistics and its move in the unit-state histogram; and shard 0's counters, among them the
    prompts whose k-th counted label is in the fold. Excluded workers' labels enter the quality
    statistics and the complete prompts only (as ``stats_from_labels`` and the rebuild count them),
    control labels the quality statistics only.
    """
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    if campaign is None:
        return 0
    scale = scale_key(campaign.label_schema)
    _stats_row_ensure(campaign.pk, scale)
    folded, more = 0, True
    while more:
        n, more = _fold(campaign, scale)
        folded += n
    return folded


# Labels a fold takes at most: a backlog (after an outage of the Celery workers) is folded in several
# transactions, so that none holds the campaign's locks for long.
FOLD_BATCH = 5000


def _fold(campaign: Campaign, scale: dict) -> tuple[int, bool]:
    """One fold transaction of at most FOLD_BATCH labels: how many it folded, and whether more may wait."""
    with transaction.atomic(durable=True):
        state = _stats_locked(campaign.pk)
        if state is None or state[1]:
            return 0, False
        if state[0] != scale:  # the map changed under the statistics: the next run rebuilds them
            AuditStats.objects.filter(campaign_id=campaign.pk).update(needs_rebuild=True)
            return 0, False
        pending = quote(PendingLabel._meta.db_table)
        taken = sorted(
            label_id
            for (label_id,) in sql(
                f"DELETE FROM {pending} WHERE label_id IN (SELECT label_id FROM {pending} WHERE campaign_id = %s "
                "ORDER BY label_id LIMIT %s) RETURNING label_id",
                [campaign.pk, FOLD_BATCH],
            )
        )
        labels, seconds = [], []
        for start in range(0, len(taken), 500):
            part = taken[start : start + 500]
            labels += [
                FoldLabel(*row)
                for row in Label.objects.counted()
                .filter(pk__in=part)
                .order_by("pk")
                .values_list("pk", "worker_id", "prompt_id", "value", "is_control", "created_at")
            ]
            seconds += label_seconds_add(campaign_id=campaign.pk, label_ids=part)
        more = len(taken) == FOLD_BATCH
        if not labels:  # none, or only void labels' marks: they count nowhere
            return 0, more
        median_anchor_shift(campaign_id=campaign.pk, rows=seconds)
        excluded = set(
            Participation.objects.filter(campaign=campaign, excluded_at__isnull=False).values_list(
                "worker_id", flat=True
            )
        )
        quality_stats_fold(campaign=campaign, labels=labels, excluded=excluded)
        _noise_fold(campaign, labels, excluded)
    return len(labels), more


def _noise_fold(campaign: Campaign, labels: list[FoldLabel], excluded: set) -> None:
    """The fold's noise statistics: per worker, per unit (with its move between states) and shard 0."""
    audited = [label for label in labels if not label.is_control and label.worker_id not in excluded]
    fold = selectors.label_stats_of(
        campaign.label_schema, [(label.worker_id, label.prompt_id, label.value) for label in audited]
    )
    workers, added, totals = fold.workers, fold.units, fold.totals  # added: the fold's values per unit
    upsert(
        WorkerAuditStats,
        ("campaign_id", "worker_id"),
        ("n_labels", "n_units", "n_invalid", "sum", "sumsq"),
        [[campaign.pk, worker_id, *w] for worker_id, w in workers.items()],
        add=True,
    )
    if added:
        old, prompts = {}, sorted({p for p, _ in added})
        for start in range(0, len(prompts), 500):
            old.update(
                ((p, o), (c, s, q))
                for p, o, c, s, q in UnitAuditStats.objects.filter(
                    campaign_id=campaign.pk, prompt_id__in=prompts[start : start + 500]
                ).values_list("prompt_id", "option", "count", "sum", "sumsq")
            )
        units, moves = [], {}
        for key, (n, s, q) in added.items():
            before = old.get(key, (0, 0.0, 0.0))
            after = (before[0] + n, before[1] + s, before[2] + q)
            units.append([*key, campaign.pk, *after, _disagreement(*after)])
            if before[0]:
                moves[before] = moves.get(before, 0) - 1
            moves[after] = moves.get(after, 0) + 1
        upsert(
            UnitAuditStats, ("prompt_id", "option"), ("campaign_id", "count", "sum", "sumsq", "disagreement"),
            units, add=False,
        )  # fmt: skip
        _states_move(campaign_id=campaign.pk, delta=moves)
    k = campaign.k
    arrived: dict[int, int] = {}
    for label in labels:
        if not label.is_control:
            arrived[label.prompt_id] = arrived.get(label.prompt_id, 0) + 1
    complete, prompts = 0, sorted(arrived)
    for start in range(0, len(prompts), 500):
        part = prompts[start : start + 500]
        counts = sql(f"SELECT l.prompt_id, COUNT(*) {folded_labels_sql(len(part))} GROUP BY l.prompt_id", part)
        complete += sum(1 for pk, n in counts if n - arrived[pk] < k <= n)  # its k-th counted label is here
    first = min((label.created_at for label in audited), default=None)
    shards = quote(AuditStatsShard._meta.db_table)
    sql(
        f"INSERT INTO {shards} (campaign_id, shard, n_labels, n_units, n_invalid, {quote('sum')}, sumsq, "
        f"prompts_complete, first_unaudited_at) VALUES (%s, 0, %s, %s, %s, %s, %s, %s, %s) "
        f"ON CONFLICT (campaign_id, shard) DO UPDATE SET n_labels = {shards}.n_labels + excluded.n_labels, "
        f"n_units = {shards}.n_units + excluded.n_units, n_invalid = {shards}.n_invalid + excluded.n_invalid, "
        f"{quote('sum')} = {shards}.{quote('sum')} + excluded.{quote('sum')}, sumsq = {shards}.sumsq + excluded.sumsq, "
        f"prompts_complete = {shards}.prompts_complete + excluded.prompts_complete, "
        f"first_unaudited_at = COALESCE({shards}.first_unaudited_at, excluded.first_unaudited_at)",
        [campaign.pk, len(audited), *totals, complete, connection.ops.adapt_datetimefield_value(first)],
    )


def _states_move(*, campaign_id: int, delta: dict) -> None:
    """Apply ``delta`` (state (count, sum, sumsq) → change in its number of units) to shard 0's
    unit-state histogram: one UPDATE for the rows that exist, then an insert for each new state."""
    delta = {state: d for state, d in delta.items() if d}
    if not delta:
        return
    states = quote(UnitStateCount._meta.db_table)
    c, t, r = quote("count"), quote("sum"), "sumsq"
    for start in range(0, len(delta), 200):
        part = dict(list(delta.items())[start : start + 200])
        match = " OR ".join(f"({c} = %s AND {t} = %s AND {r} = %s)" for _ in part)
        case = " ".join(f"WHEN {c} = %s AND {t} = %s AND {r} = %s THEN {int(d)}" for d in part.values())
        keys = [x for state in part for x in state]
        found = sql(
            f"UPDATE {states} SET n_units = n_units + CASE {case} ELSE 0 END "
            f"WHERE campaign_id = %s AND shard = 0 AND ({match}) RETURNING {c}, {t}, {r}",
            [*keys, campaign_id, *keys],
        )
        new = sorted(set(part) - {tuple(row) for row in found})
        if new:
            upsert(
                UnitStateCount, ("campaign_id", "shard", "count", "sum", "sumsq"), ("n_units",),
                [[campaign_id, 0, *state, part[state]] for state in new], add=True,
            )  # fmt: skip


def stats_rebuild(*, campaign_id: int) -> AuditStats | None:
    """Recompute a campaign's statistics from the labels its audit takes (``Label.objects.audited()``:
    after a change of the binarization map, a label made void, a worker excluded from the audit or
    included again, or for labels that predate the statistics), in one transaction.

    The snapshots at and above the rebuilt label count are deleted: they were computed on other
    labels or another map, and keeping them would let a stale one pass for the latest (snapshots are
    keyed by their label count, which a void label lowers). The next runs replace them.

    It holds the campaign's AuditStats row, as a fold does, and on PostgreSQL reads at REPEATABLE
    READ: the labels it rebuilds from and the marks it deletes (``PendingLabel``) are those of one
    instant, so a label that commits meanwhile keeps its mark and is folded by the next run. No label
    waits for it. Retried when a fold or an invalidation changed the row since that instant (with
    the campaign read again: the invalidation may have been a new map). Not inside another
    transaction (``durable``): it would read at that one's isolation.
    """
    for attempt in range(3):
        campaign = Campaign.objects.filter(pk=campaign_id).first()
        if campaign is None:
            return None
        AuditStats.objects.get_or_create(campaign_id=campaign_id, defaults={"scale": scale_key(campaign.label_schema)})
        try:
            return _rebuild(campaign)
        except OperationalError as exc:
            if attempt == 2 or getattr(exc.__cause__, "sqlstate", None) not in ("40001", "40P01"):
                raise
    return None  # unreachable


def _rebuild(campaign: Campaign) -> AuditStats:
    campaign_id = campaign.pk
    scale = scale_key(campaign.label_schema)
    isolate = connection.vendor == "postgresql" and not connection.in_atomic_block
    with transaction.atomic(durable=True):
        if isolate:
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        _stats_locked(campaign_id)
        stats = AuditStats.objects.get(campaign_id=campaign_id)
        PendingLabel.objects.filter(campaign_id=campaign_id).delete()
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
    campaign). Called inside the transaction that made the change.

    A campaign whose labels all wait for their first fold has no statistics row yet: it gets one,
    marked, so that a fold running meanwhile (which creates the row, then waits for this one's lock)
    cannot fold the labels as they were before the change."""
    if not AuditStats.objects.filter(campaign_id=campaign_id).update(needs_rebuild=True):
        if Label.objects.filter(campaign_id=campaign_id).exists():
            AuditStats.objects.bulk_create(
                [AuditStats(campaign_id=campaign_id, needs_rebuild=True)],
                update_conflicts=True,
                unique_fields=["campaign"],
                update_fields=["needs_rebuild"],
            )
    transaction.on_commit(partial(audit_schedule_recompute, campaign_id=campaign_id))
