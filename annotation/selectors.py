"""Reads for views, the API, commands and tasks."""
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Max, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce
from django.shortcuts import get_object_or_404
from django.utils import timezone

from annotation.models import Campaign, Invitation, Label, Lease, Participation, Prompt, Slot, Worker

EXPORT_FIELDS = [
    "worker", "prompt", "value", "gold", "group", "created_at",
    "leased_at", "time_spent_s", "campaign", "label_id", "prompt_text",
]


@dataclass(frozen=True)
class Progress:
    n_prompts: int
    k: int
    labels: int
    prompts_complete: int

    @property
    def labels_wanted(self) -> int:
        return self.n_prompts * self.k

    @property
    def percent(self) -> float:
        return 100.0 * self.labels / self.labels_wanted if self.labels_wanted else 0.0


def campaign_progress(*, campaign: Campaign) -> Progress:
    totals = Prompt.objects.filter(campaign=campaign).aggregate(
        n=Count("id"), labels=Sum("n_labels"), complete=Count("id", filter=Q(n_labels__gte=campaign.k))
    )
    return Progress(
        n_prompts=totals["n"], k=campaign.k, labels=totals["labels"] or 0, prompts_complete=totals["complete"]
    )


def campaigns_visible_to(*, user) -> QuerySet[Campaign]:
    if user.is_staff:
        return Campaign.objects.all()
    return Campaign.objects.filter(Q(owner=user) | Q(collaborators=user)).distinct()


def campaign_for_user(*, user, slug: str) -> Campaign:
    """The campaign a researcher may manage (owner, collaborator or staff); 404 for anyone else, so a
    stranger cannot even learn that the slug exists."""
    return get_object_or_404(campaigns_visible_to(user=user), slug=slug)


def campaigns_for_workers(*, user) -> QuerySet[Campaign]:
    """The campaigns whose worker-facing pages (``/w/<slug>/…``, invitation links, panel links, the
    worker API) answer ``user``: every campaign once launched; one never launched (a draft, or one
    closed before launch) only to those who manage it, so that its title and instructions stay
    private until launch. Slugs come from titles and are easy to guess."""
    launched = Q(launched_at__isnull=False)
    if not user.is_authenticated:
        return Campaign.objects.filter(launched)
    # A subquery, not a join: a join on the collaborators would repeat a launched campaign per collaborator.
    return Campaign.objects.filter(launched | Q(pk__in=campaigns_visible_to(user=user).values("pk")))


def campaign_for_workers(*, slug: str, user) -> Campaign:
    """The campaign of a worker-facing URL (``campaigns_for_workers``); 404 for one ``user`` may not see,
    exactly as for a slug that does not exist. Whether it hands out work is lease_acquire's call."""
    return get_object_or_404(campaigns_for_workers(user=user), slug=slug)


def free_slots(*, campaign: Campaign, now: datetime, worker: Worker | None = None) -> QuerySet[Slot]:
    """Slots of this campaign that are free (never leased, or their lease expired); given a worker, only
    on prompts this worker has never been leased. lease_acquire takes its prompt from these."""
    return _unfilled_slots(campaign, worker).filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=now))


def _unfilled_slots(campaign: Campaign, worker: Worker | None) -> QuerySet[Slot]:
    slots = Slot.objects.filter(campaign=campaign, filled=False)
    if worker is not None:
        slots = slots.exclude(prompt_id__in=Lease.objects.filter(campaign=campaign, worker=worker).values("prompt_id"))
    return slots


def live_lease(*, campaign: Campaign, worker: Worker, now: datetime) -> Lease | None:
    """The worker's lease in this campaign that is still running, with its prompt (at most one)."""
    return (
        Lease.objects.select_related("prompt")
        .filter(campaign=campaign, worker=worker, status=Lease.Status.ACTIVE, expires_at__gt=now)
        .first()
    )


@dataclass(frozen=True)
class WorkerOutlook:
    """What a campaign's front page tells a worker before they ask for work (``worker_outlook``).

    ``code`` is ``open``, or why asking would give nothing now: ``campaign_<status>`` (as lease_acquire
    says), ``full`` (every slot filled), ``busy`` (every slot left is leased to somebody else),
    ``cap_reached`` or ``nothing_left`` (for this worker).
    """

    code: str
    message: str = ""
    done: int = 0  # the worker's labels in this campaign

    @property
    def is_open(self) -> bool:
        return self.code == "open"


