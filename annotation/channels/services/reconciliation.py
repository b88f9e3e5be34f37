"""Reconciliation: bring an MTurk publication and MTurk into agreement, step by step (``mturk_reconcile``).

Run by the periodic ``mturk_reconcile_task`` and the ``mturk_reconcile`` command, never inside a
database transaction: each remote call is followed by a short transaction recording its outcome, so a
crash between the two is healed by the next run (every call is idempotent: tokens derived from our
rows, approvals and rejections read back when MTurk says they were already done).
"""

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from annotation.channels.base import BaseChannel, ChannelPermanentError, PreparedGroup, Submission
from annotation.channels.models import (
    MTurkAssignment,
    MTurkBonus,
    MTurkHIT,
    MTurkWorkerBlock,
    Publication,
    mturk_client_token,
)
from annotation.channels.pricing import MTURK_COMMISSION_THRESHOLD
from annotation.channels.registry import get_channel
from annotation.channels.services.mturk_task import mturk_block_lift, mturk_block_push
from annotation.channels.services.publishing import mturk_hit_publish, publication_publish
from annotation.models import Campaign, Label, Slot, Worker
from annotation.services import label_void, worker_get_or_create

logger = logging.getLogger(__name__)

REFILL_FEEDBACK = "No label was recorded in Chorus for this assignment."
# How long after an assignment's deadline reconciliation still waits for MTurk to list it as submitted
# before it voids the assignment's label: MTurk's listing may lag behind a submission made at the deadline.
MTURK_SUBMIT_GRACE = timedelta(minutes=5)


@dataclass
class ReconcileReport:
    """What one ``mturk_reconcile`` run did, counted per kind of action, and the remote errors it skipped."""

    publication_id: int
    hits: int = 0
    seen: int = 0
    approved: int = 0
    rejected: int = 0
    already_reviewed: int = 0
    refilled: int = 0
    bonuses_paid: int = 0
    blocks_pushed: int = 0
    blocks_lifted: int = 0
    extended: int = 0
    expired: int = 0
    abandoned: int = 0
    voided: int = 0
    errors: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        counts = ", ".join(
            f"{name} {getattr(self, name)}"
            for name in (
                "hits",
                "seen",
                "approved",
                "rejected",
                "already_reviewed",
                "refilled",
                "bonuses_paid",
                "blocks_pushed",
                "blocks_lifted",
                "extended",
                "expired",
                "abandoned",
                "voided",
            )
        )
        return f"publication {self.publication_id}: {counts}" + (
            f"; errors: {'; '.join(self.errors)}" if self.errors else ""
        )


FAILED = object()  # a reconciliation step that failed permanently this run


@dataclass
class _Run:
    """One run of ``mturk_reconcile`` on one publication: what its steps share."""

    publication: Publication
    channel: BaseChannel
    prepared: PreparedGroup
    report: ReconcileReport

    def attempt(self, what: str, call, *args, **kwargs):
        """Run one remote step; a permanent error is reported and skipped (the step is retried next
        run), a transient one ends this run (Celery / the next period retries)."""
        try:
            return call(*args, **kwargs)
        except ChannelPermanentError as exc:
            self.report.errors.append(f"{what}: {exc.message}")
            logger.warning("mturk_reconcile %s: %s: %s", self.publication.pk, what, exc.message)
            return FAILED


