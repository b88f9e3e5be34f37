"""Reads on campaigns: progress against the labels wanted, adaptive k's planner, who may see or manage a
campaign, and its invitations."""

import dataclasses
import math
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from django.db.models import Count, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.utils import timezone

from annotation.adaptive import StopPlan, stop_plan
from annotation.channels.pricing import CostPreview, mturk_cost_preview
from annotation.models import Activity, Campaign, Invitation, Label, Participation, Prompt, Slot, StopDecision
from annotation.rows import Columns, fetch, table


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
    them has its labels. Controls (``services.controls``) take labels outside any k, so they are left out,
    and so are retired prompts (``services.prompts_retired_set``): they are owed no labels."""
    totals = Prompt.objects.filter(campaign=campaign, is_control=False, retired_at__isnull=True).aggregate(
        n=Count("id"), labels=Sum("n_labels"), complete=Count("id", filter=Q(n_labels__gte=campaign.k))
    )
    if campaign.k_max is not None:
        # Adaptive k: a prompt is complete once it has no open slot (the rule stopped it), and the labels
        # wanted are the slots so far. Controls have no slots; a retired prompt's are all closed (Slot.filled).
        open_prompts = Slot.objects.filter(campaign=campaign, filled=False).values("prompt_id").distinct().count()
        return Progress(
            n_prompts=totals["n"],
            k=campaign.k,
            labels=totals["labels"] or 0,
            prompts_complete=totals["n"] - open_prompts,
            k_max=campaign.k_max,
            slots=Slot.objects.filter(campaign=campaign, prompt__retired_at__isnull=True).count(),
        )
    return Progress(
        n_prompts=totals["n"], k=campaign.k, labels=totals["labels"] or 0, prompts_complete=totals["complete"]
    )


#: The pace behind a campaign's time to completion: its counted labels over the last half hour (or since
#: launch, if later), recent enough to follow a panel's arrivals and departures, long enough to smooth them.
PACE_WINDOW = timedelta(minutes=30)


@dataclass(frozen=True)
class Pace:
    """How fast a live campaign fills, and when it will be done at that rate."""

    labels_per_minute: float | None  # None: launched less than a minute ago, or not live
    window_minutes: float
    eta_seconds: float | None  # None: no pace to go by, or nothing left


def campaign_pace(*, campaign: Campaign, progress: Progress, now=None) -> Pace:
    """The labels still wanted divided by the rate of the last ``PACE_WINDOW`` (counted labels: no
    controls, no void ones). Only a live campaign has a pace: a paused one takes no labels."""
    now = now or timezone.now()
    if campaign.status != Campaign.Status.LIVE or campaign.launched_at is None:
        return Pace(labels_per_minute=None, window_minutes=0.0, eta_seconds=None)
    since = max(now - PACE_WINDOW, campaign.launched_at)
    minutes = (now - since).total_seconds() / 60
    if minutes < 1:
        return Pace(labels_per_minute=None, window_minutes=minutes, eta_seconds=None)
    recent = Label.objects.filter(campaign=campaign, created_at__gte=since, is_control=False, voided_at__isnull=True)
    rate = recent.count() / minutes
    remaining = max(progress.labels_wanted - progress.labels, 0)
    eta = remaining / rate * 60 if rate and remaining else None
    return Pace(labels_per_minute=rate, window_minutes=minutes, eta_seconds=eta)


#: The planner reads the first-k labels of at most this many prompts (the latest): enough to know the
#: crowd's spread of shares, and the same cost for 10k prompts as for 1M.
PLAN_PROMPTS_READ = 20_000


@dataclass(frozen=True)
class CampaignStopPlan:
    """Adaptive k's planner for one campaign (``campaign_stop_plan``): the rule's expected labels.

    ``plan`` is the distribution of a prompt's final k (``annotation.adaptive.StopPlan``);
    ``final_so_far`` counts the prompts the rule already stopped, by final k. The totals are for all
    ``n_prompts`` prompts of the campaign: the stopped ones at their final k, each of the others as
    ``plan`` expects a prompt. ``cost_expected`` and ``cost_most`` price them (rewards plus MTurk's
    commission) when a reward per label is given.
    """

    plan: StopPlan
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
    totals = Prompt.objects.filter(campaign=campaign, is_control=False, retired_at__isnull=True).aggregate(
        n=Count("id"), labels=Sum("n_labels")
    )
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


def title_key(title: str) -> str:
    """A title as campaign names are compared: trimmed, any case."""
    return " ".join(title.split()).casefold()


def campaign_title_clash(*, owner, title: str, renamed: Campaign | None = None) -> Campaign | None:
    """The campaign of ``owner``'s already called ``title``, if any: an owner's campaigns have different
    names (``title_key``), so lists and exports tell them apart. ``renamed`` is the campaign being given
    ``title``, if it exists: keeping its own name is no clash, so names that clashed before the rule (old
    databases) stay valid until changed. Compared in Python, not with the database's case folding, which
    SQLite limits to ASCII; an owner has few campaigns."""
    key = title_key(title)
    if renamed is not None and title_key(renamed.title) == key:
        return None
    campaigns = Campaign.objects.filter(owner=owner).only("pk", "title", "slug", "created_at").order_by("created_at")
    if renamed is not None:
        campaigns = campaigns.exclude(pk=renamed.pk)
    return next((campaign for campaign in campaigns if title_key(campaign.title) == key), None)


def title_clash_message(*, clash: Campaign) -> str:
    return (
        f"{clash.owner.get_username()} already has a campaign called “{clash.title}” ({clash.slug}, created "
        f"{clash.created_at:%Y-%m-%d}): campaigns of one owner need different names."
    )


def campaign_copy_title(*, owner, title: str) -> str:
    """The name of a copy of a campaign called ``title``: the first of “title (copy)”, “title (copy 2)”, …
    that ``owner`` has no campaign of, cut to fit the title's length limit."""
    longest = Campaign._meta.get_field("title").max_length
    taken = {title_key(t) for t in Campaign.objects.filter(owner=owner).values_list("title", flat=True)}
    base, number = title.strip(), 1
    while True:
        suffix = " (copy)" if number == 1 else f" (copy {number})"
        candidate = base[: longest - len(suffix)] + suffix
        if title_key(candidate) not in taken:
            return candidate
        number += 1


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


_CAMPAIGN = Columns(Campaign, "c")


def campaign_for_workers(*, slug: str, user) -> Campaign:
    """The campaign of a worker-facing URL (``campaigns_for_workers``); 404 for one ``user`` may not see,
    exactly as for a slug that does not exist. Whether it hands out work is lease_acquire's call."""
    # Hand-written (annotation.rows): every request of the worker loop that names its campaign reads it.
    rows = fetch(f"SELECT {_CAMPAIGN.sql} FROM {table(Campaign)} c WHERE c.slug = %s", [slug])
    if not rows:
        raise Http404("No such campaign.")
    campaign = _CAMPAIGN.load(rows[0])
    if campaign.launched_at is None:
        # Only a campaign never launched asks who manages it: every worker request after launch is one query.
        get_object_or_404(campaigns_for_workers(user=user), pk=campaign.pk)
    return campaign


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


def campaign_activity(*, campaign: Campaign) -> QuerySet[Activity]:
    """The campaign's activity log, newest first."""
    return campaign.activities.select_related("actor").order_by("-created_at", "-pk")
