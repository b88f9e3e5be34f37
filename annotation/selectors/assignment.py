"""Reads behind the assignment engine: which slots are free, a worker's running lease, and whether a
worker would get work (the refusals lease_acquire and a campaign's front page share)."""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q, QuerySet
from django.http import Http404
from django.utils import timezone

from annotation.models import Campaign, Label, Lease, Participation, Prompt, Slot, Worker
from annotation.rows import Columns, fetch, for_update, table

_CAMPAIGN, _PROMPT, _LEASE = Columns(Campaign, "c"), Columns(Prompt, "p"), Columns(Lease, "l")


def slot_is_free(*, now: datetime) -> Q:
    """The condition for a slot to be free at ``now``: unfilled, and held by no lease (never leased, given
    back, or its lease ran out). ``free_slots`` reads it; lease_acquire's conditional UPDATE takes a slot
    only while it still holds."""
    return Q(filled=False) & (Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=now))


def free_slots(*, campaign: Campaign, now: datetime, worker: Worker | None = None) -> QuerySet[Slot]:
    """Slots of this campaign that are free (``slot_is_free``); given a worker, only on prompts this worker
    has never been leased. lease_acquire takes its prompt from these."""
    return _never_leased_to(worker, Slot.objects.filter(slot_is_free(now=now), campaign=campaign), campaign)


def _unfilled_slots(campaign: Campaign, worker: Worker | None) -> QuerySet[Slot]:
    return _never_leased_to(worker, Slot.objects.filter(campaign=campaign, filled=False), campaign)


def _never_leased_to(worker: Worker | None, slots: QuerySet[Slot], campaign: Campaign) -> QuerySet[Slot]:
    if worker is None:
        return slots
    return slots.exclude(prompt_id__in=Lease.objects.filter(campaign=campaign, worker=worker).values("prompt_id"))


def live_leases(*, campaign: Campaign, worker: Worker, now: datetime) -> QuerySet[Lease]:
    """The worker's leases in this campaign that are still running (at most one), unless its prompt was
    retired since: that one is never shown again (a condition on the join already made)."""
    return Lease.objects.filter(
        campaign=campaign,
        worker=worker,
        status=Lease.Status.ACTIVE,
        expires_at__gt=now,
        prompt__retired_at__isnull=True,
    )


def live_lease(*, campaign: Campaign, worker: Worker, now: datetime) -> Lease | None:
    """The worker's running lease in this campaign (``live_leases``), with its prompt, or None."""
    return live_leases(campaign=campaign, worker=worker, now=now).select_related("prompt").first()


CAP_REACHED = "cap_reached"
BLOCKED = "blocked"
# What a worker blocked from a campaign (services.quality.worker_act) hears, on every channel.
BLOCKED_REASON = (
    "The researchers of this campaign have stopped giving you prompts in it, so there is nothing more "
    "for you to label here."
)

# What the campaign's front page says when its status gives no work; lease_acquire's answer to a request
# for work is shorter ("This campaign is paused.").
_STATUS_NOTICES = {
    Campaign.Status.DRAFT: "This campaign is not launched yet.",
    Campaign.Status.PAUSED: "This campaign is paused: there is nothing to label right now. Come back later.",
    Campaign.Status.CLOSED: "This campaign is closed: it takes no more labels. Thank you for your interest!",
}


@dataclass(frozen=True)
class Refusal:
    """Why a worker gets no prompt whatever the slots hold (``refusal_before_slots``).

    ``code`` is ``blocked``, ``campaign_<status>`` or ``cap_reached``; ``reason`` answers a request for work
    (lease_acquire's ``NothingLeft``); ``notice`` is the campaign's front page's wording, before anybody
    asks (``worker_outlook``).
    """

    code: str
    reason: str
    notice: str


def labels_left_under_cap(*, campaign: Campaign, done: int) -> int | None:
    """How many more labels the campaign's cap per worker allows a worker who gave ``done``; None when it
    has no cap."""
    cap = campaign.max_labels_per_worker
    return None if cap is None else max(cap - done, 0)


def refusal_before_slots(*, campaign: Campaign, done: int | None, blocked: bool) -> Refusal | None:
    """The checks made before any slot is looked at: the worker is ``blocked`` from the campaign
    (``Participation.blocked_at``), the campaign is not live, or the worker who gave ``done`` labels in
    it has reached its cap per worker (``done`` None: nobody known, no cap to reach). lease_acquire and
    ``worker_outlook`` both ask this, so they refuse alike and in the same words. A block is said
    first: it outlasts a pause, so "come back later" would mislead."""
    if blocked:
        return Refusal(BLOCKED, BLOCKED_REASON, BLOCKED_REASON)
    if campaign.status != Campaign.Status.LIVE:
        reason = f"This campaign is {campaign.get_status_display().lower()}."
        return Refusal("campaign_" + campaign.status, reason, _STATUS_NOTICES[campaign.status])
    if done is not None and labels_left_under_cap(campaign=campaign, done=done) == 0:
        cap = campaign.max_labels_per_worker
        reason = f"You have given the {cap} labels this campaign allows per worker. Thank you!"
        return Refusal(CAP_REACHED, reason, reason)
    return None


