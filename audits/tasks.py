"""Celery tasks of the live audit: thin (id in, service call). See ``audits.services``.

None of them retries or acks late: each is idempotent (snapshots are keyed by the watermark) and a
lost or killed run is healed by the pending key's TTL and the beat sweep.

Each task imports its service when it runs (style guide §3): ``audits.services`` imports these
tasks to enqueue them, so importing it here at the top would make the two modules import each other.
"""

import gc

from celery import shared_task
from celery.signals import worker_init


@worker_init.connect
def _import_the_engine(**kwargs) -> None:
    """Import the engine's heavy dependencies once in the worker's main process, before the pool
    forks: scipy takes most of a second to import, which would otherwise delay the first full audit
    of every pool process (web processes never import it for the live audit).

    Then it freezes what is loaded by then (``gc.freeze``): the modules' 130k objects leave the
    collector's generations, so a full collection in a quick run walks that run's objects, not all of
    Django and scipy (65 ms on this machine: a tail of the live audit's freshness at 1M labels)."""
    import krippendorff  # noqa: F401, PLC0415 (pre-fork warm-up, worker only)
    import scipy.sparse  # noqa: F401, PLC0415 (pre-fork warm-up, worker only)
    import scipy.special  # noqa: F401, PLC0415 (pre-fork warm-up, worker only)

    import audits.engine.report  # noqa: F401, PLC0415 (pre-fork warm-up, worker only)

    gc.freeze()


@shared_task(name="audits.refresh", ignore_result=True)
def audit_refresh_task(campaign_id: int) -> None:
    """The quick run: the six numbers, progress, partitions and straight-lining flags from the running statistics."""
    from audits.services import audit_refresh  # noqa: PLC0415 (audits.services imports this module: a cycle)

    audit_refresh(campaign_id=campaign_id)


@shared_task(name="audits.full", ignore_result=True)
def audit_full_task(campaign_id: int) -> None:
    """The full run: the engine's whole report on the label matrix."""
    from audits.services import audit_full  # noqa: PLC0415 (audits.services imports this module: a cycle)

    audit_full(campaign_id=campaign_id)


@shared_task(name="audits.sweep", ignore_result=True)
def audit_sweep_task() -> None:
    """Celery beat: schedule every campaign whose audit is behind (heals lost enqueues and outages)."""
    from audits.services import audit_sweep  # noqa: PLC0415 (audits.services imports this module: a cycle)

    audit_sweep()


@shared_task(name="audits.ground_truths", ignore_result=True)
def ground_truths_task(run_id: int) -> None:
    """Alternative ground truths on request (seconds to minutes): see ``audits.services.truths``."""
    from audits.services import ground_truths_compute  # noqa: PLC0415 (audits.services imports this module: a cycle)

    ground_truths_compute(run_id=run_id)


@shared_task(name="audits.bootstrap", ignore_result=True)
def bootstrap_task(run_id: int) -> None:
    """The instrument card's bootstrap intervals on request (seconds): see ``audits.services.bootstrap``."""
    from audits.services import bootstrap_compute  # noqa: PLC0415 (audits.services imports this module: a cycle)

    bootstrap_compute(run_id=run_id)
