"""When audits run: ``audit_schedule_recompute``'s per-campaign debounce (the pending key in the cache,
then an enqueue), the beat sweep that heals lost enqueues, and the dashboard's "Recompute now"."""

from __future__ import annotations

import logging
import time

from django.core.cache import cache
from django.utils import timezone

from annotation.models import Campaign
from audits import selectors
from audits.conf import audit_setting
from audits.models import AuditSnapshot
from audits.tasks import audit_full_task, audit_refresh_task

logger = logging.getLogger(__name__)


def pending_key(campaign_id: int, kind: str = AuditSnapshot.Kind.QUICK) -> str:
    return f"audit:pending:{campaign_id}" if kind == AuditSnapshot.Kind.QUICK else f"audit:pending-full:{campaign_id}"


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


def audit_sweep() -> dict:
    """Schedule every campaign whose audit is behind its statistics (Celery beat, every few seconds).

    Quick: labels wait for the fold, the shards' label count exceeds the audited watermark, or the
    statistics need a rebuild (``selectors.audit_progress``). Full: by the cadence rules of
    ``selectors.full_audit_due``. Returns what it scheduled (for logs and tests).
    """
    now = timezone.now()
    quick, full = [], []
    for campaign_id, n, _, due in selectors.audit_progress():
        if due and audit_schedule_recompute(campaign_id=campaign_id):
            quick.append(campaign_id)
        if (
            n
            and selectors.full_audit_due(campaign_id, n, now)
            and audit_schedule_recompute(campaign_id=campaign_id, kind=AuditSnapshot.Kind.FULL, countdown=0)
        ):
            full.append(campaign_id)
    return {"quick": sorted(quick), "full": sorted(full)}


def audit_request_full(*, campaign: Campaign) -> bool:
    """The dashboard's "Recompute now" button: queue a full run (and a quick one)."""
    audit_schedule_recompute(campaign_id=campaign.pk, countdown=0)
    return audit_schedule_recompute(campaign_id=campaign.pk, kind=AuditSnapshot.Kind.FULL, countdown=0)
