"""Publishing an MTurk publication: the body of ``publish_campaign_task``, also resumed by reconciliation.

It talks to MTurk outside any database transaction: each remote call is followed by a short
transaction recording its outcome, and every call carries a token derived from our rows, so a crash
between the two is healed by the next run.
"""

import logging
from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from annotation.channels.base import BaseChannel, ChannelPermanentError, GroupSpec, HITSpec, PreparedGroup
from annotation.channels.models import MTurkHIT, Publication
from annotation.channels.registry import get_channel
from annotation.models import Slot

logger = logging.getLogger(__name__)


@dataclass
class PublishOutcome:
    """What one ``publication_publish`` run ended with: the publication's status, and how many HITs MTurk
    created now or had created already (same token)."""

    publication_id: int
    status: str
    created: int = 0
    found_again: int = 0


def _set_status(publication_id: int, status: str, *, only_from: tuple, error: str = "", **fields) -> bool:
    """Move the publication to ``status`` if it is still in one of ``only_from`` (a withdrawal that
    happened meanwhile wins)."""
    with transaction.atomic(durable=True):
        return bool(
            Publication.objects.filter(pk=publication_id, status__in=only_from).update(
                status=status, error=error, **fields
            )
        )


def group_spec(publication: Publication) -> GroupSpec:
    """What every HIT of the publication shares, from its stored options."""
    o = publication.options
    return GroupSpec(
        title=o["title"],
        description=o["description"],
        keywords=o.get("keywords", ""),
        reward=Decimal(o["reward"]),
        assignment_duration=o["assignment_duration"],
        auto_approval_delay=o["auto_approval_delay"],
        locales=tuple(o.get("locales") or ()),
        min_approval_rate=o.get("min_approval_rate"),
        min_approved=o.get("min_approved"),
    )


def task_url(publication: Publication) -> str:
    """The task page's public URL that the publication's HITs open in MTurk's iframe."""
    return f"{settings.CHORUS_PUBLIC_URL.rstrip('/')}{reverse('channels:mturk_task')}?publication={publication.pk}"


def _hit_spec(publication: Publication, hit: MTurkHIT) -> HITSpec:
    return HITSpec(
        token=f"{publication.token_prefix}-h{hit.index}",
        max_assignments=hit.max_assignments,
        lifetime=publication.options["lifetime"],
        external_url=task_url(publication),
        frame_height=publication.options.get("frame_height", 0),
        first_attempt_at=hit.first_attempt_at,
    )


def mturk_hit_publish(
    *, channel: BaseChannel, publication: Publication, prepared: PreparedGroup, hit: MTurkHIT
) -> bool:
    """Create one planned HIT (idempotent through its token); returns whether MTurk created it now."""
    if hit.first_attempt_at is None:  # this attempt is the first: the token is fresh (spec says so)
        with transaction.atomic(durable=True):
            MTurkHIT.objects.filter(pk=hit.pk, first_attempt_at__isnull=True).update(first_attempt_at=timezone.now())
    published = channel.publish(prepared=prepared, hit=_hit_spec(publication, hit))
    with transaction.atomic(durable=True):
        MTurkHIT.objects.filter(pk=hit.pk).update(
            hit_id=published.hit_id,
            status=MTurkHIT.Status.LIVE,
            expires_at=published.expires_at,
            max_assignments=published.max_assignments,
        )
    return published.created


def publication_publish(*, publication_id: int) -> PublishOutcome:
    """Publish a pending MTurk publication: the HIT type and block list, then every planned HIT.

    Safe to run again at any point (a Celery retry, a second worker, reconciliation resuming a stalled
    run): every call carries a token derived from our rows. Transient channel errors propagate (the task
    retries them); a permanent one marks the publication failed, keeping the HITs already created.
    """
    publication = Publication.objects.select_related("campaign").get(pk=publication_id)
    if publication.kind != Publication.Kind.MTURK or publication.status not in (
        Publication.Status.PENDING,
        Publication.Status.PUBLISHING,
    ):
        return PublishOutcome(publication_id, publication.status)
    _set_status(
        publication_id,
        Publication.Status.PUBLISHING,
        only_from=(Publication.Status.PENDING, Publication.Status.PUBLISHING),
    )
    channel = get_channel(publication.channel)
    outcome = PublishOutcome(publication_id, Publication.Status.PUBLISHING)
    try:
        if publication.remote_group_id and publication.remote_block_id:
            prepared = PreparedGroup(publication.remote_group_id, publication.remote_block_id)
        else:
            prepared = channel.prepare(group=group_spec(publication), token=publication.token_prefix)
            with transaction.atomic(durable=True):
                Publication.objects.filter(pk=publication_id).update(
                    remote_group_id=prepared.group_id, remote_block_id=prepared.block_id
                )
        for hit in MTurkHIT.objects.filter(publication_id=publication_id, hit_id__isnull=True).order_by("index"):
            status = Publication.objects.values_list("status", flat=True).get(pk=publication_id)
            if status != Publication.Status.PUBLISHING:  # withdrawn meanwhile
                outcome.status = status
                return outcome
            if not Slot.objects.filter(campaign_id=publication.campaign_id, filled=False).exists():
                break  # the campaign filled up meanwhile: the remaining HITs are not needed
            if mturk_hit_publish(channel=channel, publication=publication, prepared=prepared, hit=hit):
                outcome.created += 1
            else:
                outcome.found_again += 1
    except ChannelPermanentError as exc:
        logger.warning("Publishing publication %s failed: %s", publication_id, exc.message)
        if _set_status(
            publication_id, Publication.Status.FAILED, only_from=(Publication.Status.PUBLISHING,), error=exc.message
        ):
            outcome.status = Publication.Status.FAILED
        return outcome
    if _set_status(
        publication_id,
        Publication.Status.PUBLISHED,
        only_from=(Publication.Status.PUBLISHING,),
        published_at=timezone.now(),
    ):
        outcome.status = Publication.Status.PUBLISHED
    else:
        outcome.status = Publication.objects.values_list("status", flat=True).get(pk=publication_id)
    return outcome
