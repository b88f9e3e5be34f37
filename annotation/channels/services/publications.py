"""Creating and withdrawing publications. Everything is checked before anything is written; nothing
is sent to a channel from here (MTurk's HITs are created and expired by Celery tasks, after commit)."""

import re

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.crypto import get_random_string
from django.utils.text import slugify

from annotation.channels.errors import PanelRefused, PublicationRefused
from annotation.channels.models import MTurkHIT, PanelConfig, Publication
from annotation.channels.options import mturk_options_clean
from annotation.channels.pricing import mturk_plan
from annotation.channels.registry import get_channel
from annotation.channels.tasks import prolific_sync_task, publish_campaign_task, withdraw_publication_task
from annotation.models import Campaign, Worker
from annotation.services.activity import activity_record

_TOKEN_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789"
_PANEL_NAME = re.compile(r"^[a-z][a-z0-9_]{1,19}$")
RESERVED_WORKER_CHANNELS = {Worker.NATIVE, "mturk", "mturk_sandbox", "locmem"}


def token_prefix() -> str:
    return "c" + get_random_string(11, allowed_chars=_TOKEN_CHARS)


def publication_create_mturk(*, campaign: Campaign, user, options: dict, alias: str = "mturk") -> Publication:
    """Check everything, then write ``Publication(status=pending)`` and its planned HITs, and enqueue
    ``publish_campaign_task`` after commit. Nothing is sent to MTurk here."""
    channel = get_channel(alias)
    if campaign.status != Campaign.Status.LIVE:
        raise PublicationRefused("Launch the campaign before publishing it.", code="campaign_not_live")
    public_url = getattr(settings, "CHORUS_PUBLIC_URL", "")
    if not public_url.startswith("https://"):
        raise PublicationRefused(
            "CHORUS_PUBLIC_URL must be Chorus's https:// address: MTurk opens the task page there.",
            code="no_public_url",
        )
    clean = mturk_options_clean(campaign=campaign, options=options)
    plan = mturk_plan(n_assignments=clean["n_assignments"], assignments_per_hit=clean["assignments_per_hit"])
    try:
        with transaction.atomic(durable=True):
            publication = Publication.objects.create(
                campaign=campaign,
                kind=Publication.Kind.MTURK,
                channel=alias,
                worker_channel=channel.worker_channel,
                options=clean,
                token_prefix=token_prefix(),
                planned_assignments=clean["n_assignments"],
                created_by=user,
            )
            MTurkHIT.objects.bulk_create(
                [MTurkHIT(publication=publication, index=i, max_assignments=size) for i, size in enumerate(plan)]
            )
            publication_activity(publication, "publication.created", f"Published on {alias}", actor=user)
            publish_campaign_task.delay_on_commit(publication.pk)
    except IntegrityError:
        raise PublicationRefused(
            f"This campaign already has an active publication on {alias}; withdraw it first.", code="already_published"
        ) from None
    return publication


