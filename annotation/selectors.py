"""Reads for views, the API, commands and tasks."""

import dataclasses
import math
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING

from django.db.models import Count, Exists, F, IntegerField, Max, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce
from django.shortcuts import get_object_or_404
from django.utils import timezone

from annotation.channels.pricing import CostPreview, mturk_cost_preview
from annotation.models import (
    Campaign,
    ImportBatch,
    Invitation,
    Label,
    Lease,
    Participation,
    Prompt,
    Slot,
    StopDecision,
    Worker,
    WorkerAction,
)

if TYPE_CHECKING:  # annotation.services imports this module
    from annotation.services.adaptive import StopPlan

EXPORT_FIELDS = [
    "worker",
    "prompt",
    "value",
    "gold",
    "group",
    "created_at",
    "leased_at",
    "time_spent_s",
    "campaign",
    "label_id",
    "prompt_text",
    "control",
    "excluded",
    "final_k",
    "k_rule",
]


@dataclass(frozen=True)
class Progress:
    """A campaign's labels against what it wants. With adaptive k, ``slots`` is the prompts' slots now
    (each prompt's own number of labels as decided so far, which grows while prompts get one more label
    up to ``k_max``); a fixed k wants ``n_prompts`` × k."""

    n_prompts: int
    k: int
    labels: int
    prompts_complete: int
    k_max: int | None = None
    slots: int | None = None

    @property
    def labels_wanted(self) -> int:
        return self.n_prompts * self.k if self.slots is None else self.slots

    @property
    def percent(self) -> float:
        return 100.0 * self.labels / self.labels_wanted if self.labels_wanted else 0.0


def campaign_progress(*, campaign: Campaign) -> Progress:
    """The campaign's progress over its prompts that are not controls: a campaign is complete when each of
    them has its labels. Controls (``services.controls``) take labels outside any k, so they are left out."""
    totals = Prompt.objects.filter(campaign=campaign, is_control=False).aggregate(
        n=Count("id"), labels=Sum("n_labels"), complete=Count("id", filter=Q(n_labels__gte=campaign.k))
    )
    if campaign.k_max is not None:
        # Adaptive k: a prompt is complete once it has no open slot (the rule stopped it), and the labels
        # wanted are the slots so far. Controls have no slots.
        open_prompts = Slot.objects.filter(campaign=campaign, filled=False).values("prompt_id").distinct().count()
        return Progress(
            n_prompts=totals["n"],
            k=campaign.k,
            labels=totals["labels"] or 0,
            prompts_complete=totals["n"] - open_prompts,
            k_max=campaign.k_max,
            slots=Slot.objects.filter(campaign=campaign).count(),
        )
    return Progress(
        n_prompts=totals["n"], k=campaign.k, labels=totals["labels"] or 0, prompts_complete=totals["complete"]
    )


#: The planner reads the first-k labels of at most this many prompts (the latest): enough to know the
#: crowd's spread of shares, and the same cost for 10k prompts as for 1M.
PLAN_PROMPTS_READ = 20_000


@dataclass(frozen=True)
class CampaignStopPlan:
    """Adaptive k's planner for one campaign (``campaign_stop_plan``): the rule's expected labels.

    ``plan`` is the distribution of a prompt's final k (``annotation.services.adaptive.StopPlan``);
    ``final_so_far`` counts the prompts the rule already stopped, by final k. The totals are for all
    ``n_prompts`` prompts of the campaign: the stopped ones at their final k, each of the others as
    ``plan`` expects a prompt. ``cost_expected`` and ``cost_most`` price them (rewards plus MTurk's
    commission) when a reward per label is given.
    """

    plan: "StopPlan"
    n_prompts: int
    labels: int
    final_so_far: dict[int, int]
    cost_expected: CostPreview | None = None
    cost_most: CostPreview | None = None

    @property
    def rows(self) -> list[tuple[int, float, int]]:
        """Per final k: its expected share of prompts and how many prompts the rule stopped there so far."""
        return [(n, p, self.final_so_far.get(n, 0)) for n, p in self.plan.final_k.items()]

    @property
    def n_stopped(self) -> int:
        return sum(self.final_so_far.values())

    @property
    def _stopped_labels(self) -> int:
        return sum(n * count for n, count in self.final_so_far.items())

    @property
    def expected_total(self) -> int:
        return math.ceil(self._stopped_labels + self.plan.expected_total(self.n_prompts - self.n_stopped))

    @property
    def fewest_total(self) -> int:
        return self._stopped_labels + (self.n_prompts - self.n_stopped) * self.plan.k

    @property
    def most_total(self) -> int:
        return self._stopped_labels + (self.n_prompts - self.n_stopped) * self.plan.k_max