def mturk_reconcile(*, publication_id: int) -> ReconcileReport:
    """Bring one MTurk publication and MTurk into agreement. Idempotent; run by the periodic
    ``mturk_reconcile_task`` and the ``mturk_reconcile`` command.

    1. resume publishing if it stalled; push pending blocks;
    2. list every HIT's assignments (all pages): a label counts when its assignment is Submitted or
       Approved; approve Submitted ones whose label Chorus holds, reject those without (and refill);
       void the labels of assignments rejected, or no longer submittable and never listed (returned
       or expired), so their slots are free for other workers. An assignment submitted after its label
       was voided is still approved (the worker did the work) but its label stays void: by then another
       worker may hold the slot;
    3. pay pending bonuses (token per bonus row);
    4. keep HITs alive while the campaign wants labels; expire them once it is full, closed or withdrawn;
       then finish a withdrawal and close the publication once nothing can change on MTurk's side.
    """
    publication = Publication.objects.select_related("campaign").get(pk=publication_id)
    report = ReconcileReport(publication_id)
    if publication.kind != Publication.Kind.MTURK or publication.closed_at is not None:
        return report
    _resume_publishing(publication)
    if not publication.remote_group_id:
        return report
    prepared = PreparedGroup(publication.remote_group_id, publication.remote_block_id)
    run = _Run(publication=publication, channel=get_channel(publication.channel), prepared=prepared, report=report)

    _push_pending_blocks(run)
    listed_since = timezone.now()  # an assignment whose time ran out before this would be in the listing
    _review_submissions(run)
    _close_lapsed(run, listed_since=listed_since)
    _refill_rejected(run)
    _pay_pending_bonuses(run)
    now = timezone.now()  # one instant for the HITs' new expiry times and the publication's reconciled_at
    wanted = _keep_or_expire_hits(run, now=now)
    _mark_reconciled(run, now=now, wanted=wanted)
    return report


# --- Step 1: publishing and blocks ----------------------------------------------------------------------


def _resume_publishing(publication: Publication) -> None:
    """Step 1a: a publication still pending or publishing (a lost or failed task) is published now;
    ``publication`` is refreshed from the database afterwards."""
    if publication.status in (Publication.Status.PENDING, Publication.Status.PUBLISHING):
        publication_publish(publication_id=publication.pk)
        publication.refresh_from_db()


def _push_pending_blocks(run: _Run) -> None:
    """Step 1b: give the block-list qualification to workers with nothing left, or blocked, whose block
    was not pushed yet, and lift it from unblocked workers whose lift was not (``mturk_block_worker_task``
    or ``mturk_unblock_worker_task`` failed or never ran)."""
    for block_id, status in MTurkWorkerBlock.objects.filter(
        publication=run.publication, status__in=[MTurkWorkerBlock.Status.PENDING, MTurkWorkerBlock.Status.LIFTING]
    ).values_list("pk", "status"):
        if status == MTurkWorkerBlock.Status.PENDING:
            if run.attempt(f"block {block_id}", mturk_block_push, block_id=block_id) is True:
                run.report.blocks_pushed += 1
        elif run.attempt(f"lift block {block_id}", mturk_block_lift, block_id=block_id) is True:
            run.report.blocks_lifted += 1


# --- Step 2: assignments --------------------------------------------------------------------------------

_ORDER = {
    MTurkAssignment.Status.ACCEPTED: 0,
    MTurkAssignment.Status.ABANDONED: 0,
    MTurkAssignment.Status.SUBMITTED: 1,
    MTurkAssignment.Status.APPROVED: 2,
    MTurkAssignment.Status.REJECTED: 2,
}


def _review_submissions(run: _Run) -> None:
    """Step 2a: list every HIT's submitted, approved and rejected assignments (all pages), mirror each in
    Chorus (``_record_submission``) and review the ones still Submitted (``_review``)."""
    publication, report = run.publication, run.report
    hits = list(MTurkHIT.objects.filter(publication=publication, hit_id__isnull=False).order_by("index"))
    report.hits = len(hits)
    workers: dict[str, Worker] = {}
    for hit in hits:
        for submission in run.channel.sync_submissions(hit_id=hit.hit_id):
            report.seen += 1
            worker = workers.get(submission.worker_ref)
            if worker is None:
                worker = workers[submission.worker_ref] = worker_get_or_create(
                    channel=publication.worker_channel, external_id=submission.worker_ref
                )
            assignment = _record_submission(publication, hit, submission, worker)
            if submission.status == "submitted" and assignment.status == MTurkAssignment.Status.SUBMITTED:
                _review(run, assignment, worker)


