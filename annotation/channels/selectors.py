"""Reads of the channels app for views, commands and tasks."""

from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, PermissionDenied
from django.db.models import Count, Q, QuerySet, Sum
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.urls import reverse

from annotation.channels.models import (
    MTurkAssignment,
    MTurkBonus,
    MTurkHIT,
    MTurkWorkerBlock,
    PanelConfig,
    PanelSession,
    Publication,
    mturk_client_token,
)
from annotation.channels.registry import get_channel
from annotation.models import Campaign, Label, Prompt, Slot, Worker
from annotation.permissions import edit_check, is_campaign_owner
from annotation.rows import Columns, fetch, table
from annotation.selectors import campaigns_for_workers, campaigns_visible_to


def publication_for_user(*, user, pk: int) -> Publication:
    """A publication of a campaign the user may manage; 404 for anybody else."""
    return get_object_or_404(
        Publication.objects.select_related("campaign"), pk=pk, campaign__in=campaigns_visible_to(user=user)
    )


def publication_for_request(request, pk: int) -> Publication:
    """A publication of a researcher's page or API call: ``publication_for_user``'s, and ``edit_check``'s
    403 for a viewer's request that would change something."""
    publication = publication_for_user(user=request.user, pk=pk)
    edit_check(request=request, campaign=publication.campaign)
    return publication


def may_spend(*, user, publication: Publication) -> bool:
    """Whether the user may spend money on the publication (grant bonuses): owner's rights, as for
    sharing; collaborators only watch."""
    return is_campaign_owner(user=user, campaign=publication.campaign)


def publication_for_owner(*, user, pk: int) -> Publication:
    """A publication the user may spend money on; 403 for the campaign's collaborators (who see it),
    404 for everybody else."""
    publication = publication_for_user(user=user, pk=pk)
    if not may_spend(user=user, publication=publication):
        raise PermissionDenied("Only the campaign's owner can grant bonuses.")
    return publication


def publications_of(*, campaign) -> QuerySet[Publication]:
    return Publication.objects.filter(campaign=campaign).select_related("panel").order_by("-created_at")


def panel_study_url(*, publication: Publication, base: str | None = None) -> str | None:
    """The link a panel's participants open, with the panel's placeholders (Prolific fills
    ``{{%PROLIFIC_PID%}}``-style ones; other panels have their own, shown as ``<NAME>``). ``base``: the
    absolute URL of the entry page; else ``CHORUS_PUBLIC_URL`` + its path."""
    panel = getattr(publication, "panel", None)
    if panel is None:
        return None
    placeholder = "{{%%%s%%}}" if publication.channel == "prolific" else "<%s>"
    names = [panel.participant_param, panel.study_param, panel.session_param]
    params = "&".join(f"{name}={placeholder % name}" for name in names if name)
    if base is None:
        base = settings.CHORUS_PUBLIC_URL.rstrip("/") + reverse("channels:panel_entry", args=[panel.slug])
    return f"{base}?{params}"


def publications_to_reconcile() -> QuerySet[Publication]:
    """The MTurk publications reconciliation still visits: not closed, not failed; oldest first."""
    return (
        Publication.objects.filter(kind=Publication.Kind.MTURK, closed_at__isnull=True)
        .exclude(status=Publication.Status.FAILED)
        .order_by("pk")
    )


def labels_still_needed(*, campaign: Campaign) -> int:
    """Open slots: the labels the campaign still wants from any channel. With adaptive k, the most it may
    still take: its open slots, plus the slots its open prompts may still get, up to k_max each (a
    prompt whose rule stopped it has no open slot)."""
    open_slots = Slot.objects.filter(campaign=campaign, filled=False)
    needed = open_slots.count()
    if campaign.k_max is None:
        return needed
    open_prompts = open_slots.values("prompt_id").distinct()
    slots_of_open_prompts = Slot.objects.filter(campaign=campaign, prompt_id__in=open_prompts).count()
    return needed + open_prompts.count() * campaign.k_max - slots_of_open_prompts


