"""Writes on campaigns: creation, settings, and the launch / pause / resume / close life cycle."""

from django.db import transaction
from django.utils import timezone
from django.utils.crypto import get_random_string
from django.utils.text import slugify

from annotation.models import Campaign, ImportBatch
from annotation.selectors import campaign_copy_title
from annotation.services.activity import activity_record
from annotation.services.errors import CampaignStateError
from annotation.services.prompts import prompts_create
from annotation.signals import campaign_status_changed
from audits.hook import audit_stats_invalidate

EDITABLE_FIELDS = {
    "title",
    "instructions",
    "schema",
    "positive_text",
    "negative_text",
    "scale_min",
    "scale_max",
    "scale_step",
    "scale_anchors",
    "binarization",
    "k",
    "lease_seconds",
    "max_labels_per_worker",
    "policy",
    "control_rate",
    "control_first",
    "k_max",
    "stop_confidence",
    "answer_min_length",
    "answer_max_length",
    "clustering_protocol",
}
# The slots of imported prompts were cut for this k and this schema: changing them later would
# break exactly-k or make imported gold values meaningless; and a stated stopping rule must hold
# for every prompt (switching between fixed and adaptive k, or lowering k_max, would break both).
# Free text's length limits likewise: every stored answer keeps within the limits the campaign states.
FROZEN_ONCE_PROMPTS_EXIST = {
    "k",
    "schema",
    "scale_min",
    "scale_max",
    "scale_step",
    "k_max",
    "stop_confidence",
    "answer_min_length",
    "answer_max_length",
}

TRANSITIONS = {
    "launch": ({Campaign.Status.DRAFT}, Campaign.Status.LIVE),
    "pause": ({Campaign.Status.LIVE}, Campaign.Status.PAUSED),
    "resume": ({Campaign.Status.PAUSED}, Campaign.Status.LIVE),
    "close": ({Campaign.Status.DRAFT, Campaign.Status.LIVE, Campaign.Status.PAUSED}, Campaign.Status.CLOSED),
}


# Slugs that a campaign's URLs would share with a page of their own (/audits/guide/).
RESERVED_SLUGS = {"guide"}


def _unique_slug(title: str) -> str:
    base = slugify(title)[:48] or "campaign"
    slug = base
    while slug in RESERVED_SLUGS or Campaign.objects.filter(slug=slug).exists():
        slug = f"{base}-{get_random_string(6).lower()}"
    return slug


def _plain(value):
    """A field's value as JSON can hold it (decimals and the like as text)."""
    return value if isinstance(value, (str, int, float, bool, list, dict, type(None))) else str(value)


def _campaign_new(*, owner, title: str, fields: dict) -> Campaign:
    """A new draft, validated as the model validates it; unsaved, so that its caller saves it in its own
    transaction (``campaign_create``, ``campaign_copy``)."""
    unknown = set(fields) - EDITABLE_FIELDS
    if unknown:
        raise TypeError(f"unknown campaign fields: {', '.join(sorted(unknown))}")
    campaign = Campaign(owner=owner, title=title, slug=_unique_slug(title), **fields)
    campaign.full_clean()
    return campaign


def campaign_create(*, owner, title: str, **fields) -> Campaign:
    campaign = _campaign_new(owner=owner, title=title, fields=fields)
    with transaction.atomic(durable=True):
        campaign.save()
        activity_record(
            campaign=campaign,
            verb="campaign.created",
            summary=f"Created “{title}”",
            detail={"k": campaign.k},
            actor=owner,
        )
    return campaign


