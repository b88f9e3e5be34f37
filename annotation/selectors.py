"""Reads for views, the API, commands and tasks."""
from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet, Sum
from django.shortcuts import get_object_or_404

from annotation.models import Campaign, Label, Lease, Participation, Prompt, Worker

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


def campaign_for_workers(*, slug: str) -> Campaign:
    """Any campaign by the slug of its workers' link; whether it hands out work is lease_acquire's call."""
    return get_object_or_404(Campaign, slug=slug)


def lease_for_worker(*, lease_id: int, worker: Worker, campaign: Campaign | None = None) -> Lease:
    """The worker's own lease (in this campaign, if given), with its prompt; 404 for anybody else's,
    as for one that never existed. Only for pages that need the lease itself: the lease services
    check the owner themselves (their ``not_leased`` refusal, which callers answer with a 404 too)."""
    leases = Lease.objects.select_related("prompt", "campaign").filter(worker=worker)
    if campaign is not None:
        leases = leases.filter(campaign=campaign)
    return get_object_or_404(leases, pk=lease_id)


def worker_label_count(*, campaign: Campaign, worker: Worker) -> int:
    return (
        Participation.objects.filter(campaign=campaign, worker=worker).values_list("n_labels", flat=True).first() or 0
    )


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
