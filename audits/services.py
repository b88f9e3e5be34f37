"""Every write of the live audit: statistics upkeep, scheduling, snapshots.

The numbers themselves come from the audit engine, through the reads in ``audits.selectors``; this
module only keeps their inputs and results in the database. Its settings are in ``audits.conf``.

* ``label_stats_add`` folds one label into its campaign's sufficient statistics, inside
  ``label_submit``'s transaction, and schedules a recomputation for after the commit.
* ``audit_schedule_recompute`` debounces per campaign (style guide §4, "Debounce, Sentry style"):
  ``cache.add("audit:pending:<id>")`` and enqueue with a short countdown only when the key is new.
  It never raises: with the broker or the cache down, labels are still accepted.
* ``audit_refresh`` (the quick run, Celery task ``audits.refresh``) computes the six numbers from
  the running statistics and every worker's quality numbers (``audits.quality``), saves a snapshot
  keyed by the watermark, then applies the campaign's quality rules; it holds the key until it
  ends, then schedules the next run itself if labels arrived meanwhile.
* ``audit_full`` (task ``audits.full``) runs the engine's whole report on the label matrix.
* ``audit_sweep`` (Celery beat) schedules every campaign whose audit is behind: it heals lost
  enqueues and catches up after a broker outage.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from datetime import datetime
from functools import partial

from django.core.cache import cache
from django.db import IntegrityError, connection, transaction
from django.db.models import Case, DateTimeField, Q, Value, When
from django.utils import timezone

from annotation.models import Campaign, Label, Prompt
from audits import quality, selectors
from audits.conf import audit_setting
from audits.models import AuditSnapshot, AuditStats, AuditStatsShard, UnitAuditStats, UnitStateCount, WorkerAuditStats
from audits.tasks import audit_full_task, audit_refresh_task

logger = logging.getLogger(__name__)


def pending_key(campaign_id: int, kind: str = AuditSnapshot.Kind.QUICK) -> str:
    return f"audit:pending:{campaign_id}" if kind == AuditSnapshot.Kind.QUICK else f"audit:pending-full:{campaign_id}"


# ---------------------------------------------------------------------------------- statistics
def scale_key(schema) -> dict:
    """The raw → scaled value map as stored in ``AuditStats.scale`` (JSON object keys are strings)."""
    return {str(raw): scaled for raw, scaled in sorted(schema.binarization.items())}


def _stats_row(campaign_id: int, scale: dict, *, exclude_label: int | None = None) -> tuple[dict, bool]:
    """The campaign's ``(scale, needs_rebuild)``, creating its AuditStats row on first use (no lock)."""
    row = AuditStats.objects.filter(campaign_id=campaign_id).values_list("scale", "needs_rebuild").first()
    if row is not None:
        return row
    older = Label.objects.audited().filter(campaign_id=campaign_id)
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
    unit statements whatever the campaign's size, and no campaign-wide lock.

    Row locks, always in this order: the worker's row, the label's unit rows (one prompt's, by
    option), one counter shard of the campaign (the calling thread's) and, under it, that shard's
    unit-state histogram rows. Labels of one campaign queue only when their threads share a shard,
    and no two labels can deadlock. (A transaction folding several labels should fold them in
    worker order.) ``stats_rebuild`` locks the tables first.
    """
    transaction.on_commit(partial(audit_schedule_recompute, campaign_id=campaign.pk))
    if label.is_control:  # it measures its worker, not the prompts
        return
    schema = campaign.label_schema
    scale = scale_key(schema)
    now = label.created_at or timezone.now()
    units = selectors.label_units(schema, label.value)
    valid = [(option, scaled) for option, scaled in units if scaled is not None]
    n_invalid = len(units) - len(valid)
    total = float(sum(scaled for _, scaled in valid))
    total_sq = float(sum(scaled * scaled for _, scaled in valid))

    stored_scale, needs_rebuild = _stats_row(campaign.pk, scale, exclude_label=label.pk)
    if isinstance(stored_scale, str):
        stored_scale = json.loads(stored_scale)
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

    Scaled values are integers (``LabelSchema.binarization`` maps to ints), so a unit's old state is
    its new one minus the value, exactly.
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
                _q(m._meta.db_table) for m in (WorkerAuditStats, UnitAuditStats, AuditStatsShard, UnitStateCount)
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
        AuditSnapshot.objects.filter(campaign_id=campaign_id, watermark__gte=rebuilt.n_labels).delete()
        stats.scale = scale
        stats.needs_rebuild = False
        stats.audited_labels = 0  # earlier snapshots used other statistics: audit again
        stats.rebuilds += 1
        stats.save()
    return stats


# ---------------------------------------------------------------------------------- scheduling
_breaker = {"until": 0.0}


def audit_schedule_recompute(
    *, campaign_id: int, kind: str = AuditSnapshot.Kind.QUICK, countdown: float | None = None
) -> bool:
    """Queue a recomputation of the campaign's audit unless one is already queued. Never raises.

    Returns True when it enqueued. ``cache.add`` of the pending key (TTL ``PENDING_TTL``) decides:
    only the first trigger enqueues; the run deletes the key as it ends and schedules the next run
    itself when labels arrived meanwhile, so at most one run per campaign and kind is queued or
    running. If the cache or the broker is down, the failure is logged and this
    process stops trying for ``RETRY_AFTER`` seconds (so at most one label per process per window
    pays a connection timeout); the TTL and the beat sweep bring the audit back up to date.
    """
    if time.monotonic() < _breaker["until"]:
        return False
    key = pending_key(campaign_id, kind)
    ttl = audit_setting("PENDING_TTL" if kind == AuditSnapshot.Kind.QUICK else "FULL_TTL")
    try:
        if not cache.add(key, timezone.now().isoformat(), timeout=ttl):
            return False
    except Exception:
        logger.warning("audit: cache unavailable, campaign %s not scheduled", campaign_id, exc_info=True)
        _breaker["until"] = time.monotonic() + audit_setting("RETRY_AFTER")
        return False
    task = audit_refresh_task if kind == AuditSnapshot.Kind.QUICK else audit_full_task
    if countdown is None:
        countdown = audit_setting("COUNTDOWN")
    try:
        # Fail fast (no connection retries, no publish retries): a dead broker costs this label
        # milliseconds, a hung one the socket timeout (settings), once per RETRY_AFTER per process.
        with task.app.connection_for_write(transport_options={"max_retries": 0}) as broker:
            task.apply_async((campaign_id,), countdown=countdown, retry=False, connection=broker)
    except Exception:
        logger.warning("audit: broker unavailable, campaign %s not scheduled", campaign_id, exc_info=True)
        _breaker["until"] = time.monotonic() + audit_setting("RETRY_AFTER")
        try:  # let a later trigger try again soon instead of after the full TTL
            cache.set(key, "enqueue-failed", timeout=audit_setting("RETRY_AFTER"))
        except Exception:
            pass
        return False
    return True


def _clear_pending(campaign_id: int, kind: str) -> None:
    try:
        cache.delete(pending_key(campaign_id, kind))
    except Exception:
        logger.warning("audit: cache unavailable, pending key of campaign %s not cleared", campaign_id, exc_info=True)


def audit_sweep() -> dict:
    """Schedule every campaign whose audit is behind its statistics (Celery beat, every few seconds).

    Quick: the shards' label count exceeds the audited watermark, or the statistics need a rebuild
    (one grouped query over a few rows per campaign). Full: by the cadence rules of
    ``selectors.full_audit_due``. Returns what it scheduled (for logs and tests).
    """
    now = timezone.now()
    quick, full = [], []
    for campaign_id, n, audited, rebuild in selectors.audit_progress():
        if (n > audited or rebuild) and audit_schedule_recompute(campaign_id=campaign_id):
            quick.append(campaign_id)
        if (
            n
            and selectors.full_audit_due(campaign_id, n, now)
            and audit_schedule_recompute(campaign_id=campaign_id, kind=AuditSnapshot.Kind.FULL, countdown=0)
        ):
            full.append(campaign_id)
    return {"quick": sorted(quick), "full": sorted(full)}


def audit_stats_invalidate(*, campaign_id: int) -> None:
    """The campaign's statistics no longer match its labels (its binarization map changed, a label
    became void, a worker was excluded from the audit or included again): mark them for a rebuild and
    schedule it, so the audit follows even when no further label arrives (a paused or closed
    campaign). Called inside the transaction that made the change."""
    AuditStats.objects.filter(campaign_id=campaign_id).update(needs_rebuild=True)
    transaction.on_commit(partial(audit_schedule_recompute, campaign_id=campaign_id))


def audit_request_full(*, campaign: Campaign) -> bool:
    """The dashboard's "Recompute now" button: queue a full run (and a quick one)."""
    audit_schedule_recompute(campaign_id=campaign.pk, countdown=0)
    return audit_schedule_recompute(campaign_id=campaign.pk, kind=AuditSnapshot.Kind.FULL, countdown=0)