def publication_for_mturk_task(*, pk: int) -> Publication:
    """The MTurk publication named by the task page's URL, with its campaign; 404 for anything else.
    Anybody may open it: MTurk's frame carries no sign-in (the task page says who the worker is)."""
    return get_object_or_404(Publication.objects.select_related("campaign"), pk=pk, kind=Publication.Kind.MTURK)


def mturk_hit_of(*, publication: Publication, hit_id: str) -> MTurkHIT | None:
    """The publication's HIT by MTurk's id for it; None for a HIT of anything else."""
    return MTurkHIT.objects.filter(publication=publication, hit_id=hit_id).first()


def mturk_hits_of(*, publication: Publication) -> QuerySet[MTurkHIT]:
    return MTurkHIT.objects.filter(publication=publication).order_by("index")


def mturk_assignment_for_task(
    *, publication_id: int, hit_id: str, assignment_id: str, worker_id: str
) -> MTurkAssignment | None:
    """The assignment a task page's signed token names (MTurk's ids), with its worker, HIT, publication
    and campaign; None if no task page opened it."""
    return (
        MTurkAssignment.objects.select_related("worker", "hit__publication__campaign")
        .filter(
            assignment_id=assignment_id,
            hit__hit_id=hit_id,
            worker__external_id=worker_id,
            hit__publication_id=publication_id,
        )
        .first()
    )


_PANEL, _PUBLICATION, _CAMPAIGN = Columns(PanelConfig, "pc"), Columns(Publication, "pb"), Columns(Campaign, "c")
_SESSION, _WORKER = Columns(PanelSession, "ps"), Columns(Worker, "w")


def panel_for_workers(*, slug: str, user) -> PanelConfig:
    """A panel by the slug of its participants' link, with its publication and campaign; 404 if none, or
    if its campaign's worker pages are closed to ``user`` (``campaigns_for_workers``: never launched).
    Hand-written (``annotation.rows``): every request of a participant reads it."""
    rows = fetch(
        f"SELECT {_PANEL.sql}, {_PUBLICATION.sql}, {_CAMPAIGN.sql} FROM {table(PanelConfig)} pc "
        f"JOIN {table(Publication)} pb ON pb.id = pc.publication_id JOIN {table(Campaign)} c ON c.id = pb.campaign_id "
        "WHERE pc.slug = %s",
        [slug],
    )
    if not rows:
        raise Http404("No such study link.")
    row, publication_at, campaign_at = rows[0], len(_PANEL), len(_PANEL) + len(_PUBLICATION)
    panel, publication = _PANEL.load(row[:publication_at]), _PUBLICATION.load(row[publication_at:campaign_at])
    publication.campaign, panel.publication = _CAMPAIGN.load(row[campaign_at:]), publication
    if publication.campaign.launched_at is None:  # only then does it matter who asks
        get_object_or_404(campaigns_for_workers(user=user), pk=publication.campaign_id)
    return panel


def panel_session_of(*, panel: PanelConfig, pk: int) -> PanelSession | None:
    """The panel's session ``pk`` (kept in the browser's session), with its worker; None if it is gone.
    Hand-written, as ``panel_for_workers``."""
    rows = fetch(
        f"SELECT {_SESSION.sql}, {_WORKER.sql} FROM {table(PanelSession)} ps "
        f"JOIN {table(Worker)} w ON w.id = ps.worker_id WHERE ps.id = %s AND ps.panel_id = %s",
        [pk, panel.pk],
    )
    if not rows:
        return None
    session = _SESSION.load(rows[0][: len(_SESSION)])
    session.worker, session.panel = _WORKER.load(rows[0][len(_SESSION) :]), panel
    return session


# Assignments MTurk pays a bonus for (SendBonus refuses any other status).
BONUS_ASSIGNMENT_STATUSES = (MTurkAssignment.Status.SUBMITTED, MTurkAssignment.Status.APPROVED)


