"""The writes of the MTurk task page and what follows from them: an assignment opened and labeled, a
worker with nothing left (or blocked by the researcher) and their block pushed to MTurk, and a bonus
granted by the researcher.

Who labels what is never decided here: the task page calls ``lease_acquire`` and ``label_submit``.
"""

from decimal import Decimal, InvalidOperation

from django.db import transaction
from django.utils import timezone

from annotation.channels.errors import BonusAlreadyGranted, PublicationRefused
from annotation.channels.models import (
    MTurkAssignment,
    MTurkBonus,
    MTurkHIT,
    MTurkWorkerBlock,
    Publication,  # re-exported: the services' old name for it
)
from annotation.channels.pricing import MTURK_BONUS_MAX
from annotation.channels.registry import get_channel
from annotation.channels.tasks import mturk_block_worker_task, mturk_unblock_worker_task
from annotation.models import Worker
from annotation.services.activity import activity_record


def mturk_assignment_open(*, hit: MTurkHIT, assignment_id: str, worker: Worker) -> MTurkAssignment:
    """Chorus's record of an assignment the worker opened; refused when the id is already another
    worker's or another HIT's (a forged or mixed-up link)."""
    with transaction.atomic(durable=True):
        assignment, created = MTurkAssignment.objects.get_or_create(
            assignment_id=assignment_id, defaults={"hit": hit, "worker": worker, "opened_at": timezone.now()}
        )
        if not created and (assignment.worker_id != worker.pk or assignment.hit_id != hit.pk):
            raise PublicationRefused("This assignment belongs to another worker or HIT.", code="assignment_mismatch")
        assignment.worker, assignment.hit = worker, hit  # the same rows: the page reads them, no query more
        if assignment.opened_at is None:
            assignment.opened_at = timezone.now()
            assignment.save(update_fields=["opened_at"])
    return assignment


def mturk_assignment_labeled(*, assignment: MTurkAssignment, label_id: int) -> None:
    """Attach the label the task page just recorded to the assignment (the first one only)."""
    with transaction.atomic(durable=True):
        MTurkAssignment.objects.filter(pk=assignment.pk, label__isnull=True).update(label_id=label_id)


def mturk_nothing_left(*, assignment: MTurkAssignment) -> MTurkWorkerBlock:
    """The worker has nothing left in this campaign: note it, and give them the block-list
    qualification (``mturk_block_worker_task`` after commit) so MTurk stops showing them the HITs."""
    publication_id = assignment.hit.publication_id
    with transaction.atomic(durable=True):
        MTurkAssignment.objects.filter(pk=assignment.pk).update(nothing_left=True)
        block, created = MTurkWorkerBlock.objects.get_or_create(
            publication_id=publication_id, worker_id=assignment.worker_id
        )
        if block.status == MTurkWorkerBlock.Status.PENDING:
            mturk_block_worker_task.delay_on_commit(block.pk)
    return block


@transaction.atomic(savepoint=False)
def mturk_worker_block(*, campaign_id: int, worker: Worker) -> list[MTurkWorkerBlock]:
    """A worker blocked from the campaign (``annotation.services.quality.worker_act``): like a worker
    with nothing left, they get the block-list qualification (``mturk_block_worker_task`` after commit)
    of each of the campaign's MTurk publications their channel comes through, so MTurk stops showing
    them its HITs. In the caller's transaction; a publication not published yet gets its block pushed
    by reconciliation once it is. Returns the blocks, one per publication (none for other channels)."""
    blocks = []
    for publication_id in Publication.objects.filter(
        campaign_id=campaign_id, kind=Publication.Kind.MTURK, worker_channel=worker.channel
    ).values_list("pk", flat=True):
        block, _ = MTurkWorkerBlock.objects.get_or_create(publication_id=publication_id, worker=worker)
        if block.status == MTurkWorkerBlock.Status.LIFTING:  # blocked again before the lift went out
            MTurkWorkerBlock.objects.filter(pk=block.pk).update(status=MTurkWorkerBlock.Status.PENDING)
            block.status = MTurkWorkerBlock.Status.PENDING
        if block.status == MTurkWorkerBlock.Status.PENDING:
            mturk_block_worker_task.delay_on_commit(block.pk)
        blocks.append(block)
    return blocks


@transaction.atomic(savepoint=False)
def mturk_worker_unblock(*, campaign_id: int, worker: Worker) -> int:
    """A worker unblocked in the campaign (``annotation.services.quality.worker_act``): their
    block-list qualification is lifted (``mturk_unblock_worker_task`` after commit) on each of the
    campaign's MTurk publications, except where they have nothing left (MTurk would show them HITs they
    cannot take). In the caller's transaction; returns how many blocks are being lifted."""
    blocks = (
        MTurkWorkerBlock.objects.filter(publication__campaign_id=campaign_id, worker=worker)
        .exclude(status=MTurkWorkerBlock.Status.LIFTING)
        .exclude(
            publication__in=Publication.objects.filter(
                hits__assignments__worker=worker, hits__assignments__nothing_left=True
            )
        )
    )
    lifting = list(blocks.values_list("pk", flat=True))
    MTurkWorkerBlock.objects.filter(pk__in=lifting).update(status=MTurkWorkerBlock.Status.LIFTING)
    for block_id in lifting:
        mturk_unblock_worker_task.delay_on_commit(block_id)
    return len(lifting)