def campaign_stop_plan(*, campaign: Campaign, reward: Decimal | None = None) -> CampaignStopPlan:
    """Adaptive k's planner (``stop_plan``) on the campaign's labels so far, priced when ``reward`` (US$
    per label) is given. Three aggregate queries over the logged decisions and the prompts.

    The crowd's spread is read from the decisions at k (every prompt's first k labels: ``n_positive`` of
    k), of the latest ``PLAN_PROMPTS_READ`` prompts. The price is MTurk's (rewards plus 20 % commission,
    at least $0.01 a label), as for the HITs of fewer than 10 assignments that Chorus publishes by default.
    """
    from annotation.services.adaptive import stop_plan  # noqa: PLC0415 (annotation.services imports this module)

    at_k = StopDecision.objects.filter(campaign=campaign, n_labels=campaign.k)
    latest = at_k.order_by("-pk").values("pk")[:PLAN_PROMPTS_READ]
    first_labels = dict(
        at_k.filter(pk__in=Subquery(latest)).order_by().values_list("n_positive").annotate(n=Count("pk"))
    )
    plan = stop_plan(
        k=campaign.k, k_max=campaign.k_max, stop_confidence=campaign.stop_confidence, first_labels=first_labels
    )
    final_so_far = dict(
        StopDecision.objects.filter(campaign=campaign)
        .exclude(outcome=StopDecision.Outcome.EXTEND)
        .order_by()
        .values_list("n_labels")
        .annotate(n=Count("pk"))
        .order_by("n_labels")
    )
    totals = Prompt.objects.filter(campaign=campaign, is_control=False).aggregate(n=Count("id"), labels=Sum("n_labels"))
    result = CampaignStopPlan(plan=plan, n_prompts=totals["n"], labels=totals["labels"] or 0, final_so_far=final_so_far)
    if reward is None or not result.n_prompts:
        return result
    return dataclasses.replace(
        result,
        cost_expected=mturk_cost_preview(reward=reward, n_assignments=result.expected_total, assignments_per_hit=1),
        cost_most=mturk_cost_preview(reward=reward, n_assignments=result.most_total, assignments_per_hit=1),
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
    campaign = get_object_or_404(Campaign, slug=slug)
    if campaign.launched_at is None:
        # Only a campaign never launched asks who manages it: every worker request after launch is one query.
        get_object_or_404(campaigns_for_workers(user=user), pk=campaign.pk)
    return campaign


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


def live_lease(*, campaign: Campaign, worker: Worker, now: datetime) -> Lease | None:
    """The worker's lease in this campaign that is still running, with its prompt (at most one)."""
    return (
        Lease.objects.select_related("prompt")
        .filter(campaign=campaign, worker=worker, status=Lease.Status.ACTIVE, expires_at__gt=now)
        .first()
    )


CAP_REACHED = "cap_reached"
BLOCKED = "blocked"
# What a worker blocked from a campaign (services.quality.worker_block) hears, on every channel.
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


def campaign_workers(*, campaign: Campaign) -> QuerySet[Participation]:
    """The campaign's workers as their Participation rows (with the worker), most labels first: each with
    its labels, ``excluded_at`` and ``blocked_at``, and ``flagged``: a flag on them that is not undone."""
    flags = WorkerAction.objects.filter(
        campaign=campaign, worker=OuterRef("worker"), kind=WorkerAction.Kind.FLAG, undone_at__isnull=True
    )
    return (
        Participation.objects.filter(campaign=campaign)
        .select_related("worker__user")
        .annotate(flagged=Exists(flags))
        .order_by("-n_labels", "worker_id")
    )


def campaign_worker(*, campaign: Campaign, public_id: str) -> Worker | None:
    """The worker with this public id (``channel:external id``) if they take part in the campaign; None
    otherwise, whether or not a worker with that id exists elsewhere (so the answer leaks nothing)."""
    channel, _, external_id = public_id.partition(":")
    return Worker.objects.filter(channel=channel, external_id=external_id, participations__campaign=campaign).first()


def worker_actions_of(*, campaign: Campaign) -> QuerySet[WorkerAction]:
    """The campaign's log of actions on workers, newest first, each with its worker, rule and people."""
    return (
        WorkerAction.objects.filter(campaign=campaign)
        .select_related("worker__user", "by", "undone_by", "rule")
        .order_by("-created_at", "-id")
    )


@dataclass(frozen=True)
class LiveLeases:
    count: int  # prompts on workers' screens now, whose labels would still be accepted
    until: datetime | None  # when the last of these leases runs out, if none is extended


def campaign_live_leases(*, campaign: Campaign) -> LiveLeases:
    """The leases running now, from the slots they hold (the partial index over unfilled slots). A control
    prompt's lease holds no slot and is left out: its label measures a worker, not the benchmark."""
    held = Slot.objects.filter(campaign=campaign, filled=False, lease_expires_at__gt=timezone.now())
    totals = held.aggregate(count=Count("id"), until=Max("lease_expires_at"))
    return LiveLeases(count=totals["count"], until=totals["until"])


# The task page's "about N left for you" stops counting at this many prompts, so it reads at most k (or
# k_max) times as many slots: it costs the same for 10k prompts as for 1M.
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
    left for them: the one on their screen, and those with an unfilled slot that they were never leased
    (and, while there are such, the control prompts they were never leased, in a campaign that serves
    controls); at most what the campaign's cap per worker and ``quota_left`` (a channel's own quota)
    still allow.

    "About": a prompt counts while other workers hold its open slots, and they take and give back
    slots at any moment. Two queries: the worker's label count, and a count over at most
    ``PROMPTS_LEFT_COUNTED`` × k (or k_max) unfilled slots (their partial index); one, when the caller passes
    ``labeled`` (lease_acquire's ``worker_labels``, read under its lock); one more, a bounded count of
    the unseen controls, in a campaign that serves them.
    """
    if labeled is None:
        labeled = worker_label_count(campaign=campaign, worker=worker)
    limits = [] if quota_left is None else [quota_left]
    cap_left = labels_left_under_cap(campaign=campaign, done=labeled)
    if cap_left is not None:
        limits.append(cap_left)
    limit = max(min(limits), 0) if limits else None
    bound = PROMPTS_LEFT_COUNTED if limit is None else min(limit, PROMPTS_LEFT_COUNTED)
    # A prompt has at most k unfilled slots (adaptive k: k_max), so the first n × k of them hold at least
    # n prompts, or they are all there are.
    most = campaign.k if campaign.k_max is None else campaign.k_max
    sample = _unfilled_slots(campaign, worker).values("prompt_id")[: max(bound - 1, 0) * most]
    others = sample.aggregate(n=Count("prompt_id", distinct=True))["n"]
    if others and (campaign.control_rate is not None or campaign.control_first):
        # A control is a prompt like any other to the worker (services.controls), served while other work
        # is left: counting the controls still unseen keeps "left" going down by one on every page.
        unseen = Prompt.objects.filter(campaign=campaign, is_control=True).exclude(
            pk__in=Lease.objects.filter(campaign=campaign, worker=worker).values("prompt_id")
        )
        others += unseen[: max(bound - 1 - others, 0)].count()
    left = min(1 + others, bound)
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
    ``<prompt id>#<option number>``: each option is the unit the audit sees. ``control`` is true on
    the rows of a control prompt's labels, which measure workers and are left out of the audit;
    ``excluded`` on the rows of a worker excluded from the campaign's audit (``Participation.excluded_at``),
    kept in the file and left out of every audit number. ``final_k`` is the prompt's own number of
    labels, its slot count (empty for a control): k, or with adaptive k as decided so far, final once the
    prompt has no open slot; ``k_rule`` states the campaign's rule (``Campaign.k_rule``), so a file read
    alone says how each prompt's k came about.
    """
    if labels is None:
        labels = campaign_labels(campaign=campaign)
    adaptive, k_rule = campaign.k_max is not None, campaign.k_rule
    excluded = set(
        Participation.objects.filter(campaign=campaign, excluded_at__isnull=False).values_list("worker_id", flat=True)
    )
    if adaptive:
        labels = labels.annotate(prompt_slots=_count_of(Slot.objects.filter(prompt=OuterRef("prompt")), "prompt"))
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
            "control": label.is_control,
            "excluded": label.worker_id in excluded,
            "final_k": None if label.is_control else label.prompt_slots if adaptive else campaign.k,
            "k_rule": k_rule,
        }
        prompt = label.prompt
        if isinstance(label.value, list):
            gold = prompt.gold if isinstance(prompt.gold, list) else [None] * len(label.value)
            for number, (value, gold_value) in enumerate(zip(label.value, gold), start=1):
                yield {
                    **base,
                    "prompt": f"{prompt.external_id}#{number}",
                    "value": value,
                    "gold": gold_value,
                    "prompt_text": f"{prompt.text} — {prompt.options[number - 1]}",
                }
        else:
            yield {**base, "prompt": prompt.external_id, "value": label.value, "gold": prompt.gold}


