from django.db import IntegrityError, transaction

from annotation.models import Worker


def worker_get_or_create(*, channel: str, external_id: str, user=None) -> Worker:
    """The worker known to ``channel`` as ``external_id``; safe when two requests race to create it."""
    try:
        with transaction.atomic(durable=True):
            worker, _ = Worker.objects.get_or_create(channel=channel, external_id=external_id, defaults={"user": user})
    except IntegrityError:
        worker = Worker.objects.get(channel=channel, external_id=external_id)
    return worker


def worker_for_user(*, user) -> Worker:
    """A signed-in user's native worker identity."""
    return worker_get_or_create(channel=Worker.NATIVE, external_id=str(user.pk), user=user)