def worker_outlook(*, campaign: Campaign, worker: Worker | None) -> WorkerOutlook:
    """Whether ``worker`` (None: somebody not signed in) would get a prompt if they asked now, and if
    not, why. A forecast, not a promise: lease_acquire decides when they ask. At most four indexed
    EXISTS queries (the partial index over unfilled slots) and the worker's label count; nothing counts
    or loops over prompts."""
    now = timezone.now()
    done = worker_label_count(campaign=campaign, worker=worker) if worker is not None else 0
    if campaign.status != Campaign.Status.LIVE:
        messages = {
            Campaign.Status.DRAFT: "This campaign is not launched yet.",
            Campaign.Status.PAUSED: "This campaign is paused: there is nothing to label right now. Come back later.",
            Campaign.Status.CLOSED: "This campaign is closed: it takes no more labels. Thank you for your interest!",
        }
        return WorkerOutlook("campaign_" + campaign.status, messages[campaign.status], done)
    if worker is not None:
        if live_lease(campaign=campaign, worker=worker, now=now) is not None:
            return WorkerOutlook("open", done=done)
        cap = campaign.max_labels_per_worker
        if cap is not None and done >= cap:
            return WorkerOutlook(
                "cap_reached", f"You have given the {cap} labels this campaign allows per worker. Thank you!", done
            )
    if free_slots(campaign=campaign, now=now, worker=worker).exists():
        return WorkerOutlook("open", done=done)
    if _unfilled_slots(campaign, worker).exists():
        return WorkerOutlook(
            "busy",
            "Every prompt still open is being labeled by somebody right now. Places free up when somebody "
            "stops or runs out of time: come back in a few minutes.",
            done,
        )
    if worker is not None and _unfilled_slots(campaign, None).exists():
        return WorkerOutlook("nothing_left", "You have labeled everything this campaign has for you. Thank you!", done)
    return WorkerOutlook(
        "full", "This campaign is full: every prompt has all the labels it needs. Thank you for your interest!", done
    )


def invitation_for_join(*, campaign: Campaign, token: str) -> Invitation | None:
    """The campaign's invitation with this token, with its guest account; None when there is none or
    it expired unused."""
    invitation = Invitation.objects.select_related("user").filter(campaign=campaign, token=token).first()
    if invitation is None or invitation.is_expired:
        return None
    return invitation


def invitations_of(*, campaign: Campaign) -> QuerySet[Invitation]:
    """The campaign's invitations, newest first, each with its guest account and ``worker_labels``, the
    labels that account gave in this campaign."""
    labels = Participation.objects.filter(campaign=campaign, worker__user=OuterRef("user")).values("n_labels")[:1]
    return (
        Invitation.objects.filter(campaign=campaign)
        .select_related("user")
        .annotate(worker_labels=Coalesce(Subquery(labels), 0))
    )


def lease_for_worker(*, lease_id: int, worker: Worker, campaign: Campaign | None = None) -> Lease:
    """The worker's own lease (in this campaign, if given), with its prompt; 404 for anybody else's,
    as for one that never existed. Only for pages that need the lease itself: the lease services
    check the owner themselves (their ``not_leased`` refusal, which callers answer with a 404 too)."""
    leases = Lease.objects.select_related("prompt", "campaign", "worker").filter(worker=worker)
    if campaign is not None:
        leases = leases.filter(campaign=campaign)
    return get_object_or_404(leases, pk=lease_id)


def worker_label_count(*, campaign: Campaign, worker: Worker) -> int:
    return (
        Participation.objects.filter(campaign=campaign, worker=worker).values_list("n_labels", flat=True).first() or 0
    )


@dataclass(frozen=True)
class LiveLeases:
    count: int  # prompts on workers' screens now, whose labels would still be accepted
    until: datetime | None  # when the last of these leases runs out, if none is extended


def campaign_live_leases(*, campaign: Campaign) -> LiveLeases:
    """The leases running now, from the slots they hold (the partial index over unfilled slots)."""
    held = Slot.objects.filter(campaign=campaign, filled=False, lease_expires_at__gt=timezone.now())
    totals = held.aggregate(count=Count("id"), until=Max("lease_expires_at"))
    return LiveLeases(count=totals["count"], until=totals["until"])