# --- control prompts ----------------------------------------------------------------------------------


def worker_control_results(*, campaign: Campaign) -> dict[int, tuple[int, int]]:
    """Each worker's answers to the campaign's control prompts: ``{worker id: (n_controls, n_correct)}``.

    Over counted control labels (a void one is left out, as everywhere), excluded workers' included:
    exclusion leaves a worker out of the benchmark's audit, not out of being measured. A worker with
    no counted control label is absent.

    An answer is correct when its **scaled value** equals the gold's, through the campaign's
    binarization map (the scale the audit itself compares on): for a binary schema that is the raw
    value itself; on a 1–4 scale mapped 1, 2 → 0 and 3, 4 → 1, a 3 is right where the gold is 4.
    Where the map leaves the gold's raw value out (a middle point), only that raw value is right.
    A per-option prompt is one control, correct when every option is. One query over the campaign's
    control labels.
    """
    schema = campaign.label_schema
    results: dict[int, tuple[int, int]] = {}
    rows = (
        Label.objects.counted()
        .filter(campaign=campaign, is_control=True)
        .values_list("worker_id", "value", "prompt__gold")
    )
    for worker_id, value, gold in rows.iterator(chunk_size=2000):
        n, correct = results.get(worker_id, (0, 0))
        results[worker_id] = (n + 1, correct + _control_answer_correct(schema, value, gold))
    return results


