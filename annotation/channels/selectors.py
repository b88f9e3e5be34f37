"""Reads of the channels app for views, commands and tasks."""
from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Count, Q, QuerySet, Sum
from django.shortcuts import get_object_or_404

from annotation.channels.models import MTurkAssignment, MTurkBonus, MTurkHIT, MTurkWorkerBlock, PanelSession, Publication
from annotation.models import Label
from annotation.selectors import campaigns_visible_to


def publication_for_user(*, user, pk: int) -> Publication:
    """A publication of a campaign the user may manage; 404 for anybody else."""
    return get_object_or_404(
        Publication.objects.select_related("campaign"), pk=pk, campaign__in=campaigns_visible_to(user=user)
    )


def publications_of(*, campaign) -> QuerySet[Publication]:
    return Publication.objects.filter(campaign=campaign).select_related("panel").order_by("-created_at")


@dataclass(frozen=True)
class MTurkProgress:
    """Published, accepted (opened on Chorus's task page), labeled, submitted, approved, rejected."""

    hits_planned: int
    hits_live: int
    hits_expired: int
    assignments_published: int
    accepted: int
    labeled: int
    submitted: int
    approved: int
    rejected: int
    nothing_left: int
    blocked: int
    bonuses_sent: Decimal
    bonuses_pending: Decimal
    rewards_approved: Decimal


def mturk_progress(*, publication: Publication) -> MTurkProgress:
    hits = MTurkHIT.objects.filter(publication=publication).aggregate(
        planned=Count("id", filter=Q(status=MTurkHIT.Status.PLANNED)),
        live=Count("id", filter=Q(status=MTurkHIT.Status.LIVE)),
        expired=Count("id", filter=Q(status=MTurkHIT.Status.EXPIRED)),
        published=Sum("max_assignments", filter=Q(hit_id__isnull=False)),
    )
    S = MTurkAssignment.Status
    assignments = MTurkAssignment.objects.filter(hit__publication=publication).aggregate(
        accepted=Count("id"),
        labeled=Count("id", filter=Q(label__isnull=False)),
        submitted=Count("id", filter=Q(status__in=[S.SUBMITTED, S.APPROVED, S.REJECTED])),
        approved=Count("id", filter=Q(status=S.APPROVED)),
        rejected=Count("id", filter=Q(status=S.REJECTED)),
        nothing_left=Count("id", filter=Q(nothing_left=True)),
    )
    bonuses = MTurkBonus.objects.filter(assignment__hit__publication=publication).aggregate(
        sent=Sum("amount", filter=Q(status=MTurkBonus.Status.SENT)),
        pending=Sum("amount", filter=Q(status=MTurkBonus.Status.PENDING)),
    )
    reward = Decimal(publication.options.get("reward", "0"))
    return MTurkProgress(
        hits_planned=hits["planned"], hits_live=hits["live"], hits_expired=hits["expired"],
        assignments_published=hits["published"] or 0, accepted=assignments["accepted"], labeled=assignments["labeled"],
        submitted=assignments["submitted"], approved=assignments["approved"], rejected=assignments["rejected"],
        nothing_left=assignments["nothing_left"],
        blocked=MTurkWorkerBlock.objects.filter(publication=publication, status=MTurkWorkerBlock.Status.DONE).count(),
        bonuses_sent=bonuses["sent"] or Decimal("0"), bonuses_pending=bonuses["pending"] or Decimal("0"),
        rewards_approved=reward * assignments["approved"],
    )


@dataclass(frozen=True)
class PanelProgress:
    sessions: int
    completed: int
    labels: int


def panel_progress(*, publication: Publication) -> PanelProgress:
    totals = PanelSession.objects.filter(panel__publication=publication).aggregate(
        sessions=Count("id"), completed=Count("id", filter=Q(completed_at__isnull=False)), labels=Sum("n_labels")
    )
    return PanelProgress(sessions=totals["sessions"], completed=totals["completed"], labels=totals["labels"] or 0)


def mturk_assignment_label(*, assignment: MTurkAssignment) -> Label | None:
    from annotation.channels.services import mturk_client_token

    return Label.objects.filter(worker_id=assignment.worker_id, client_token=mturk_client_token(assignment.assignment_id)).first()