def _record_submission(
    publication: Publication, hit: MTurkHIT, submission: Submission, worker: Worker
) -> MTurkAssignment:
    """Mirror one remote assignment: create or advance our row, attach the label Chorus holds for it."""
    remote = MTurkAssignment.Status(submission.status)
    with transaction.atomic(durable=True):
        assignment, created = MTurkAssignment.objects.select_for_update().get_or_create(
            assignment_id=submission.submission_id,
            defaults={"hit": hit, "worker": worker, "status": remote, "submitted_at": submission.submitted_at},
        )
        changed = []
        if not created and _ORDER[remote] > _ORDER[assignment.status]:
            assignment.status = remote
            changed.append("status")
        if assignment.submitted_at is None and submission.submitted_at:
            assignment.submitted_at = submission.submitted_at
            changed.append("submitted_at")
        if assignment.label_id is None and assignment.worker_id == worker.pk:
            label_id = (
                Label.objects.filter(worker=worker, client_token=mturk_client_token(submission.submission_id))
                .values_list("pk", flat=True)
                .first()
            )
            if label_id:
                assignment.label_id = label_id
                changed.append("label")
        if remote == MTurkAssignment.Status.REJECTED and assignment.refill == MTurkAssignment.Refill.NONE:
            assignment.refill = MTurkAssignment.Refill.PENDING
            changed.append("refill")
        if changed:
            assignment.save(update_fields=changed)
    if assignment.status == MTurkAssignment.Status.REJECTED:
        _void_label(assignment, "The MTurk assignment was rejected.")
    return assignment


def _review(run: _Run, assignment: MTurkAssignment, worker: Worker) -> None:
    """Approve a Submitted assignment whose label Chorus holds (from the same worker); reject one
    without (``REFILL_FEEDBACK``), which makes its refill pending."""
    if assignment.label_id is not None and assignment.worker_id == worker.pk:
        result = run.attempt(
            f"approve {assignment.assignment_id}",
            run.channel.approve,
            submission_id=assignment.assignment_id,
            feedback="Thank you!",
        )
    else:
        result = run.attempt(
            f"reject {assignment.assignment_id}",
            run.channel.reject,
            submission_id=assignment.assignment_id,
            feedback=REFILL_FEEDBACK,
        )
    if result is FAILED:
        return
    _record_review(assignment, result.status)
    if result.already:
        run.report.already_reviewed += 1
    elif result.status == "approved":
        run.report.approved += 1
    else:
        run.report.rejected += 1


def _record_review(assignment: MTurkAssignment, status: str) -> None:
    fields = {"status": status, "reviewed_at": timezone.now()}
    if status == MTurkAssignment.Status.REJECTED:
        fields["refill"] = MTurkAssignment.Refill.PENDING
    with transaction.atomic(durable=True):
        MTurkAssignment.objects.filter(pk=assignment.pk).exclude(status=status).update(**fields)


def _void_label(assignment: MTurkAssignment, reason: str) -> bool:
    """Void the assignment's label unless it is void already; returns whether it voided one."""
    if assignment.label_id is None or not Label.objects.counted().filter(pk=assignment.label_id).exists():
        return False
    label_void(label_id=assignment.label_id, reason=reason)
    return True