# ---------------------------------------------------------------------------------- snapshots
def _snapshot_save(
    *,
    campaign_id: int,
    kind: str,
    watermark: int,
    data: dict,
    started: float,
    cpu: float,
    read_at: datetime | None = None,
) -> AuditSnapshot:
    """Save idempotently keyed by (campaign, kind, watermark); thin the quick history."""
    now = timezone.now()
    snapshot, _ = AuditSnapshot.objects.update_or_create(
        campaign_id=campaign_id,
        kind=kind,
        watermark=watermark,
        defaults=dict(
            data=data,
            computed_at=now,
            read_at=read_at,
            duration_ms=(time.perf_counter() - started) * 1000,
            cpu_ms=(time.process_time() - cpu) * 1000,
        ),
    )
    resolution = audit_setting("HISTORY_RESOLUTION")
    if kind == AuditSnapshot.Kind.QUICK and resolution:
        window = int(now.timestamp() // resolution) * resolution
        start = datetime.fromtimestamp(window, tz=now.tzinfo)
        AuditSnapshot.objects.filter(
            campaign_id=campaign_id, kind=kind, computed_at__gte=start, watermark__lt=watermark
        ).delete()
    return snapshot


def audit_refresh(*, campaign_id: int) -> AuditSnapshot | None:
    """The quick run: the six numbers, progress, partitions and straight-lining flags from the
    running statistics, each worker's quality numbers and flags (``audits.quality.worker_quality``),
    and the campaign's quality rules applied to them (``audits.quality.rules_apply``).

    Single flight per campaign, like :func:`audit_full`: the pending key stays set while the run is
    queued and while it runs, so triggers meanwhile enqueue nothing. At the end it deletes the key
    and then, if labels came in after its read (or the statistics need a rebuild), schedules the next
    run itself. That order loses no label: a trigger that found the key set fired after its label
    committed, so the check after the delete sees that label. A run that fails schedules nothing
    (no hot loop on a persistent error); the beat sweep picks the campaign up again.

    The run rebuilds the statistics if the map changed, reads them as of one instant without
    blocking any label (``selectors.quick_audit_read``), computes, and saves the snapshot keyed by
    the watermark (the labels that instant included). Idempotent: a rerun at the same watermark
    rewrites the same row; a run killed midway leaves nothing behind, and the rules' actions are
    idempotent too. The six numbers read a constant number of rows per campaign, plus one per
    worker; the worker quality reads the campaign's counted labels once, after the consistent read
    (so no label waits for it), about 0.4 s per 100,000 labels on SQLite.
    """
    started, cpu = time.perf_counter(), time.process_time()
    try:
        snapshot = _audit_refresh(campaign_id, started, cpu)
    finally:
        _clear_pending(campaign_id, AuditSnapshot.Kind.QUICK)
    if selectors.audit_behind(campaign_id=campaign_id):
        audit_schedule_recompute(campaign_id=campaign_id)
    return snapshot


def _audit_refresh(campaign_id: int, started: float, cpu: float) -> AuditSnapshot | None:
    stats = AuditStats.objects.filter(campaign_id=campaign_id).values("needs_rebuild").first()
    if stats is None:
        return None
    if stats["needs_rebuild"]:
        stats_rebuild(campaign_id=campaign_id)
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    if campaign is None:
        return None
    read_at = timezone.now()
    try:
        read = selectors.quick_audit_read(campaign=campaign)
    except ValueError:  # SufficientStats found the statistics inconsistent (they never should be)
        logger.error("audit: inconsistent statistics for campaign %s; they will be rebuilt", campaign_id)
        AuditStats.objects.filter(campaign_id=campaign_id).update(needs_rebuild=True)
        return None
    if read is None:
        return None  # the map changed again since the rebuild: the next run rebuilds
    totals, shards, data = read
    workers = quality.worker_quality(campaign=campaign)  # outside the read: it reads the labels, at length
    data["worker_quality"] = workers.to_dict()
    with transaction.atomic(durable=True):
        snapshot = _snapshot_save(
            campaign_id=campaign_id,
            kind=AuditSnapshot.Kind.QUICK,
            watermark=totals.n_labels,
            data=data,
            started=started,
            cpu=cpu,
            read_at=read_at,
        )
        AuditStats.objects.filter(campaign_id=campaign_id, audited_labels__lt=totals.n_labels).update(
            audited_labels=totals.n_labels, audited_at=snapshot.computed_at
        )
        # Oldest unaudited label per shard: none where no label came since the read; else at most
        # read_at old (a label committed after the read instant), which errs towards "stale".
        AuditStatsShard.objects.filter(campaign_id=campaign_id).update(
            first_unaudited_at=Case(
                *(When(shard=shard, n_labels=n, then=Value(None)) for shard, n in shards),
                default=Value(read_at),
                output_field=DateTimeField(),
            )
        )
    quality.rules_apply(campaign=campaign, quality=workers)
    if selectors.full_audit_due(campaign_id, totals.n_labels, timezone.now()):
        audit_schedule_recompute(campaign_id=campaign_id, kind=AuditSnapshot.Kind.FULL, countdown=0)
    return snapshot


def audit_full(*, campaign_id: int) -> AuditSnapshot | None:
    """The full run: the engine's report on the label matrix read from the database.

    Single flight per campaign: its pending key stays set while it runs and is deleted at the end
    (``FULL_TTL`` heals a run killed meanwhile), so a slow report never runs twice at once; labels
    that arrive meanwhile are for the next run, which the cadence rules schedule. The matrix comes
    from one query, so it is a consistent set of labels; its label count is the watermark. Skips the
    work when a full snapshot at that watermark exists. Nothing is written before the end, so a run
    killed midway leaves nothing behind.
    """
    started, cpu = time.perf_counter(), time.process_time()
    try:
        return _audit_full(campaign_id, started, cpu)
    finally:
        _clear_pending(campaign_id, AuditSnapshot.Kind.FULL)


def _audit_full(campaign_id: int, started: float, cpu: float) -> AuditSnapshot | None:
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    if campaign is None:
        return None
    stats = AuditStats.objects.filter(campaign_id=campaign_id)
    rebuilds = stats.values_list("rebuilds", flat=True).first()  # read before the labels
    matrix, watermark = selectors.campaign_label_matrix(campaign=campaign)
    existing = AuditSnapshot.objects.filter(
        campaign=campaign, kind=AuditSnapshot.Kind.FULL, watermark=watermark
    ).first()
    if existing is not None:
        return existing
    if watermark == 0:
        return None
    report = selectors.full_report_data(campaign=campaign, matrix=matrix, watermark=watermark)
    with transaction.atomic(durable=True):
        if stats.filter(Q(needs_rebuild=True) | ~Q(rebuilds=rebuilds)).exists():
            return None  # labels changed under this run (a void label, a new map): the next run redoes it
        return _snapshot_save(
            campaign_id=campaign_id,
            kind=AuditSnapshot.Kind.FULL,
            watermark=watermark,
            data=report,
            started=started,
            cpu=cpu,
        )


__all__ = [
    "audit_full",
    "audit_refresh",
    "audit_request_full",
    "audit_schedule_recompute",
    "audit_stats_invalidate",
    "audit_sweep",
    "label_stats_add",
    "stats_rebuild",
]