@dataclass(frozen=True)
class WorkerOutlook:
    """What a campaign's front page tells a worker before they ask for work (``worker_outlook``).

    ``code`` is ``open``, or why asking would give nothing now: ``campaign_<status>`` (as lease_acquire
    says), ``full`` (every slot filled), ``busy`` (every slot left is leased to somebody else),
    ``blocked``, ``cap_reached`` or ``nothing_left`` (for this worker).
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
    EXISTS queries (the partial index over unfilled slots) and the worker's label count and block (one
    read); nothing counts or loops over prompts."""
    now = timezone.now()
    done, blocked_at = 0, None
    if worker is not None:
        standing = Participation.objects.filter(campaign=campaign, worker=worker)
        done, blocked_at = standing.values_list("n_labels", "blocked_at").first() or (0, None)
    refusal = refusal_before_slots(
        campaign=campaign, done=done if worker is not None else None, blocked=blocked_at is not None
    )
    # A prompt on the worker's screen beats their cap, as in lease_acquire; the page says a campaign is not
    # live even to a worker who still holds a lease in it.
    if (
        worker is not None
        and (refusal is None or refusal.code == CAP_REACHED)
        and live_lease(campaign=campaign, worker=worker, now=now) is not None
    ):
        return WorkerOutlook("open", done=done)
    if refusal is not None:
        return WorkerOutlook(refusal.code, refusal.notice, done)
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


def worker_lease(
    *,
    lease_id: int,
    worker: Worker,
    campaign_id: int | None = None,
    campaign_slug: str | None = None,
    label_token: bool = False,
    worker_labels: bool = False,
    lock: bool = False,
) -> Lease | None:
    """The worker's own lease (in this campaign, or the campaign of this slug, if given), with its campaign
    and prompt; None for anybody else's, as for one that never existed. ``label_token``: with the client
    token of the lease's label as ``lease.label_token`` (None: not labeled yet), so that a submit learns in
    the same query whether it repeats one. ``worker_labels``: with the worker's labels in the campaign as
    ``lease.worker_labels``, which a task page shows. ``lock``: locked (FOR UPDATE on PostgreSQL), for the
    services.

    One hand-written statement (``annotation.rows``): every request of the worker loop but the first reads
    its lease."""
    where, params = "l.id = %s AND l.worker_id = %s", [lease_id, worker.pk]
    if campaign_id is not None:
        where, params = where + " AND l.campaign_id = %s", [*params, campaign_id]
    if campaign_slug is not None:
        where, params = where + " AND c.slug = %s", [*params, campaign_slug]
    extra = []
    if label_token:
        extra.append(f"(SELECT client_token FROM {table(Label)} WHERE lease_id = l.id)")
    if worker_labels:
        extra.append(
            f"(SELECT n_labels FROM {table(Participation)} "
            "WHERE campaign_id = l.campaign_id AND worker_id = l.worker_id)"
        )
    rows = fetch(
        f"SELECT {', '.join([_LEASE.sql, _CAMPAIGN.sql, _PROMPT.sql, *extra])} FROM {table(Lease)} l "
        f"JOIN {table(Campaign)} c ON c.id = l.campaign_id JOIN {table(Prompt)} p ON p.id = l.prompt_id "
        f"WHERE {where}" + (for_update("l") if lock else ""),
        params,
    )
    if not rows:
        return None
    row, campaign_at, prompt_at = rows[0], len(_LEASE), len(_LEASE) + len(_CAMPAIGN)
    lease = _LEASE.load(row[:campaign_at])
    lease.campaign, lease.worker = _CAMPAIGN.load(row[campaign_at:prompt_at]), worker
    lease.prompt = _PROMPT.load(row[prompt_at : prompt_at + len(_PROMPT)])
    extra_at = prompt_at + len(_PROMPT)
    if label_token:
        lease.label_token, extra_at = row[extra_at], extra_at + 1
    if worker_labels:
        lease.worker_labels = row[extra_at] or 0  # no Participation row yet: no label yet
    return lease


def lease_for_worker(
    *, lease_id: int, worker: Worker, campaign: Campaign | None = None, campaign_slug: str | None = None
) -> Lease:
    """``worker_lease`` with the worker's labels (the task page's count), or 404 for anybody else's lease,
    as for one that never existed. Only for pages that need the lease itself: the lease services check
    the owner themselves (their ``not_leased`` refusal, which callers answer with a 404 too)."""
    lease = worker_lease(
        lease_id=lease_id,
        worker=worker,
        campaign_id=campaign and campaign.pk,
        campaign_slug=campaign_slug,
        worker_labels=True,
    )
    if lease is None:
        raise Http404("No such lease.")
    return lease