def publication_create_panel(
    *,
    campaign: Campaign,
    user,
    panel_name: str = "prolific",
    slug: str = "",
    participant_param: str = "PROLIFIC_PID",
    study_param: str = "STUDY_ID",
    session_param: str = "SESSION_ID",
    expected_study_id: str = "",
    completion_code: str = "",
    completion_url: str = "",
    redirect_on_completion: bool = False,
    quota_per_session: int | None = None,
    no_work_code: str = "",
    no_work_url: str = "",
) -> Publication:
    """A link-based panel publication: no remote call, so it is published at once."""
    if not _PANEL_NAME.fullmatch(panel_name or "") or panel_name in RESERVED_WORKER_CHANNELS:
        raise PanelRefused(
            "panel_name must be 2-20 lowercase letters, digits or _ "
            f"(not {', '.join(sorted(RESERVED_WORKER_CHANNELS))}); got {panel_name!r}.",
            code="bad_panel_name",
        )
    for name, value in (
        ("participant_param", participant_param),
        ("study_param", study_param),
        ("session_param", session_param),
    ):
        if (value or name != "participant_param") and not re.fullmatch(r"[A-Za-z0-9_.-]{0,64}", value or ""):
            raise PanelRefused(f"{name} must be a URL parameter name; got {value!r}.", code="bad_param")
    if not participant_param:
        raise PanelRefused("participant_param is required.", code="bad_param")
    if not completion_code and not completion_url:
        raise PanelRefused("Give a completion code or a completion URL (or both).", code="no_completion")
    for name, url in (("completion_url", completion_url), ("no_work_url", no_work_url)):
        if url and not re.match(r"^https?://", url):
            raise PanelRefused(f"{name} must start with https:// or http://.", code=f"bad_{name}")
    if redirect_on_completion and not completion_url:
        raise PanelRefused("Redirecting on completion needs a completion URL.", code="bad_completion_url")
    if quota_per_session is not None and (isinstance(quota_per_session, bool) or int(quota_per_session) < 1):
        raise PanelRefused("quota_per_session must be at least 1 (or empty for no quota).", code="bad_quota")
    if campaign.status == Campaign.Status.CLOSED:
        raise PanelRefused("This campaign is closed.", code="campaign_closed")
    slug = slugify(slug or f"{campaign.slug}-{panel_name}")[:56] or "panel"
    if PanelConfig.objects.filter(slug=slug).exists():
        slug = f"{slug}-{get_random_string(6, allowed_chars=_TOKEN_CHARS)}"
    try:
        with transaction.atomic(durable=True):
            publication = Publication.objects.create(
                campaign=campaign,
                kind=Publication.Kind.PANEL,
                channel=panel_name,
                worker_channel=panel_name,
                status=Publication.Status.PUBLISHED,
                token_prefix=token_prefix(),
                created_by=user,
                published_at=timezone.now(),
            )
            PanelConfig.objects.create(
                publication=publication,
                slug=slug,
                participant_param=participant_param,
                study_param=study_param or "",
                session_param=session_param or "",
                expected_study_id=expected_study_id,
                completion_code=completion_code,
                completion_url=completion_url,
                redirect_on_completion=redirect_on_completion,
                quota_per_session=quota_per_session,
                no_work_code=no_work_code,
                no_work_url=no_work_url,
            )
            publication_activity(publication, "publication.created", f"Made a {panel_name} link", actor=user)
    except IntegrityError:
        raise PanelRefused(
            f"This campaign already has an active {panel_name} link; withdraw it first.", code="already_published"
        ) from None
    return publication


def publication_withdraw(*, publication: Publication) -> Publication:
    """Stop recruiting. MTurk HITs are expired by ``withdraw_publication_task`` (after commit); work
    already accepted may still be submitted, and is still reviewed and paid by reconciliation."""
    with transaction.atomic(durable=True):
        publication = Publication.objects.select_for_update().get(pk=publication.pk)
        if publication.status in (Publication.Status.WITHDRAWING, Publication.Status.WITHDRAWN):
            return publication
        now = timezone.now()
        if publication.kind == Publication.Kind.PROLIFIC and publication.status != Publication.Status.DRAFT:
            # The sync stops the study (places already taken are still reviewed and paid), then says withdrawn.
            publication.status = Publication.Status.WITHDRAWING
            prolific_sync_task.delay_on_commit(publication.pk)
        elif publication.kind != Publication.Kind.MTURK or not publication.hits.filter(hit_id__isnull=False).exists():
            publication.status = Publication.Status.WITHDRAWN
        else:
            publication.status = Publication.Status.WITHDRAWING
            withdraw_publication_task.delay_on_commit(publication.pk)
        publication.withdrawn_at = now
        publication.save(update_fields=["status", "withdrawn_at"])
        publication_activity(publication, "publication.withdrawn", f"Withdrew the {publication.channel} publication")
    return publication


def publication_activity(publication: Publication, verb: str, summary: str, *, detail: dict | None = None, **actor):
    """Record a researcher's step on a publication in its campaign's activity log."""
    detail = {"publication_id": publication.pk, "channel": publication.channel, **(detail or {})}
    activity_record(campaign_id=publication.campaign_id, verb=verb, summary=summary, detail=detail, **actor)