def campaign_copy(*, campaign: Campaign, owner, title: str | None = None) -> Campaign:
    """A new draft of ``owner`` with ``campaign``'s settings (every editable field; the title unless
    ``title`` is given) and prompts: text, options, gold, group, control flag and external ids, one
    import per import of the source (same file name and digest, so the copy refuses that file again
    like its source). Not its labels, workers, collaborators or publications. Without ``title`` the
    copy is called “<title> (copy)”, or “(copy 2)”, … whichever ``owner`` has no campaign of
    (``campaign_copy_title``); a ``title`` given is the caller's to check (``campaign_title_clash``),
    as who may copy what is (annotation.permissions)."""
    fields = {name: getattr(campaign, name) for name in EDITABLE_FIELDS - {"title"}}
    title = title or campaign_copy_title(owner=owner, title=campaign.title)
    copy = _campaign_new(owner=owner, title=title, fields=fields)
    with transaction.atomic(durable=True):
        copy.save()
        for batch in campaign.imports.order_by("pk"):
            new_batch = ImportBatch.objects.create(
                campaign=copy,
                filename=batch.filename,
                sha256=batch.sha256,
                n_prompts=batch.n_prompts,
                created_by=owner,
            )
            prompts_create(campaign=copy, batch=new_batch, rows=batch.prompts.order_by("pk").iterator())
        activity_record(
            campaign=copy,
            verb="campaign.copied",
            summary=f"Copied from {campaign.slug}",
            detail={"source": campaign.slug, "n_prompts": copy.prompts.count()},
            actor=owner,
        )
    return copy


def campaign_update(*, campaign: Campaign, **fields) -> Campaign:
    unknown = set(fields) - EDITABLE_FIELDS
    if unknown:
        raise TypeError(f"campaign_update() got unknown fields: {', '.join(sorted(unknown))}")
    with transaction.atomic(durable=True):
        campaign = Campaign.objects.select_for_update().get(pk=campaign.pk)
        changed = {name for name, value in fields.items() if getattr(campaign, name) != value}
        frozen = changed & FROZEN_ONCE_PROMPTS_EXIST
        if frozen and campaign.prompts.exists():
            raise CampaignStateError(
                f"{', '.join(sorted(frozen))} cannot change once prompts are imported.", code="frozen_field"
            )
        old_binarization = campaign.binarization
        for name, value in fields.items():
            setattr(campaign, name, value)
        campaign.full_clean()
        campaign.save()
        if changed:
            activity_record(
                campaign=campaign,
                verb="campaign.edited",
                summary=f"Changed {', '.join(sorted(changed))}",
                detail={name: _plain(getattr(campaign, name)) for name in sorted(changed)},
            )
        if campaign.binarization != old_binarization:
            audit_stats_invalidate(campaign_id=campaign.pk)
    return campaign


def campaign_transition(*, campaign: Campaign, action: str) -> Campaign:
    """launch, pause, resume or close. Pausing or closing stops new leases at once (lease_acquire reads
    the status in its own transaction); labels for leases still live are accepted until they expire."""
    if action not in TRANSITIONS:
        raise CampaignStateError(f"Unknown action {action!r}.", code="unknown_action")
    allowed_from, target = TRANSITIONS[action]
    with transaction.atomic(durable=True):
        campaign = Campaign.objects.select_for_update().get(pk=campaign.pk)
        if campaign.status not in allowed_from:
            raise CampaignStateError(
                f"Cannot {action} a campaign that is {campaign.get_status_display().lower()}.", code="bad_transition"
            )
        if action == "launch" and not campaign.prompts.exists():
            raise CampaignStateError("Import prompts before launching.", code="no_prompts")
        now = timezone.now()
        campaign.status = target
        if action == "launch":
            campaign.launched_at = now
        if action == "close":
            campaign.closed_at = now
        campaign.save(update_fields=["status", "launched_at", "closed_at"])
        activity_record(
            campaign=campaign,
            verb="campaign.status_changed",
            summary=f"{action.capitalize()}: now {campaign.get_status_display().lower()}",
            detail={"action": action, "status": target},
        )
        pk, status = campaign.pk, campaign.status
        transaction.on_commit(
            lambda: campaign_status_changed.send(sender=Campaign, campaign_id=pk, status=status), robust=True
        )
    return campaign
