"""Runs on request: a researcher asks, a Celery worker computes, the page shows the newest result.

The pattern of the alternative ground truths (``truths``), shared with the instrument card's
bootstrap (``bootstrap``): one waiting run per campaign (asking again returns it), enqueued after
the commit, and a broker outage that never fails the researcher's page (the run stays waiting and
asking again after ``LOST_AFTER`` queues it again).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import models, transaction
from django.utils import timezone

logger = logging.getLogger(__name__)

# A run that has waited (or run) this long is taken as lost (the worker died, the broker was down):
# asking again enqueues it again rather than answering "already queued".
LOST_AFTER = timedelta(minutes=10)


def run_request(
    model: type[models.Model], *, campaign, waiting: tuple, task, create: dict, reset: dict | None = None
) -> tuple[models.Model, bool]:
    """The campaign's waiting run of ``model`` (status in ``waiting``), or a new one made with
    ``create``; enqueued on ``task`` after the commit. Returns ``(run, created)``.

    A waiting run younger than ``LOST_AFTER`` (by ``started_at`` when it has started, else
    ``requested_at``) is returned as it is, not enqueued again. An older one is taken as lost: its
    ``requested_at`` is renewed, the fields in ``reset`` are written (e.g. back to pending) and it is
    enqueued again. Locks the waiting row, so two requests at once make one run.
    """
    now = timezone.now()
    with transaction.atomic(durable=True):
        run = (
            model.objects.select_for_update()
            .filter(campaign=campaign, status__in=waiting)
            .order_by("-requested_at")
            .first()
        )
        if run is not None:
            since = getattr(run, "started_at", None) or run.requested_at
            if since > now - LOST_AFTER:
                return run, False
            fields = {"requested_at": now, **(reset or {})}
            for name, value in fields.items():
                setattr(run, name, value)
            run.save(update_fields=list(fields))
            created = False
        else:
            run, created = model.objects.create(campaign=campaign, **create), True
        transaction.on_commit(lambda: enqueue(task, run.pk))
    return run, created


def enqueue(task, run_id: int) -> None:
    """Hand the run to a Celery worker. With the broker down the run stays waiting, and asking again
    after ``LOST_AFTER`` queues it again: the researcher's page never fails on it."""
    try:
        task.apply_async((run_id,), retry=False)
    except Exception:
        logger.warning("%s: broker unavailable, run %s not queued", task.name, run_id, exc_info=True)