def _control_answer_correct(schema, value, gold) -> bool:
    if isinstance(value, list):
        return (
            isinstance(gold, list)
            and len(gold) == len(value)
            and all(_control_answer_correct(schema, one, gold_one) for one, gold_one in zip(value, gold))
        )
    expected = None if gold is None or isinstance(gold, list) else schema.binarize(gold)
    return value == gold if expected is None else schema.binarize(value) == expected


# --- the guarantees, checked on the stored rows -------------------------------------------------------

#: At most this many rows are named per kind of violation; a last line says how many more there are.
VIOLATIONS_NAMED = 20


def invariant_violations(*, campaign: Campaign | None = None, acknowledged=(), complete: bool = False) -> list[str]:
    """Every way the stored rows break Chorus's guarantees, one line each; empty when they all hold.

    Over one campaign, or every campaign. Void labels do not count, but their rows and leases stay:

    * exactly-k: a prompt has k slots (adaptive k: between k and ``k_max``) and no more counted labels
      than that, each filling one of its slots, the one its lease holds; with ``complete`` (the caller
      knows every prompt must be full, e.g. after a drain), every slot filled. Exactly-k leaves controls
      out: a control prompt has no slots, its leases hold none and its labels fill none (and say so,
      ``Label.is_control``), while every other lease holds one of its own prompt's slots;
    * never twice: no (prompt, worker) twice among leases, nor among labels, void or not (so a prompt's
      counted labels come from distinct workers, and a void label's worker is never served the prompt
      again); a label is its own lease's worker's, on its lease's prompt, and came before the lease ran out;
    * the counters equal what they count (they are what keeps the hot path fast, so they are checked here
      rather than recomputed there): ``Prompt.n_labels`` and ``Participation.n_labels`` against the counted
      labels (controls' included), ``Slot.filled`` against the counted label filling the slot, an unfilled
      slot's fill-first ``priority`` against its prompt's count, ``ImportBatch.n_prompts`` against the
      batch's prompts;
    * adaptive k, "its own final number": a prompt's slot count is k plus one per logged "extend"
      (``StopDecision``), so slots grew one at a time; a prompt with every slot filled has a logged "stop"
      or "at max" at that count; each logged decision is the stated rule's outcome for its posterior
      ("stop" once it reaches ``stop_confidence`` without a tie, "at max" only at ``k_max``, "extend" only
      below it and below the prompt's slot count, never below k); a fixed-k campaign logs none;
    * every label id in ``acknowledged`` is stored (void or not: a label is never deleted).

    A dozen aggregate queries, whatever the number of rows; at most ``VIOLATIONS_NAMED`` rows are named
    per kind. For tests, benchmarks and the soak.
    """
    scope = {} if campaign is None else {"campaign": campaign}
    violations: list[str] = []
    counted = Label.objects.counted()

    per_prompt = Prompt.objects.filter(**scope).annotate(
        counted=_count_of(counted.filter(prompt=OuterRef("pk")), "prompt"),
        n_slots=_count_of(Slot.objects.filter(prompt=OuterRef("pk")), "prompt"),
        most=Coalesce("campaign__k_max", "campaign__k"),
    )
    off_k = Q(counted__gt=F("most")) | Q(n_slots__lt=F("campaign__k")) | Q(n_slots__gt=F("most"))
    if complete:
        off_k |= Q(counted__lt=F("n_slots"))
    control_with_slots = Q(is_control=True, n_slots__gt=0)
    wrong = per_prompt.filter(~Q(counted=F("n_labels")) | (Q(is_control=False) & off_k) | control_with_slots)
    _name(
        violations,
        wrong.order_by("pk").values(
            "external_id",
            "campaign__slug",
            "campaign__k",
            "campaign__k_max",
            "is_control",
            "n_labels",
            "counted",
            "n_slots",
        ),
        lambda row: _prompt_problems(row, complete=complete),
    )

    for model, what in ((Label, "labels (void ones included)"), (Lease, "leases")):
        twice = (
            model.objects.filter(**scope)
            .order_by()
            .values("prompt", "worker")
            .annotate(n=Count("pk"))
            .filter(n__gt=1)
            .values("n", "prompt__external_id", "prompt__campaign__slug", "worker__channel", "worker__external_id")
            .order_by("prompt", "worker")
        )
        _name(
            violations,
            twice,
            lambda row, what=what: [
                f"{_worker_name(row)} has {row['n']} {what} on {_prompt_name(row, 'prompt__')}: never twice"
            ],
        )

    labels = Label.objects.filter(**scope)
    _name(
        violations,
        labels.filter(
            ~Q(worker=F("lease__worker"))
            | ~Q(prompt=F("lease__prompt"))
            | ~Q(lease__status=Lease.Status.SUBMITTED)
            | Q(created_at__gte=F("lease__expires_at"))
        )
        .order_by("pk")
        .values(
            "pk",
            "worker",
            "prompt",
            "created_at",
            "lease",
            "lease__worker",
            "lease__prompt",
            "lease__status",
            "lease__expires_at",
        ),
        _label_lease_problems,
    )

    _name(
        violations,
        counted.filter(**scope, is_control=False)
        .filter(
            ~Q(slot=F("lease__slot"))
            | ~Q(slot__lease=F("lease"))
            | Q(slot__filled=False)
            | ~Q(slot__prompt=F("prompt"))
        )
        .order_by("pk")
        .values("pk", "slot", "lease", "lease__slot", "slot__lease", "slot__filled"),
        lambda row: [
            (
                f"counted label {row['pk']} does not fill the slot its lease {row['lease']} holds: "
                f"its slot {row['slot']} (filled: {row['slot__filled']}, held by lease {row['slot__lease']}), "
                f"the lease's slot {row['lease__slot']}"
            )
        ],
    )

    _name(
        violations,
        labels.exclude(is_control=F("prompt__is_control"))
        .order_by("pk")
        .values("pk", "is_control", "prompt__external_id", "prompt__campaign__slug"),
        lambda row: [
            (
                f"label {row['pk']} on {_prompt_name(row, 'prompt__')} is "
                f"{'' if row['is_control'] else 'not '}a control label, "
                f"but its prompt is {'not ' if row['is_control'] else ''}a control"
            )
        ],
    )
    _name(
        violations,
        Lease.objects.filter(**scope)
        .filter(
            Q(prompt__is_control=True, slot__isnull=False)
            | (Q(prompt__is_control=False) & (Q(slot__isnull=True) | ~Q(slot__prompt=F("prompt"))))
        )
        .order_by("pk")
        .values(
            "pk",
            "slot",
            "slot__prompt__external_id",
            "prompt__is_control",
            "prompt__external_id",
            "prompt__campaign__slug",
        ),
        _lease_slot_problems,
    )

    slots = Slot.objects.filter(**scope)
    _name(
        violations,
        slots.filter(filled=True, label__isnull=True)
        .order_by("pk")
        .values("index", "prompt__external_id", "prompt__campaign__slug"),
        lambda row: [
            f"slot {row['index']} of {_prompt_name(row, 'prompt__')} is filled, but no counted label fills it"
        ],
    )
    _name(
        violations,
        slots.filter(filled=False)
        .exclude(priority=F("prompt__n_labels"))
        .order_by("pk")
        .values("index", "priority", "prompt__n_labels", "prompt__external_id", "prompt__campaign__slug"),
        lambda row: [
            (
                f"open slot {row['index']} of {_prompt_name(row, 'prompt__')} has fill-first priority "
                f"{row['priority']}, not the prompt's label count {row['prompt__n_labels']}"
            )
        ],
    )

    per_worker = Participation.objects.filter(**scope).annotate(
        counted=_count_of(counted.filter(campaign=OuterRef("campaign"), worker=OuterRef("worker")), "worker")
    )
    _name(
        violations,
        per_worker.exclude(counted=F("n_labels"))
        .order_by("pk")
        .values("n_labels", "counted", "campaign__slug", "worker__channel", "worker__external_id"),
        lambda row: [
            (
                f"{_worker_name(row)} in {row['campaign__slug']}: the counter says {row['n_labels']} labels, "
                f"{row['counted']} count"
            )
        ],
    )
    joined = Participation.objects.filter(campaign=OuterRef("campaign"), worker=OuterRef("worker"))
    _name(
        violations,
        labels.filter(~Exists(joined)).order_by("pk").values("pk"),
        lambda row: [f"label {row['pk']}: its worker has no participation in its campaign"],
    )

    _adaptive_k_violations(violations, scope, counted)

    batches = ImportBatch.objects.filter(**scope).annotate(n=Count("prompts")).exclude(n=F("n_prompts"))
    _name(
        violations,
        batches.order_by("pk").values("filename", "n_prompts", "n", "campaign__slug"),
        lambda row: [
            f"import {row['filename']!r} of {row['campaign__slug']} says {row['n_prompts']} prompts, holds {row['n']}"
        ],
    )

    ids = sorted(set(acknowledged))
    stored = set()
    for start in range(0, len(ids), 900):  # SQLite's bound-parameter limit
        stored.update(labels.filter(pk__in=ids[start : start + 900]).values_list("pk", flat=True))
    missing = [pk for pk in ids if pk not in stored]
    violations += [f"acknowledged label {pk} is not stored" for pk in missing[:VIOLATIONS_NAMED]]
    if len(missing) > VIOLATIONS_NAMED:
        violations.append(f"... and {len(missing) - VIOLATIONS_NAMED} more acknowledged labels not stored")
    return violations


