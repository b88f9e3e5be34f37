"""The quick and full audit runs the Celery tasks call: each reads through ``audits.selectors``,
computes with the engine and saves a snapshot keyed by its watermark."""

from __future__ import annotations

import logging
import time
from datetime import datetime

from django.core.cache import cache
from django.db import transaction
from django.db.models import Case, DateTimeField, Q, Value, When
from django.utils import timezone

from annotation.models import Campaign
from audits import selectors
from audits.conf import audit_setting
from audits.models import AuditSnapshot, AuditStats, AuditStatsShard
from audits.services.scheduling import audit_schedule_recompute, pending_key
from audits.services.stats import campaign_key_share, stats_fold, stats_rebuild
from audits.services.worker_rules import rules_apply
from audits.signals import rules_applied

logger = logging.getLogger(__name__)


def _clear_pending(campaign_id: int, kind: str) -> None:
    try:
        cache.delete(pending_key(campaign_id, kind))
    except Exception:
        logger.warning("audit: cache unavailable, pending key of campaign %s not cleared", campaign_id, exc_info=True)


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
    running statistics, each worker's numbers and flags (``selectors.worker_quality``), and the
    campaign's quality rules applied to them (``audits.services.worker_rules.rules_apply``).

    Single flight per campaign, like :func:`audit_full`: the pending key stays set while the run is
    queued and while it runs, so triggers meanwhile enqueue nothing. At the end it deletes the key
    and then, if labels came in after its read (or the statistics need a rebuild), schedules the next
    run itself. That order loses no label: a trigger that found the key set fired after its label
    committed, so the check after the delete sees that label. A run that fails schedules nothing
    (no hot loop on a persistent error); the beat sweep picks the campaign up again.

    The run folds the labels that came since the last one into the statistics (``stats_fold``),
    rebuilds them if the map changed, reads them as of one instant without blocking any label
    (``selectors.quick_audit_read``), computes, and saves the snapshot keyed by the watermark (the
    labels that instant included). Idempotent: a rerun at the same watermark
    rewrites the same row; a run killed midway leaves nothing behind, and the rules' actions are
    idempotent too. The six numbers read a constant number of rows per campaign, plus one per
    worker; the worker quality reads its own statistics (a few rows per worker, and the campaign's
    median seconds by index), after the consistent read, so no label waits for it.
    """
    started, cpu = time.perf_counter(), time.process_time()
    try:
        snapshot = _audit_refresh(campaign_id, started, cpu)
    finally:
        _clear_pending(campaign_id, AuditSnapshot.Kind.QUICK)
    if selectors.audit_behind(campaign_id=campaign_id):
        # The debounce spaces reads, not a run's end and the next start: the labels that came while
        # this run worked have waited that long already (at 1M labels the run's own 0.15 s plus a
        # full countdown put freshness p95 near 0.8 s).
        elapsed = time.perf_counter() - started
        audit_schedule_recompute(campaign_id=campaign_id, countdown=max(0.0, audit_setting("COUNTDOWN") - elapsed))
    return snapshot


def _audit_refresh(campaign_id: int, started: float, cpu: float) -> AuditSnapshot | None:
    read_at = timezone.now()  # before the fold: every label committed by now is in this run
    # A ValueError: the statistics are inconsistent (SufficientStats' checks, or label seconds that
    # disagree with the worker counts). They never should be; the next run rebuilds them.
    try:
        stats_fold(campaign_id=campaign_id)
    except ValueError:
        logger.error("audit: labels of campaign %s could not be folded; the statistics will be rebuilt", campaign_id)
        AuditStats.objects.filter(campaign_id=campaign_id).update(needs_rebuild=True)
        return None
    stats = AuditStats.objects.filter(campaign_id=campaign_id).values("needs_rebuild").first()
    if stats is None:
        return None
    if stats["needs_rebuild"]:
        stats_rebuild(campaign_id=campaign_id)
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    if campaign is None:
        return None
    try:
        read = selectors.quick_audit_read(campaign=campaign)
        if read is None:
            return None  # the map changed again since the rebuild: the next run rebuilds
        workers = selectors.worker_quality(campaign=campaign)  # after the read: a few rows per worker
    except ValueError:
        logger.error("audit: inconsistent statistics for campaign %s; they will be rebuilt", campaign_id)
        AuditStats.objects.filter(campaign_id=campaign_id).update(needs_rebuild=True)
        return None
    totals, shards, data = read
    data["worker_quality"] = workers.to_dict()
    with transaction.atomic(durable=True):
        campaign_key_share(campaign_id)  # before AuditStats' row (stats.campaign_key_share)
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
    rules_apply(campaign=campaign, quality=workers)
    # Panels approve a participant only after this (``audits.hook.worker_audited``): their labels were
    # read and the rules had their chance to block them.
    AuditSnapshot.objects.filter(pk=snapshot.pk).update(rules_applied_at=timezone.now())
    for receiver, error in rules_applied.send_robust(sender=AuditSnapshot, campaign_id=campaign_id):
        if isinstance(error, Exception):  # a receiver's fault never stops the live audit
            logger.error("audit: %s failed after the rules of campaign %s: %r", receiver, campaign_id, error)
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
    # A rating scale with a binarization map is reported in both views, from the same labels.
    view = selectors.unit_scale_view(campaign)
    scales = [selectors.value_scale(campaign)] + ([view] if view else [])
    matrices, watermark = selectors.campaign_label_matrices(campaign=campaign, scales=scales)
    matrix, unit_matrix = matrices[0], (matrices[1] if view else None)
    existing = AuditSnapshot.objects.filter(
        campaign=campaign, kind=AuditSnapshot.Kind.FULL, watermark=watermark
    ).first()
    if existing is not None:
        return existing
    if watermark == 0:
        return None
    report = selectors.full_report_data(campaign=campaign, matrix=matrix, watermark=watermark, unit_matrix=unit_matrix)
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
