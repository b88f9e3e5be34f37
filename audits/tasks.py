"""Celery tasks of the live audit: thin (id in, service call). See ``audits.services``.

None of them retries or acks late: each is idempotent (snapshots are keyed by the label watermark)
and a lost or killed run is healed by the pending key's TTL and the beat sweep.
"""
from celery import shared_task
from celery.signals import worker_init


@worker_init.connect
def _import_the_engine(**kwargs) -> None:
    """Import the engine's heavy dependencies once in the worker's main process, before the pool
    forks: scipy takes most of a second to import, which would otherwise delay the first full audit
    of every pool process (web processes never import it for the live audit)."""
    import krippendorff  # noqa: F401
    import scipy.sparse  # noqa: F401
    import scipy.special  # noqa: F401

    import audits.report  # noqa: F401


@shared_task(name="audits.refresh", ignore_result=True)
def audit_refresh_task(campaign_id: int) -> None:
    """The cheap run: the six numbers, progress and agreement from the statistics."""
    from audits.services import audit_refresh

    audit_refresh(campaign_id=campaign_id)


@shared_task(name="audits.full", ignore_result=True)
def audit_full_task(campaign_id: int) -> None:
    """The full run: the engine's whole report on the label matrix."""
    from audits.services import audit_full

    audit_full(campaign_id=campaign_id)


@shared_task(name="audits.sweep", ignore_result=True)
def audit_sweep_task() -> None:
    """Celery beat: schedule every campaign whose audit is behind (heals lost enqueues and outages)."""
    from audits.services import audit_sweep

    audit_sweep()
