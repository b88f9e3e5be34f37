from django.db import IntegrityError, transaction

from annotation.models import Worker
from annotation.selectors import native_worker_of


def worker_get_or_create(*, channel: str, external_id: str, user=None) -> Worker:
    """The worker known to ``channel`` as ``external_id``; safe when two requests race to create it.

    A known worker (every request of the worker loop but the first) costs one read and no transaction:
    on SQLite every transaction takes the write lock (settings), which heartbeats must not queue for.
    """
    worker = Worker.objects.filter(channel=channel, external_id=external_id).first()
    if worker is not None:
        return worker
    try:
        with transaction.atomic(durable=True):
            worker, _ = Worker.objects.get_or_create(channel=channel, external_id=external_id, defaults={"user": user})
    except IntegrityError:
        worker = Worker.objects.get(channel=channel, external_id=external_id)
    return worker


def worker_for_user(*, user) -> Worker:
    """A signed-in user's native worker identity, created on first use (``selectors.native_worker_of``:
    no query when the request read the user with it)."""
    worker = native_worker_of(user=user)
    if worker is not None:
        return worker
    return worker_get_or_create(channel=Worker.NATIVE, external_id=str(user.pk), user=user)