def _adaptive_k_violations(violations: list[str], scope: dict, counted: QuerySet[Label]) -> None:
    """The adaptive-k part of ``invariant_violations``: slots against logged decisions, decisions against the rule."""
    extend = StopDecision.Outcome.EXTEND
    decisions = StopDecision.objects.filter(prompt=OuterRef("pk"))
    per_prompt = Prompt.objects.filter(**scope, is_control=False, campaign__k_max__isnull=False).annotate(
        counted=_count_of(counted.filter(prompt=OuterRef("pk")), "prompt"),
        n_slots=_count_of(Slot.objects.filter(prompt=OuterRef("pk")), "prompt"),
        extends=_count_of(decisions.filter(outcome=extend), "prompt"),
        finals=_count_of(decisions.exclude(outcome=extend), "prompt"),
    )
    wrong = per_prompt.filter(~Q(n_slots=F("campaign__k") + F("extends")) | Q(counted=F("n_slots"), finals=0))
    _name(
        violations,
        wrong.order_by("pk").values("external_id", "campaign__slug", "campaign__k", "counted", "n_slots", "extends"),
        lambda row: (
            [
                (
                    f"{_prompt_name(row)} has {row['n_slots']} slots, but k = {row['campaign__k']} "
                    f'and {row["extends"]} logged "extend" decisions make {row["campaign__k"] + row["extends"]}'
                )
            ]
            if row["n_slots"] != row["campaign__k"] + row["extends"]
            else [f'{_prompt_name(row)} has all its {row["n_slots"]} slots filled and no logged "stop" or "at max"']
        ),
    )

    tie = Q(n_labels=F("n_positive") * 2)
    reached = Q(posterior__gte=F("campaign__stop_confidence")) & ~tie
    decided = StopDecision.objects.filter(**scope).annotate(
        prompt_slots=_count_of(Slot.objects.filter(prompt=OuterRef("prompt")), "prompt")
    )
    off_rule = (
        Q(campaign__k_max__isnull=True)
        | Q(n_positive__gt=F("n_labels"))
        | Q(n_labels__lt=F("campaign__k"))
        | (Q(outcome=extend) & (Q(n_labels__gte=F("campaign__k_max")) | Q(n_labels__gte=F("prompt_slots")) | reached))
        | (Q(outcome=StopDecision.Outcome.STOP) & ~reached)
        | (Q(outcome=StopDecision.Outcome.AT_MAX) & (~Q(n_labels=F("campaign__k_max")) | reached))
        | (~Q(outcome=extend) & ~Q(n_labels=F("prompt_slots")))
    )
    _name(
        violations,
        decided.filter(off_rule)
        .order_by("pk")
        .values(
            "outcome",
            "n_labels",
            "n_positive",
            "posterior",
            "prompt_slots",
            "prompt__external_id",
            "prompt__campaign__slug",
            "campaign__k",
            "campaign__k_max",
            "campaign__stop_confidence",
        ),
        _decision_problems,
    )


