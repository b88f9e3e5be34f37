"""Reads on a campaign's labels: the counted ones, filtered for the API, and the rows of a labels file."""

from datetime import datetime

from django.db.models import OuterRef, QuerySet

from annotation.models import Campaign, Label, Participation, Slot
from annotation.models.workers import public_worker_id_parse
from annotation.selectors.invariants import _count_of

#: The labels file's columns, in order, with the type of each one's values (``| None``: may be empty).
#: The typed formats (Parquet) take their schema from here. Times are ISO 8601 text in the rows and
#: timestamps in a typed file; ``value`` and ``gold`` are JSON values (``object``), since one column
#: holds a binary, rating or free-text answer depending on the campaign (and a free-text gold is a list).
EXPORT_COLUMNS: dict[str, object] = {
    "worker": str,
    "prompt": str,
    "value": object,
    "gold": object | None,
    "group": str,
    "created_at": datetime,
    "leased_at": datetime,
    "time_spent_s": float,
    "campaign": str,
    "label_id": int,
    "prompt_text": str,
    "control": bool,
    "excluded": bool,
    "final_k": int | None,
    "k_rule": str,
}
EXPORT_FIELDS = list(EXPORT_COLUMNS)


def campaign_labels(*, campaign: Campaign, worker: str = "", prompt: str = "", since=None) -> QuerySet[Label]:
    """The campaign's labels in label order, optionally only one worker's (by public id,
    ``channel:external id``), one prompt's (by its imported id) or those created at or after ``since``.
    Void labels are left out: they do not count."""
    labels = Label.objects.counted().filter(campaign=campaign)
    if worker:
        channel, external_id = public_worker_id_parse(worker)
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
