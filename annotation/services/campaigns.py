"""Writes on campaigns: creation, settings, and the launch / pause / resume / close life cycle."""

from django.db import transaction
from django.utils import timezone
from django.utils.crypto import get_random_string
from django.utils.text import slugify

from annotation.models import Campaign
from annotation.services.activity import activity_record
from annotation.services.errors import CampaignStateError
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


def campaign_create(*, owner, title: str, **fields) -> Campaign:
    unknown = set(fields) - EDITABLE_FIELDS
    if unknown:
        raise TypeError(f"campaign_create() got unknown fields: {', '.join(sorted(unknown))}")
    campaign = Campaign(owner=owner, title=title, slug=_unique_slug(title), **fields)
    campaign.full_clean()
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