def _decision_problems(row: dict) -> list[str]:
    name, k, k_max = _prompt_name(row, "prompt__"), row["campaign__k"], row["campaign__k_max"]
    decision = f'"{row["outcome"]}" at {row["n_positive"]} of {row["n_labels"]} (posterior {row["posterior"]:.4f})'
    if k_max is None:
        return [f"{name}: {decision} logged, but its campaign has a fixed k = {k}"]
    return [
        (
            f"{name} (now {row['prompt_slots']} slots): {decision} breaks the rule k = {k} to k_max = {k_max}, "
            f"stop at {row['campaign__stop_confidence']}"
        )
    ]


def _count_of(rows: QuerySet, key: str) -> Coalesce:
    """The number of ``rows`` (correlated to the outer row through ``key``), 0 for none."""
    n = rows.order_by().values(key).annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(n, output_field=IntegerField()), 0)


def _name(violations: list[str], rows: QuerySet, describe) -> None:
    shown = list(rows[: VIOLATIONS_NAMED + 1])
    for row in shown[:VIOLATIONS_NAMED]:
        violations.extend(describe(row))
    if len(shown) > VIOLATIONS_NAMED:
        violations.append(f"... and {rows.count() - VIOLATIONS_NAMED} more like the last")


def _prompt_name(row: dict, prefix: str = "") -> str:
    return f"prompt {row[prefix + 'external_id']!r} of {row[prefix + 'campaign__slug']}"