def mturk_block_push(*, block_id: int) -> bool:
    """Send a pending block to MTurk; returns whether a call was made."""
    block = MTurkWorkerBlock.objects.select_related("publication", "worker").get(pk=block_id)
    if block.status != MTurkWorkerBlock.Status.PENDING or not block.publication.remote_block_id:
        return False
    get_channel(block.publication.channel).block_worker(
        block_id=block.publication.remote_block_id, worker_ref=block.worker.external_id
    )
    with transaction.atomic(durable=True):
        MTurkWorkerBlock.objects.filter(pk=block.pk).update(status=MTurkWorkerBlock.Status.DONE, done_at=timezone.now())
    return True


def mturk_block_lift(*, block_id: int) -> bool:
    """Lift a block being lifted on MTurk, then forget it; returns whether a call was made. MTurk is
    called outside any transaction; a block set again meanwhile (``mturk_worker_block``) wins: its
    qualification is pushed again, since this lift may have taken it away after it was pushed."""
    block = MTurkWorkerBlock.objects.select_related("publication", "worker").filter(pk=block_id).first()
    if block is None or block.status != MTurkWorkerBlock.Status.LIFTING:
        return False
    if block.publication.remote_block_id:
        get_channel(block.publication.channel).unblock_worker(
            block_id=block.publication.remote_block_id, worker_ref=block.worker.external_id
        )
    with transaction.atomic(durable=True):
        lifted, _ = MTurkWorkerBlock.objects.filter(pk=block.pk, status=MTurkWorkerBlock.Status.LIFTING).delete()
        blocked_again = not lifted and (
            MTurkWorkerBlock.objects.filter(pk=block.pk, status=MTurkWorkerBlock.Status.DONE).update(
                status=MTurkWorkerBlock.Status.PENDING
            )
        )
    if blocked_again:
        mturk_block_push(block_id=block.pk)
    return True


def mturk_bonus_grant(*, assignment: MTurkAssignment, amount, reason: str, user=None) -> MTurkBonus:
    """Grant a bonus; reconciliation pays it (with a token derived from the new row).

    A bonus is identified by its worker, publication, amount and reason. Granting an identical one again
    (a double-clicked form, a resubmitted page) raises BonusAlreadyGranted with the first row instead of
    writing a second one: a second row would carry a second token, which MTurk would pay a second time.
    A different amount or reason is a different bonus; a failed bonus does not count.

    Locks the publication's row, so two concurrent grants cannot both find no earlier bonus. A grant on a
    closed publication reopens it: reconciliation skips closed publications, and one with a pending
    bonus is not closed (see ``reconciliation._mark_reconciled``).
    """
    try:
        amount = Decimal(str(amount)).quantize(Decimal("0.01"))
    except InvalidOperation:
        raise PublicationRefused(f"amount must be in US dollars; got {amount!r}.", code="bad_amount") from None
    if not Decimal("0.01") <= amount <= MTURK_BONUS_MAX:
        raise PublicationRefused(f"A bonus must be from 0.01 to {MTURK_BONUS_MAX} US dollars.", code="bad_amount")
    if not reason.strip():
        raise PublicationRefused("Workers see the reason for a bonus: give one.", code="no_reason")
    if assignment.status not in (MTurkAssignment.Status.SUBMITTED, MTurkAssignment.Status.APPROVED):
        raise PublicationRefused("Only a submitted or approved assignment can get a bonus.", code="bad_assignment")
    reason = reason.strip()[:900]
    publication_id = MTurkHIT.objects.values_list("publication_id", flat=True).get(pk=assignment.hit_id)
    with transaction.atomic(durable=True):
        Publication.objects.select_for_update().filter(pk=publication_id).values_list("pk", flat=True).get()
        earlier = (
            MTurkBonus.objects.filter(
                assignment__hit__publication_id=publication_id,
                assignment__worker_id=assignment.worker_id,
                amount=amount,
                reason=reason,
            )
            .exclude(status=MTurkBonus.Status.FAILED)
            .select_related("assignment__worker")
            .order_by("pk")
            .first()
        )
        if earlier is not None:
            raise BonusAlreadyGranted(
                f'This bonus (${earlier.amount} to {earlier.assignment.worker.external_id}, "{earlier.reason}") was '
                f"already granted on {earlier.created_at:%Y-%m-%d %H:%M} UTC and is "
                f"{earlier.get_status_display().lower()}; "
                "it is paid once. To grant another, change the amount or the reason.",
                bonus=earlier,
            )
        bonus = MTurkBonus.objects.create(assignment=assignment, amount=amount, reason=reason, created_by=user)
        Publication.objects.filter(pk=publication_id, closed_at__isnull=False).update(closed_at=None)
        activity_record(
            campaign_id=Publication.objects.values_list("campaign_id", flat=True).get(pk=publication_id),
            verb="bonus.granted",
            summary=f"Granted a bonus of ${amount} to {assignment.worker.external_id}",
            detail={"publication_id": publication_id, "bonus_id": bonus.pk, "amount": str(amount), "reason": reason},
            actor=user,
        )
    return bonus