def _close_lapsed(run: _Run, *, listed_since: datetime) -> None:
    """Step 2b: assignments opened in Chorus that MTurk did not list as submitted, although their time
    ran out before the listing began (plus ``MTURK_SUBMIT_GRACE``): the worker returned the HIT or let it
    expire. MTurk gives the assignment back to its HIT by itself; Chorus frees the label's slot, since a
    label counts only when its assignment is Submitted or Approved."""
    publication, report = run.publication, run.report
    cutoff = listed_since - timedelta(seconds=publication.options["assignment_duration"]) - MTURK_SUBMIT_GRACE
    lapsed = MTurkAssignment.objects.filter(
        hit__publication=publication, status=MTurkAssignment.Status.ACCEPTED, opened_at__lt=cutoff
    )
    for assignment in lapsed:
        if _void_label(assignment, "The MTurk assignment was returned or expired without being submitted."):
            report.voided += 1
        with transaction.atomic(durable=True):
            report.abandoned += MTurkAssignment.objects.filter(
                pk=assignment.pk, status=MTurkAssignment.Status.ACCEPTED
            ).update(status=MTurkAssignment.Status.ABANDONED)


def _refill_rejected(run: _Run) -> None:
    """Step 2c: replace every rejected assignment whose refill is pending (``_refill``)."""
    for assignment in MTurkAssignment.objects.filter(
        hit__publication=run.publication, refill=MTurkAssignment.Refill.PENDING
    ).select_related("hit"):
        run.attempt(f"refill after {assignment.assignment_id}", _refill, run, assignment)


def _campaign_wants_labels(publication: Publication) -> bool:
    campaign = Campaign.objects.get(pk=publication.campaign_id)
    return (
        publication.status == Publication.Status.PUBLISHED
        and campaign.status == Campaign.Status.LIVE
        and Slot.objects.filter(campaign=campaign, filled=False).exists()
    )


def _refill(run: _Run, assignment: MTurkAssignment) -> None:
    """Replace the assignment a rejection used up: one more assignment on the same HIT (token from the
    assignment's row), or — when MTurk forbids it (a HIT created with fewer than 10 assignments cannot
    reach 10) — a new one-assignment HIT of the pool."""
    publication = run.publication
    if not _campaign_wants_labels(publication):
        with transaction.atomic(durable=True):
            MTurkAssignment.objects.filter(pk=assignment.pk).update(refill=MTurkAssignment.Refill.SKIPPED)
        return
    hit = MTurkHIT.objects.get(pk=assignment.hit_id)
    token = f"{publication.token_prefix}-r{assignment.pk}"
    if hit.max_assignments + 1 < MTURK_COMMISSION_THRESHOLD or hit.max_assignments >= MTURK_COMMISSION_THRESHOLD:
        run.channel.add_assignments(hit_id=hit.hit_id, count=1, token=token, expected_total=hit.max_assignments + 1)
        with transaction.atomic(durable=True):
            MTurkHIT.objects.filter(pk=hit.pk).update(max_assignments=F("max_assignments") + 1)
            MTurkAssignment.objects.filter(pk=assignment.pk).update(refill=MTurkAssignment.Refill.DONE)
    else:
        with transaction.atomic(durable=True):
            # The new HIT's row (and so its token) is derived from the assignment: a retry finds it again.
            new_hit, _ = MTurkHIT.objects.get_or_create(
                publication=publication, index=1_000_000 + assignment.pk, defaults={"max_assignments": 1}
            )
        if new_hit.hit_id is None:
            mturk_hit_publish(channel=run.channel, publication=publication, prepared=run.prepared, hit=new_hit)
        with transaction.atomic(durable=True):
            MTurkAssignment.objects.filter(pk=assignment.pk).update(refill=MTurkAssignment.Refill.DONE)
    run.report.refilled += 1


# --- Step 3: bonuses ------------------------------------------------------------------------------------


def _pay_pending_bonuses(run: _Run) -> None:
    """Step 3: pay every pending bonus of the publication, with the token derived from its row (a
    payment MTurk already made is recognised, not repeated)."""
    for bonus in MTurkBonus.objects.filter(
        assignment__hit__publication=run.publication, status=MTurkBonus.Status.PENDING
    ).select_related("assignment__worker", "assignment__hit__publication"):
        result = run.attempt(
            f"bonus {bonus.pk}",
            run.channel.pay_bonus,
            worker_ref=bonus.assignment.worker.external_id,
            submission_id=bonus.assignment.assignment_id,
            amount=bonus.amount,
            reason=f"{bonus.reason} (ref {bonus.token})",
            token=bonus.token,
        )
        if result is not FAILED:
            with transaction.atomic(durable=True):
                MTurkBonus.objects.filter(pk=bonus.pk).update(status=MTurkBonus.Status.SENT, sent_at=timezone.now())
            run.report.bonuses_paid += 0 if result.already else 1


