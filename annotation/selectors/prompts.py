"""Reads on a campaign's prompts: the prompts list (search, filters, sorting) and one prompt with its labels.

Each prompt comes with its labels wanted, whether it is complete, and the agreement of its counted labels,
all computed in the database so the list filters and sorts on them before it is cut into pages.
"""

from django.db.models import (
    Case,
    Count,
    Exists,
    F,
    FloatField,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Cast, Coalesce
from django.shortcuts import get_object_or_404

from annotation.models import Campaign, Label, Prompt, Slot
from annotation.selectors.invariants import _count_of
from audits.engine import LabelMatrix
from audits.engine.agreement import prompt_agreement

#: The list's orders, by name (``-`` first: descending). Without labels, a prompt has no agreement: last.
PROMPT_ORDERS = {
    "id": (F("pk").asc(),),
    "labels": (F("n_labels").asc(), F("pk").asc()),
    "-labels": (F("n_labels").desc(), F("pk").asc()),
    "agreement": (F("agreement").asc(nulls_last=True), F("pk").asc()),
    "-agreement": (F("agreement").desc(nulls_last=True), F("pk").asc()),
}
#: The groups offered as a filter: the first ones by name, so that a campaign with a group per prompt
#: still gets a short list (any group can be typed in the API's ``group``).
GROUPS_LISTED = 200


def campaign_prompts(
    *,
    campaign: Campaign,
    search: str = "",
    group: str = "",
    complete: bool | None = None,
    contested: bool | None = None,
    retired: bool | None = None,
    order: str = "id",
) -> QuerySet[Prompt]:
    """The campaign's prompts (controls included), filtered and in ``order`` (a key of ``PROMPT_ORDERS``).

    Each carries:

    * ``labels_wanted``: its k (adaptive k: its slot count, its own number of labels as decided so far);
      None for a control, which takes labels outside any k;
    * ``open_slots``: whether a slot of it is open. ``complete`` (a filter, and ``prompt_status``) is: not
      a control, not retired, and no open slot (fixed k: its k labels; adaptive k: the rule stopped it);
    * ``mode_labels`` and ``agreement``: how many of its counted labels share the most frequent value, and
      that share (None without labels). Values are compared whole and exactly: a per-option label's list
      of answers, a free-text answer as stored. ``contested`` (a filter) is: fewer than all of them
      (agreement below 1).

    ``search`` matches the text or the imported id (any case), ``group`` is matched exactly; empty
    (or None for the others) leaves a filter off. Filtering on agreement or sorting by it reads
    every prompt's labels: one aggregate subquery per prompt, on the label's (prompt, worker) index.
    """
    prompts = Prompt.objects.filter(campaign=campaign)
    if search:
        prompts = prompts.filter(Q(text__icontains=search) | Q(external_id__icontains=search))
    if group:
        prompts = prompts.filter(group=group)
    if retired is not None:
        prompts = prompts.filter(retired_at__isnull=not retired)
    counted = Label.objects.counted().filter(prompt=OuterRef("pk"))
    mode = counted.order_by().values("value").annotate(n=Count("pk")).order_by("-n").values("n")[:1]
    wanted = (
        Value(campaign.k, output_field=IntegerField())
        if campaign.k_max is None
        else _count_of(Slot.objects.filter(prompt=OuterRef("pk")), "prompt")
    )
    prompts = prompts.annotate(
        labels_wanted=Case(When(is_control=True, then=Value(None)), default=wanted, output_field=IntegerField()),
        mode_labels=Coalesce(Subquery(mode, output_field=IntegerField()), 0),
        open_slots=Exists(Slot.objects.filter(prompt=OuterRef("pk"), filled=False)),
    ).annotate(
        agreement=_share("mode_labels", "n_labels"),
    )
    is_complete = Q(is_control=False, retired_at__isnull=True, open_slots=False)
    if complete is not None:
        prompts = prompts.filter(is_complete if complete else ~is_complete)
    is_contested = Q(mode_labels__lt=F("n_labels"))
    if contested is not None:
        prompts = prompts.filter(is_contested if contested else ~is_contested)
    return prompts.order_by(*PROMPT_ORDERS[order])


def _share(part: str, whole: str) -> Case:
    """``part / whole`` (two integer fields) as a float, None when ``whole`` is 0."""
    return Case(
        When(**{whole: 0}, then=Value(None, output_field=FloatField())),
        default=Cast(part, FloatField()) / Cast(whole, FloatField()),
        output_field=FloatField(),
    )


def prompt_groups(*, campaign: Campaign) -> list[str]:
    """The campaign's groups, by name (the first ``GROUPS_LISTED``), for the list's filter."""
    groups = Prompt.objects.filter(campaign=campaign).order_by("group").values_list("group", flat=True).distinct()
    return list(groups[:GROUPS_LISTED])


def campaign_prompt(*, campaign: Campaign, prompt_id: int) -> Prompt:
    """One prompt of the campaign, with what the list shows of it (``campaign_prompts``); 404 for a prompt
    of another campaign, as for one that does not exist."""
    return get_object_or_404(campaign_prompts(campaign=campaign), pk=prompt_id)


def prompt_labels(*, prompt: Prompt) -> QuerySet[Label]:
    """Every label of the prompt, void ones included (they say who was shown it), in the order given,
    each with its worker."""
    return Label.objects.filter(prompt=prompt).select_related("worker").order_by("created_at", "pk")


def prompt_status(prompt: Prompt) -> str:
    """One word for where an annotated prompt (``campaign_prompts``) stands: ``retired``, ``control``,
    ``complete`` or ``open``."""
    if prompt.retired_at is not None:
        return "retired"
    if prompt.is_control:
        return "control"
    return "complete" if not prompt.open_slots else "open"


def prompts_entropy(*, campaign: Campaign, prompts: list[Prompt]) -> list[Prompt]:
    """``prompts`` (a page of :func:`campaign_prompts`), each with ``entropy_bits``: the Shannon entropy,
    base 2, of its counted labels' values, 0 when unanimous (``audits.engine.agreement.prompt_agreement``,
    as in the agreement CSV); None without labels, and where a label is not one number (per-option
    ratings, free text). One query for the page."""
    for prompt in prompts:
        prompt.entropy_bits = None
    if campaign.schema not in (Campaign.Schema.BINARY, Campaign.Schema.RATING) or not prompts:
        return prompts
    rows = list(
        Label.objects.counted()
        .filter(prompt_id__in=[p.pk for p in prompts])
        .values_list("worker_id", "prompt_id", "value")
    )
    if rows:
        workers, prompt_ids, values = zip(*rows, strict=True)
        found = prompt_agreement(LabelMatrix.from_triples(workers, prompt_ids, values))
        entropy = dict(zip(found.prompt_ids.tolist(), found.entropy_bits.tolist(), strict=True))
        for prompt in prompts:
            prompt.entropy_bits = entropy.get(prompt.pk)
    return prompts