def mturk_bonus_workers(*, publication: Publication) -> list[str]:
    """The MTurk worker ids of the publication that can get a bonus (a submitted or approved assignment)."""
    return list(
        MTurkAssignment.objects.filter(hit__publication=publication, status__in=BONUS_ASSIGNMENT_STATUSES)
        .values_list("worker__external_id", flat=True)
        .distinct()
        .order_by("worker__external_id")
    )


def mturk_bonus_assignment(*, publication: Publication, worker_ref: str) -> MTurkAssignment | None:
    """The assignment a bonus to this MTurk worker is sent with (MTurk pays bonuses per assignment), or
    None if the worker has no submitted or approved assignment in the publication. The worker's oldest
    one, so that repeating a grant names the same assignment."""
    return (
        MTurkAssignment.objects.select_related("worker")
        .filter(
            hit__publication=publication, worker__external_id__iexact=worker_ref, status__in=BONUS_ASSIGNMENT_STATUSES
        )
        .order_by("pk")
        .first()
    )


def mturk_bonuses_of(*, publication: Publication) -> QuerySet[MTurkBonus]:
    """The publication's bonuses, newest first, with what the page shows (worker, token, who granted)."""
    return (
        MTurkBonus.objects.filter(assignment__hit__publication=publication)
        .select_related("assignment__worker", "assignment__hit__publication", "created_by")
        .order_by("-created_at", "-pk")
    )


@dataclass(frozen=True)
class MTurkProgress:
    """Published, accepted (opened on Chorus's task page), labeled, submitted, approved, rejected."""

    hits_planned: int
    hits_live: int
    hits_expired: int
    assignments_published: int
    accepted: int
    labeled: int
    voided: int
    abandoned: int
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
        voided=Count("id", filter=Q(label__voided_at__isnull=False)),
        abandoned=Count("id", filter=Q(status=S.ABANDONED)),
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
        hits_planned=hits["planned"],
        hits_live=hits["live"],
        hits_expired=hits["expired"],
        assignments_published=hits["published"] or 0,
        accepted=assignments["accepted"],
        labeled=assignments["labeled"],
        voided=assignments["voided"],
        abandoned=assignments["abandoned"],
        submitted=assignments["submitted"],
        approved=assignments["approved"],
        rejected=assignments["rejected"],
        nothing_left=assignments["nothing_left"],
        blocked=MTurkWorkerBlock.objects.filter(publication=publication, status=MTurkWorkerBlock.Status.DONE).count(),
        bonuses_sent=bonuses["sent"] or Decimal("0"),
        bonuses_pending=bonuses["pending"] or Decimal("0"),
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
    """The label the task page recorded for the assignment (under the assignment's client token), with
    its prompt and campaign; None before there is one."""
    labels = Label.objects.select_related("prompt", "campaign")  # the submit page shows both
    return labels.filter(
        worker_id=assignment.worker_id, client_token=mturk_client_token(assignment.assignment_id)
    ).first()


def panel_preview_prompt(*, campaign: Campaign, seed: int) -> tuple[Prompt | None, int]:
    """A prompt to show a researcher trying the study as a participant (``panel_try``), and how many
    there are: the ``seed``-th of the campaign's normal prompts, counted round (a control is a test, not
    what participants mostly see); None without prompts. Read only: no lease, no slot."""
    prompts = campaign.prompts.filter(is_control=False).order_by("pk")
    count = prompts.count()
    return (prompts[seed % count] if count else None), count


def mturk_setup_problems(*, alias: str = "mturk") -> list[str]:
    """What stops publishing on MTurk in this deployment, each naming what to set (the README's
    configuration table): the channel's configuration (``CHORUS_CHANNELS``), its backend's own needs
    (``BaseChannel.setup_problems``: credentials), and ``CHORUS_PUBLIC_URL``, which
    ``publication_create_mturk`` requires. Empty when nothing is missing."""
    try:
        problems = get_channel(alias).setup_problems()
    except ImproperlyConfigured as exc:
        problems = [str(exc)]
    if not settings.CHORUS_PUBLIC_URL.startswith("https://"):
        problems.append(
            "CHORUS_PUBLIC_URL is not set to Chorus's public https:// address, where MTurk opens the task page."
        )
    return problems
