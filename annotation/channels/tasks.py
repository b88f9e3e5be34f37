"""Celery tasks of the channels app: thin (an id in, a service call), idempotent, retrying only
transient channel errors. Enqueued with ``delay_on_commit`` by the services."""

from celery import shared_task
from django.core.cache import cache

from annotation.channels.base import ChannelTransientError
from annotation.channels.selectors import publications_to_reconcile

RECONCILE_LOCK_SECONDS = 15 * 60


@shared_task(
    autoretry_for=(ChannelTransientError,),
    retry_backoff=30,
    retry_backoff_max=15 * 60,
    retry_jitter=True,
    max_retries=8,
    acks_late=True,
)
def publish_campaign_task(publication_id: int):
    """Create the publication's HITs (resumable: every HIT carries a token derived from its row)."""
    from annotation.channels.services import publication_publish  # noqa: PLC0415 (services import this module: a cycle)

    return publication_publish(publication_id=publication_id).status


def _reconcile_one(publication_id: int) -> str:
    from annotation.channels.services import mturk_reconcile  # noqa: PLC0415 (services import this module: a cycle)

    lock = f"channels:mturk-reconcile:{publication_id}"
    if not cache.add(lock, 1, RECONCILE_LOCK_SECONDS):  # single flight per publication
        return "busy"
    try:
        return str(mturk_reconcile(publication_id=publication_id))
    finally:
        cache.delete(lock)


@shared_task(autoretry_for=(ChannelTransientError,), retry_backoff=30, max_retries=8)
def withdraw_publication_task(publication_id: int):
    """Expire the withdrawn publication's HITs (reconciliation does it, and keeps reviewing)."""
    return _reconcile_one(publication_id)


@shared_task(autoretry_for=(ChannelTransientError,), retry_backoff=10, max_retries=8)
def mturk_block_worker_task(block_id: int):
    from annotation.channels.services import mturk_block_push  # noqa: PLC0415 (services import this module: a cycle)

    return mturk_block_push(block_id=block_id)


@shared_task(autoretry_for=(ChannelTransientError,), retry_backoff=10, max_retries=8)
def mturk_unblock_worker_task(block_id: int):
    from annotation.channels.services import mturk_block_lift  # noqa: PLC0415 (services import this module: a cycle)

    return mturk_block_lift(block_id=block_id)


@shared_task
def mturk_reconcile_task():
    """Periodic (CELERY_BEAT_SCHEDULE): reconcile every open MTurk publication. A transient error on
    one publication does not stop the others; the next period retries it."""
    results = {}
    for publication_id in publications_to_reconcile().values_list("pk", flat=True):
        try:
            results[publication_id] = _reconcile_one(publication_id)
        except ChannelTransientError as exc:
            results[publication_id] = f"transient error, retried next period: {exc.message}"
    return results


# ------------------------------------------------------------------------------------ Prolific
# 429s and 5xx are retried with back-off; every Prolific task re-reads the state it acts on, so a
# retry after a lost answer does nothing twice (creation is looked up by internal_name first, pay
# is checked against the submission's bonus payments first).


@shared_task(
    autoretry_for=(ChannelTransientError,), retry_backoff=5, retry_backoff_max=300, retry_jitter=True, max_retries=10
)
def prolific_sync_task(publication_id: int):
    from annotation.channels.services.prolific import prolific_sync  # noqa: PLC0415 (services import this module: a cycle)

    return prolific_sync(publication_id=publication_id)


@shared_task(
    autoretry_for=(ChannelTransientError,), retry_backoff=5, retry_backoff_max=300, retry_jitter=True, max_retries=10
)
def prolific_review_task(publication_id: int):
    """Approve what the audit has covered since (sent when the audit's rules have run)."""
    from annotation.channels.services.prolific import prolific_review_auto  # noqa: PLC0415 (a cycle: see above)

    return prolific_review_auto(publication_id=publication_id)


@shared_task(
    autoretry_for=(ChannelTransientError,), retry_backoff=5, retry_backoff_max=300, retry_jitter=True, max_retries=10
)
def prolific_event_task(event_id: int):
    from annotation.channels.services.prolific import prolific_event_process  # noqa: PLC0415 (a cycle: see above)

    return prolific_event_process(event_id=event_id)


@shared_task(
    bind=True,
    autoretry_for=(ChannelTransientError,),
    retry_backoff=5,
    retry_backoff_max=300,
    retry_jitter=True,
    max_retries=10,
)
def prolific_bonus_task(self, bonus_id: int):
    from annotation.channels.services.prolific import prolific_bonus_pay  # noqa: PLC0415 (a cycle: see above)

    status = prolific_bonus_pay(bonus_id=bonus_id)
    if status == "busy":  # another process is paying it (a reconciliation): look again once it is done
        raise self.retry(countdown=10)
    return status


@shared_task(
    autoretry_for=(ChannelTransientError,), retry_backoff=5, retry_backoff_max=300, retry_jitter=True, max_retries=10
)
def prolific_group_task(group_pk: int, worker_id: int):
    from annotation.channels.services.prolific import prolific_group_push  # noqa: PLC0415 (a cycle: see above)

    return prolific_group_push(group_pk=group_pk, worker_id=worker_id)


@shared_task
def prolific_reconcile_task():
    """Periodic (CELERY_BEAT_SCHEDULE): sync every open Prolific publication, the safety net under hooks.
    A transient error on one does not stop the others; the next period retries it."""
    from annotation.channels.services.prolific import prolific_publications_open, prolific_sync  # noqa: PLC0415

    results = {}
    for publication_id in prolific_publications_open():
        try:
            results[publication_id] = prolific_sync(publication_id=publication_id)
        except ChannelTransientError as exc:
            results[publication_id] = f"transient error, retried next period: {exc.message}"
    return results