def _worker_name(row: dict) -> str:
    return f"worker {row['worker__channel']}:{row['worker__external_id']}"


def _prompt_problems(row: dict, *, complete: bool) -> list[str]:
    name, n, n_slots = _prompt_name(row), row["counted"], row["n_slots"]
    k, k_max = row["campaign__k"], row["campaign__k_max"]
    most = k if k_max is None else k_max
    wanted = f"k = {k}" if k_max is None else f"k = {k} to k_max = {k_max}"
    problems = []
    exactly_k = not row["is_control"]
    if exactly_k and n > most:
        problems.append(f"{name} has {n} counted labels, more than {'k' if k_max is None else 'k_max'} = {most}")
    if exactly_k and complete and n < n_slots:
        problems.append(f"{name} has {n} counted labels for its {n_slots} slots: not complete")
    if n != row["n_labels"]:
        problems.append(f"{name}: its counter says {row['n_labels']} labels, {n} count")
    if exactly_k and not k <= n_slots <= most:
        problems.append(f"{name} has {n_slots} slots, not {wanted}")
    if not exactly_k and n_slots:
        problems.append(f"control {name} has {n_slots} slots: a control has none")
    return problems


def _lease_slot_problems(row: dict) -> list[str]:
    lease, prompt = f"lease {row['pk']}", _prompt_name(row, "prompt__")
    if row["prompt__is_control"]:
        return [f"{lease} on control {prompt} holds slot {row['slot']}: a control has no slots"]
    if row["slot"] is None:
        return [f"{lease} on {prompt} holds no slot"]
    return [f"{lease} on {prompt} holds slot {row['slot']} of prompt {row['slot__prompt__external_id']!r}"]


def _label_lease_problems(row: dict) -> list[str]:
    label, lease = f"label {row['pk']}", f"lease {row['lease']}"
    problems = []
    if (row["worker"], row["prompt"]) != (row["lease__worker"], row["lease__prompt"]):
        problems.append(
            f"{label} (worker {row['worker']}, prompt {row['prompt']}) came through {lease} of worker "
            f"{row['lease__worker']} on prompt {row['lease__prompt']}"
        )
    if row["lease__status"] != Lease.Status.SUBMITTED:
        problems.append(f"{label}: its {lease} is {row['lease__status']}, not submitted")
    if row["created_at"] >= row["lease__expires_at"]:
        problems.append(f"{label} arrived at {row['created_at']:%H:%M:%S.%f}, after its {lease} ran out")
    return problems
