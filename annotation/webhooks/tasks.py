"""Celery tasks of outbound webhooks: thin, an id in and a service call."""

import random

from celery import shared_task

from annotation.webhooks.services import MAX_ATTEMPTS


@shared_task(bind=True, max_retries=MAX_ATTEMPTS)
def delivery_send_task(self, delivery_id: int):
    """One attempt; on failure, again after exponential back-off with full jitter: the first retry
    within a minute (about 30 s on average), then up to about 1, 2, 4 … minutes, capped at an hour."""
    from annotation.webhooks.services import delivery_send  # noqa: PLC0415 (services import this module: a cycle)

    delivery = delivery_send(delivery_id=delivery_id)
    if delivery.status == delivery.Status.PENDING:
        ceiling = min(60 * 2 ** (delivery.attempts - 1), 3600)
        raise self.retry(countdown=random.uniform(1, ceiling))
    return delivery.status


@shared_task
def webhooks_scan_task():
    """Periodic (CELERY_BEAT_SCHEDULE): find every campaign's new events and send them."""
    from annotation.webhooks.services import webhooks_scan  # noqa: PLC0415 (a cycle: see above)

    return webhooks_scan()