# The task page's "about N left for you" stops counting at this many prompts, so it reads at most k
# times as many slots: it costs the same for 10k prompts as for 1M.
PROMPTS_LEFT_COUNTED = 500


@dataclass(frozen=True)
class WorkerProgress:
    """A worker's progress in a campaign, as the task page shows it."""

    labeled: int
    left: int  # prompts still open to them, the one on their screen included
    more: bool  # the count stopped at PROMPTS_LEFT_COUNTED: there may be more


def worker_progress(
    *, campaign: Campaign, worker: Worker, quota_left: int | None = None, labeled: int | None = None
) -> WorkerProgress:
    """For a worker on a task page: the labels they gave in this campaign, and about how many prompts are
    left for them: the one on their screen, and those with an unfilled slot that they were never leased;
    at most what the campaign's cap per worker and ``quota_left`` (a channel's own quota) still allow.

    "About": a prompt counts while other workers hold its open slots, and they take and give back
    slots at any moment. Two queries: the worker's label count, and a count over at most
    ``PROMPTS_LEFT_COUNTED`` × k unfilled slots (their partial index); one, when the caller passes
    ``labeled`` (lease_acquire's ``worker_labels``, read under its lock).
    """
    if labeled is None:
        labeled = worker_label_count(campaign=campaign, worker=worker)
    limits = [] if quota_left is None else [quota_left]
    if campaign.max_labels_per_worker is not None:
        limits.append(campaign.max_labels_per_worker - labeled)
    limit = max(min(limits), 0) if limits else None
    bound = PROMPTS_LEFT_COUNTED if limit is None else min(limit, PROMPTS_LEFT_COUNTED)
    # A prompt has at most k unfilled slots, so the first n × k of them hold at least n prompts, or they
    # are all there are.
    sample = _unfilled_slots(campaign, worker).values("prompt_id")[: max(bound - 1, 0) * campaign.k]
    left = min(1 + sample.aggregate(n=Count("prompt_id", distinct=True))["n"], bound)
    more = left == PROMPTS_LEFT_COUNTED and (limit is None or limit > PROMPTS_LEFT_COUNTED)
    return WorkerProgress(labeled=labeled, left=left, more=more)


def campaign_labels(*, campaign: Campaign, worker: str = "", prompt: str = "", since=None) -> QuerySet[Label]:
    """The campaign's labels in label order, optionally only one worker's (by public id,
    ``channel:external id``), one prompt's (by its imported id) or those created at or after ``since``.
    Void labels are left out: they do not count."""
    labels = Label.objects.counted().filter(campaign=campaign)
    if worker:
        channel, _, external_id = worker.partition(":")
        labels = labels.filter(worker__channel=channel, worker__external_id=external_id)
    if prompt:
        labels = labels.filter(prompt__external_id=prompt)
    if since is not None:
        labels = labels.filter(created_at__gte=since)
    return labels.order_by("id")


def label_export_rows(*, campaign: Campaign, labels: QuerySet[Label] | None = None, chunk_size: int = 2000):
    """One dict per audit unit, in label order: a labels file (noise-audit.md, "Files and field names").

    ``labels`` narrows the rows to some of the campaign's labels (``campaign_labels``, one page of
    them); by default all. A per-option label yields one row per option, with prompt
    ``<prompt id>#<option number>``: each option is the unit the audit sees.
    """
    if labels is None:
        labels = campaign_labels(campaign=campaign)
    labels = labels.select_related("worker", "prompt").order_by("id").iterator(chunk_size=chunk_size)
    for label in labels:
        base = {
            "worker": label.worker.public_id,
            "group": label.prompt.group,
            "created_at": label.created_at.isoformat(),
            "leased_at": label.leased_at.isoformat(),
            "time_spent_s": round(label.time_spent.total_seconds(), 3),
            "campaign": campaign.slug,
            "label_id": label.pk,
            "prompt_text": label.prompt.text,
        }
        prompt = label.prompt
        if isinstance(label.value, list):
            gold = prompt.gold if isinstance(prompt.gold, list) else [None] * len(label.value)
            for number, (value, gold_value) in enumerate(zip(label.value, gold), start=1):
                yield {**base, "prompt": f"{prompt.external_id}#{number}", "value": value, "gold": gold_value,
                       "prompt_text": f"{prompt.text} — {prompt.options[number - 1]}"}
        else:
            yield {**base, "prompt": prompt.external_id, "value": label.value, "gold": prompt.gold}