# --- Step 4: HITs and the publication's state -----------------------------------------------------------


def _keep_or_expire_hits(run: _Run, *, now: datetime) -> bool:
    """Step 4a: while the campaign wants labels, extend every HIT that has less than half its lifetime
    left; once it does not (full, closed or withdrawn), expire the live ones. Returns whether the
    campaign wants labels (read once, after refreshing the publication)."""
    publication, report = run.publication, run.report
    publication.refresh_from_db()
    wanted = _campaign_wants_labels(publication)
    lifetime = timedelta(seconds=publication.options["lifetime"])
    for hit in MTurkHIT.objects.filter(publication=publication, hit_id__isnull=False):
        if wanted:
            if hit.expires_at is None or hit.expires_at - now < lifetime / 2:
                expires_at = now + lifetime
                if (
                    run.attempt(f"extend {hit.hit_id}", run.channel.extend, hit_id=hit.hit_id, expires_at=expires_at)
                    is FAILED
                ):
                    continue
                with transaction.atomic(durable=True):
                    MTurkHIT.objects.filter(pk=hit.pk).update(status=MTurkHIT.Status.LIVE, expires_at=expires_at)
                report.extended += 1
        elif hit.status == MTurkHIT.Status.LIVE:
            if run.attempt(f"expire {hit.hit_id}", run.channel.withdraw, hit_id=hit.hit_id) is not FAILED:
                with transaction.atomic(durable=True):
                    MTurkHIT.objects.filter(pk=hit.pk).update(
                        status=MTurkHIT.Status.EXPIRED, expires_at=min(now, hit.expires_at or now)
                    )
                report.expired += 1
    return wanted


def _mark_reconciled(run: _Run, *, now: datetime, wanted: bool) -> None:
    """Step 4b: stamp ``reconciled_at``; a withdrawal with no live HIT left is done; a publication
    nothing can change any more on MTurk's side (no live or recently expired HIT, no assignment
    accepted or waiting for review, no pending bonus) is closed, and reconciliation stops visiting it."""
    publication = run.publication
    with transaction.atomic(durable=True):
        fields = {"reconciled_at": now}
        if (
            publication.status == Publication.Status.WITHDRAWING
            and not MTurkHIT.objects.filter(publication=publication, status=MTurkHIT.Status.LIVE).exists()
        ):
            fields["status"] = Publication.Status.WITHDRAWN
        settle = (
            timedelta(seconds=publication.options["assignment_duration"] + publication.options["auto_approval_delay"])
            + MTURK_SUBMIT_GRACE
        )
        if (
            not wanted
            and publication.status in (Publication.Status.PUBLISHED, Publication.Status.WITHDRAWN)
            and not MTurkHIT.objects.filter(publication=publication, status=MTurkHIT.Status.LIVE).exists()
            and not MTurkHIT.objects.filter(publication=publication, expires_at__gt=now - settle).exists()
            and not MTurkAssignment.objects.filter(
                hit__publication=publication,
                status__in=[MTurkAssignment.Status.ACCEPTED, MTurkAssignment.Status.SUBMITTED],
            ).exists()
            and not MTurkBonus.objects.filter(
                assignment__hit__publication=publication, status=MTurkBonus.Status.PENDING
            ).exists()
        ):
            fields["closed_at"] = now  # nothing can change any more on MTurk's side
        Publication.objects.filter(pk=publication.pk).update(**fields)
