"""Prolific through its API: the study follows the campaign, the campaign follows the study, and
reviews and payments follow what the live audit decided.

The protocol is ``../shared/docs/prolific-api.md``. Writes of rows happen here in short transactions;
every remote call is made outside them (the channel contract's rule). The heart is
:func:`prolific_sync`, which drives one publication's study towards what Chorus wants of it from
whatever state it is in: create the draft (looked up by its ``internal_name`` before a creation whose
answer was lost is repeated), subscribe the hooks, publish once the researcher confirmed, pause, start
or stop with the campaign, grow places with the work left, read the submissions, end the leases of
those who left, approve those in good standing once the audit covered them, hold the others for the
researcher, and pay recorded bonuses. Hooks, Celery beat (``CHORUS_PROLIFIC_RECONCILE_SECONDS``) and the
researcher's actions all run it (or a part of it), so a lost hook or a crash costs a delay, never a
wrong state.
"""

import csv
import hashlib
import io
import json
import logging
import math
import time
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from django.utils.crypto import get_random_string

from annotation.channels.base import ChannelError, ChannelPermanentError, ChannelTransientError
from annotation.channels.errors import PublicationRefused
from annotation.channels.models import (
    PanelConfig,
    PanelSession,
    ProlificAccount,
    ProlificBonus,
    ProlificEvent,
    ProlificExclusionGroup,
    ProlificStudy,
    ProlificSubmission,
    Publication,
)
from annotation.channels.prolific import ProlificClient, delivery_verified
from annotation.channels.services.publications import publication_activity, token_prefix
from annotation.models import Campaign, Label, Participation, Slot, Worker, WorkerAction
from annotation.services import worker_get_or_create
from annotation.services.assignment import worker_leases_end
from annotation.webhooks.models import Endpoint
from annotation.webhooks.services import event_emit
from audits.hook import worker_audited, worker_numbers

logger = logging.getLogger(__name__)

DEVICES = ("desktop", "tablet", "mobile")
REJECTION_CATEGORIES = (
    "TOO_QUICKLY",
    "TOO_SLOWLY",
    "FAILED_INSTRUCTIONS",
    "INCOMP_LONGITUDINAL",
    "FAILED_CHECK",
    "LOW_EFFORT",
    "MALINGERING",
    "NO_CODE",
    "BAD_CODE",
    "NO_DATA",
    "UNSUPP_DEVICE",
    "OTHER",
)
MIN_REJECTION_MESSAGE = 100
LEFT = ("RETURNED", "TIMED-OUT", "REJECTED")  # statuses that free the place: the participant's leases end
IN_PROGRESS = ("RESERVED", "ACTIVE")
HOLDING_FINISHED = ("AWAITING REVIEW", "APPROVED", "PARTIALLY APPROVED")  # finished, still holding a place
HOOK_EVENTS = ("submission.status.change", "study.status.change")
MAX_DELIVERY_AGE = 300  # seconds: older signed deliveries are refused as stale (replays)
SYNC_LOCK_SECONDS = 10 * 60
_CODE_CHARS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
_BONUS_OPEN = (ProlificBonus.Status.RECORDED, ProlificBonus.Status.SET_UP, ProlificBonus.Status.PAYING)


# ---------------------------------------------------------------------------------- accounts


def prolific_account_for(*, user) -> ProlificAccount | None:
    """The account Chorus acts with for this researcher: the token they saved, else the deployment's
    (``CHORUS_PROLIFIC_TOKEN``); None when neither exists."""
    own = ProlificAccount.objects.filter(user=user).first() if user and user.is_authenticated else None
    if own is not None:
        return own
    if not settings.CHORUS_PROLIFIC_TOKEN:
        return None
    try:
        with transaction.atomic(durable=True):
            return ProlificAccount.objects.get_or_create(user=None)[0]
    except IntegrityError:  # created meanwhile by another request
        return ProlificAccount.objects.get(user=None)


def prolific_client(account: ProlificAccount) -> ProlificClient:
    return ProlificClient(token=account.token or settings.CHORUS_PROLIFIC_TOKEN)


def prolific_token_save(*, user, token: str) -> ProlificAccount:
    """Save a researcher's own token, once Prolific accepted it (``users/me``). Refusals never repeat
    the token."""
    token = (token or "").strip()
    if not token or len(token) > 500 or any(c.isspace() for c in token):
        raise PublicationRefused("Paste the API token from Prolific's settings page.", code="bad_token")
    try:
        ProlificClient(token=token).me()
    except ChannelPermanentError:
        raise PublicationRefused("Prolific did not accept this token.", code="bad_token") from None
    except ChannelTransientError as exc:
        raise PublicationRefused(f"{exc.message} Try again in a minute.", code="prolific_unavailable") from None
    with transaction.atomic(durable=True):
        account, _ = ProlificAccount.objects.update_or_create(
            user=user, defaults={"token": token, "workspace_id": "", "hook_secret": "", "hooks": ""}
        )
    return account


# ---------------------------------------------------------------------------------- publishing


@dataclass(frozen=True)
class ProlificPlan:
    """What a study will cost and pay, from the options and the campaign's measured pace."""

    places: int
    reward: Decimal  # per submission, major units
    fee: Decimal
    total: Decimal
    seconds_per_label: float | None  # the campaign's median, None before MIN_PACE_SAMPLE labels
    hourly: Decimal | None  # effective pay per hour at that pace
    hourly_estimated: Decimal  # per hour at the researcher's estimated minutes (Prolific's own figure)
    below_minimum: bool


# Prolific's service fee on rewards (33.3 %) and the VAT on that fee (UK, 20 %): an estimate before
# the draft exists; Prolific's own ``total_cost`` replaces it on the publication page once it does.
FEE_RATE = Decimal("0.3333")
VAT_RATE = Decimal("0.20")


def prolific_options_clean(*, campaign: Campaign, options: dict) -> dict:
    """The researcher's options, checked; every refusal names its field (``PublicationRefused``
    with ``fields``)."""
    errors: dict[str, str] = {}
    title = str(options.get("title") or "").strip()
    description = str(options.get("description") or "").strip()
    if not title or len(title) > 200:
        errors["title"] = "Give the study a title of 1 to 200 characters."
    if not description:
        errors["description"] = "Describe the study for participants."
    try:
        reward = Decimal(str(options.get("reward")))
        if not reward.is_finite() or reward <= 0 or reward.as_tuple().exponent < -2:
            raise InvalidOperation
    except (InvalidOperation, ValueError):
        errors["reward"] = "The reward per submission must be a positive amount with at most 2 decimals, e.g. 1.50."
        reward = None
    n_prompts = campaign.prompts.filter(is_control=False, retired_at__isnull=True).count()
    lpp = options.get("labels_per_participant")
    if isinstance(lpp, bool) or not isinstance(lpp, int | str) or not str(lpp).strip().isdigit():
        errors["labels_per_participant"] = "labels_per_participant must be a whole number."
    elif not 1 <= int(lpp) <= max(n_prompts, 1):
        errors["labels_per_participant"] = (
            f"labels_per_participant must be between 1 and the campaign's {n_prompts} prompts "
            "(a participant never labels a prompt twice)."
        )
    minutes = options.get("estimated_minutes")
    if isinstance(minutes, bool) or not str(minutes or "").strip().isdigit() or not 1 <= int(minutes) <= 1440:
        errors["estimated_minutes"] = "estimated_minutes must be a whole number of minutes, 1 to 1440."
    devices = options.get("devices") or list(DEVICES)
    if not isinstance(devices, list) or not devices or any(d not in DEVICES for d in devices):
        errors["devices"] = f"devices must be a non-empty subset of {', '.join(DEVICES)}."
    filters = options.get("filters") or []
    if not isinstance(filters, list) or any(not isinstance(f, dict) or "filter_id" not in f for f in filters):
        errors["filters"] = "filters must be a list of Prolific filter objects, each with a filter_id."
    auto_approve = options.get("auto_approve", True)
    if not isinstance(auto_approve, bool):
        errors["auto_approve"] = "auto_approve must be true or false."
    if errors:
        raise PublicationRefused(next(iter(errors.values())), code="invalid", fields=errors)
    return {
        "title": title,
        "description": description,
        "reward": str(reward.quantize(Decimal("0.01"))),
        "labels_per_participant": int(lpp),
        "estimated_minutes": int(minutes),
        "devices": sorted(set(devices), key=DEVICES.index),
        "filters": filters,
        "auto_approve": auto_approve,
    }


def prolific_plan(*, campaign: Campaign, clean: dict, places: int | None = None) -> ProlificPlan:
    reward = Decimal(clean["reward"])
    if places is None:
        places = _places_for(_open_slots(campaign), clean["labels_per_participant"])
    fee = (reward * places * FEE_RATE * (1 + VAT_RATE)).quantize(Decimal("0.01"))
    seconds = _seconds_per_label(campaign)
    hourly = None
    if seconds:
        hourly = (reward / Decimal(clean["labels_per_participant"] * seconds / 3600)).quantize(Decimal("0.01"))
    estimated = (reward * 60 / clean["estimated_minutes"]).quantize(Decimal("0.01"))
    lowest = min(x for x in (hourly, estimated) if x is not None)
    return ProlificPlan(
        places=places,
        reward=reward,
        fee=fee,
        total=reward * places + fee,
        seconds_per_label=seconds,
        hourly=hourly,
        hourly_estimated=estimated,
        below_minimum=lowest < settings.CHORUS_PROLIFIC_MIN_HOURLY,
    )


MIN_PACE_SAMPLE = 20  # labels before the measured pace is shown: a handful says little about a crowd


def _seconds_per_label(campaign: Campaign) -> float | None:
    """The campaign's median seconds from lease to label over its latest 2,000 labels (None before
    ``MIN_PACE_SAMPLE`` labels)."""
    spans = sorted(
        (label_at - leased_at).total_seconds()
        for label_at, leased_at in Label.objects.counted()
        .filter(campaign=campaign, leased_at__isnull=False)
        .order_by("-pk")
        .values_list("created_at", "leased_at")[:2000]
    )
    return spans[len(spans) // 2] if len(spans) >= MIN_PACE_SAMPLE else None


def _open_slots(campaign: Campaign) -> int:
    return Slot.objects.filter(campaign=campaign, filled=False).count()


def _places_for(open_slots: int, labels_per_participant: int) -> int:
    return math.ceil(open_slots / labels_per_participant) if open_slots > 0 else 0


def prolific_publication_create(*, campaign: Campaign, user, options: dict, publish: bool = False) -> Publication:
    """Check everything, then write the publication, its participant link (``PanelConfig``: the quota is
    ``labels_per_participant``, the completion code Chorus checks and gives, the no-work code that asks
    to return) and its study row; the draft study is created on Prolific right after commit (and by
    Celery if Prolific is not answering). ``publish``: publish it once the draft exists."""
    account = prolific_account_for(user=user)
    if account is None:
        raise PublicationRefused(
            "Prolific is not configured: set CHORUS_PROLIFIC_TOKEN, or save your own token on the channels page.",
            code="prolific_not_configured",
        )
    if campaign.status not in (Campaign.Status.LIVE, Campaign.Status.PAUSED):
        raise PublicationRefused("Launch the campaign before publishing it.", code="campaign_not_live")
    if not settings.CHORUS_PUBLIC_URL.startswith(("https://", "http://")):
        raise PublicationRefused(
            "CHORUS_PUBLIC_URL must be Chorus's public address: Prolific sends participants to the study URL there.",
            code="no_public_url",
        )
    clean = prolific_options_clean(campaign=campaign, options=options)
    places = _places_for(_open_slots(campaign), clean["labels_per_participant"])
    if places == 0:
        raise PublicationRefused("Every prompt has its labels: there is nothing to publish.", code="nothing_left")
    completion_code = get_random_string(8, allowed_chars=_CODE_CHARS)
    no_work_code = get_random_string(8, allowed_chars=_CODE_CHARS)
    complete = settings.CHORUS_PROLIFIC_COMPLETION_URL
    try:
        with transaction.atomic(durable=True):
            publication = Publication.objects.create(
                campaign=campaign,
                kind=Publication.Kind.PROLIFIC,
                channel="prolific",
                worker_channel="prolific",
                status=Publication.Status.PENDING if publish else Publication.Status.DRAFT,
                options=clean,
                token_prefix=token_prefix(),
                planned_assignments=places,
                created_by=user,
            )
            PanelConfig.objects.create(
                publication=publication,
                slug=f"{campaign.slug[:40]}-p{publication.pk}",
                completion_code=completion_code,
                completion_url=f"{complete}?cc={completion_code}",
                redirect_on_completion=True,
                no_work_code=no_work_code,
                quota_per_session=clean["labels_per_participant"],
            )
            ProlificStudy.objects.create(
                publication=publication,
                account=account,
                reward_minor=int(Decimal(clean["reward"]) * 100),
                labels_per_participant=clean["labels_per_participant"],
                estimated_minutes=clean["estimated_minutes"],
                devices=clean["devices"],
                filters=clean["filters"],
                auto_approve=clean["auto_approve"],
                publish_requested=publish,
                pending="Creating the draft study on Prolific.",
            )
            publication_activity(
                publication, "publication.created", f"Made a Prolific study ({places} places)", actor=user
            )
    except IntegrityError:
        raise PublicationRefused(
            "This campaign already has an active Prolific publication; withdraw it first.", code="already_published"
        ) from None
    _sync_soon(publication.pk, inline=True)
    return Publication.objects.select_related("campaign", "prolific").get(pk=publication.pk)  # as the sync left it


def prolific_publish(*, publication: Publication) -> Publication:
    """The researcher confirmed: publish the draft (now, and by Celery if Prolific is not answering)."""
    with transaction.atomic(durable=True):
        updated = Publication.objects.filter(pk=publication.pk, status=Publication.Status.DRAFT).update(
            status=Publication.Status.PENDING
        )
        ProlificStudy.objects.filter(publication=publication).update(
            publish_requested=True, pending="Publishing the study on Prolific."
        )
        if updated:
            publication_activity(publication, "publication.published", "Published the Prolific study")
    if not updated and publication.status != Publication.Status.PENDING:
        raise PublicationRefused(f"This publication is {publication.get_status_display().lower()}.", code="bad_state")
    _sync_soon(publication.pk, inline=True)
    return Publication.objects.select_related("campaign", "prolific").get(pk=publication.pk)  # as the sync left it


def _sync_soon(publication_id: int, *, inline: bool = False, countdown: float = 0) -> None:
    """Run the sync now (inline: in this request, best effort) and leave the rest to Celery."""
    from annotation.channels.tasks import prolific_sync_task  # noqa: PLC0415 (tasks import services: a cycle)

    if inline:
        try:
            prolific_sync(publication_id=publication_id)
            return
        except ChannelTransientError as exc:
            _note(publication_id, f"Waiting for Prolific ({exc.message}); retried in the background.")
        except ChannelPermanentError as exc:
            _fail(publication_id, exc)
            return
    transaction.on_commit(lambda: prolific_sync_task.apply_async((publication_id,), countdown=countdown))


def _note(publication_id: int, text: str) -> None:
    with transaction.atomic(durable=True):
        ProlificStudy.objects.filter(publication_id=publication_id).update(pending=text)


def _fail(publication_id: int, exc: ChannelError) -> None:
    """Prolific refused a call that defines the study (its creation, publishing): the publication fails
    with Prolific's reason in words; nothing was published."""
    with transaction.atomic(durable=True):
        ProlificStudy.objects.filter(publication_id=publication_id).update(pending="")
        if (
            Publication.objects.filter(pk=publication_id, status__in=Publication.ACTIVE_STATUSES)
            .exclude(status=Publication.Status.PUBLISHED)
            .update(status=Publication.Status.FAILED, error=exc.message)
        ):
            _publication_status_emit(Publication.objects.get(pk=publication_id), Publication.Status.FAILED)


def _publication_status_emit(publication: Publication, status: str) -> None:
    event_emit(
        campaign=publication.campaign,
        event_type=Endpoint.Event.PUBLICATION_STATUS,
        data={"publication": publication.pk, "channel": publication.channel, "status": status},
    )


# ---------------------------------------------------------------------------------- the sync


def _study_body(study: ProlificStudy, group_id: str) -> dict:
    publication = study.publication
    panel = publication.panel
    entry = settings.CHORUS_PUBLIC_URL.rstrip("/") + reverse("channels:panel_entry", args=[panel.slug])
    url = entry + "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
    filters = list(study.filters)
    if group_id:
        filters.append({"filter_id": "participant_group_blocklist", "selected_values": [group_id]})
    return {
        "name": publication.options["title"],
        "internal_name": study.internal_name,
        "description": publication.options["description"],
        "external_study_url": url,
        "prolific_id_option": "url_parameters",
        "completion_codes": [
            {
                "code": panel.completion_code,
                "code_type": "COMPLETED",
                "actor": "participant",
                # Chorus reviews every submission itself, after the audit: never Prolific's auto-approval.
                "actions": [{"action": "MANUALLY_REVIEW"}],
            },
            {
                # No work for them: ask them to return, so the place reopens and they are not penalised.
                # [I] The doc lists REQUEST_RETURN among actions; OTHER is the neutral code type.
                "code": panel.no_work_code,
                "code_type": "OTHER",
                "actor": "participant",
                "actions": [{"action": "REQUEST_RETURN"}],
            },
        ],
        "total_available_places": max(publication.planned_assignments, 1),
        "estimated_completion_time": study.estimated_minutes,
        "reward": study.reward_minor,
        "device_compatibility": study.devices,
        "filters": filters,
    }


def prolific_sync(*, publication_id: int) -> str:
    """Drive the publication's study towards what Chorus wants (the module docstring); single flight
    per publication. Raises ``ChannelTransientError`` for Celery to retry; what is done stays done."""
    lock = f"channels:prolific-sync:{publication_id}"
    if not cache.add(lock, 1, SYNC_LOCK_SECONDS):
        return "busy"
    try:
        return _sync(publication_id)
    except ChannelTransientError as exc:  # said on the publication page until a sync gets through
        _note(publication_id, f"Waiting for Prolific ({exc.message}); retried in the background.")
        raise
    finally:
        cache.delete(lock)


def _sync(publication_id: int) -> str:
    study = ProlificStudy.objects.select_related("publication__campaign", "publication__panel", "account").get(
        publication_id=publication_id
    )
    publication, account = study.publication, study.account
    if publication.status == Publication.Status.FAILED:
        return "failed"
    if publication.status == Publication.Status.WITHDRAWN and not study.study_id:
        return "withdrawn before any study"
    client = prolific_client(account)
    _workspace_ensure(account, client)
    group_id = _group_ensure(publication.campaign, account, client)
    if not study.study_id:
        _study_create(study, client, group_id)
    _hooks_ensure(account, client)
    remote = client.study_get(study.study_id)
    if study.publish_requested and remote["status"] == "UNPUBLISHED":
        places = max(_places_for(_open_slots(publication.campaign), study.labels_per_participant), 1)
        client.study_update(study.study_id, {"total_available_places": places})
        remote = client.study_transition(study.study_id, "PUBLISH")
        with transaction.atomic(durable=True):
            if Publication.objects.filter(pk=publication.pk, status=Publication.Status.PENDING).update(
                status=Publication.Status.PUBLISHED, published_at=timezone.now(), planned_assignments=places
            ):
                _publication_status_emit(publication, Publication.Status.PUBLISHED)
    _remote_save(study, remote)
    if remote["status"] != "UNPUBLISHED":
        for submission in client.submissions(study.study_id):
            _submission_apply(publication, submission)
        remote = _study_follow(study, client, remote)
        remote = _places_grow(study, client, remote)
        _remote_save(study, remote)
        prolific_review_auto(publication_id=publication.pk, client=client)
    _blocked_push(publication.campaign, account, client, group_id)
    for bonus_id in ProlificBonus.objects.filter(publication=publication, status__in=_BONUS_OPEN).values_list(
        "pk", flat=True
    ):
        prolific_bonus_pay(bonus_id=bonus_id, client=client)
    finished = (
        remote["status"] == "COMPLETED"
        or (publication.status == Publication.Status.WITHDRAWN and remote["status"] == "UNPUBLISHED")
    ) and not ProlificBonus.objects.filter(publication=publication, status__in=_BONUS_OPEN).exists()
    with transaction.atomic(durable=True):
        ProlificStudy.objects.filter(pk=study.pk).update(pending="", synced_at=timezone.now())
        if finished:  # every submission approved and every bonus paid: nothing left to reconcile
            Publication.objects.filter(pk=publication.pk).update(closed_at=timezone.now())
    return remote["status"]


def _workspace_ensure(account: ProlificAccount, client: ProlificClient) -> None:
    if account.workspace_id:
        return
    workspaces = client.workspaces()
    # [I] A token sees its own workspaces; Chorus uses the first (the researcher's default one).
    account.workspace_id = workspaces[0]["id"] if workspaces else ""
    with transaction.atomic(durable=True):
        ProlificAccount.objects.filter(pk=account.pk).update(workspace_id=account.workspace_id)


def _group_ensure(campaign: Campaign, account: ProlificAccount, client: ProlificClient) -> str:
    """The campaign's exclusion group on this account, created once (before any study, whose filters
    cannot change after publishing). A creation whose answer was lost leaves an empty group behind:
    harmless, and nothing else can be keyed on (groups have no internal name)."""
    with transaction.atomic(durable=True):
        group, _ = ProlificExclusionGroup.objects.get_or_create(campaign=campaign, account=account)
    if not group.group_id:
        created = client.group_create(
            name=f"Chorus: blocked in {campaign.slug}"[:100], workspace_id=account.workspace_id
        )
        group.group_id = created["id"]
        with transaction.atomic(durable=True):
            ProlificExclusionGroup.objects.filter(pk=group.pk).update(group_id=group.group_id)
    return group.group_id


def _study_create(study: ProlificStudy, client: ProlificClient, group_id: str) -> None:
    """Create the draft, unless an earlier attempt did (its answer lost): Chorus's key is in the
    study's ``internal_name``, so look for it first."""
    existing = next((s for s in client.studies() if s.get("internal_name") == study.internal_name), None)
    remote = existing or client.study_create(_study_body(study, group_id))
    study.study_id = remote["id"]
    with transaction.atomic(durable=True):
        ProlificStudy.objects.filter(pk=study.pk).update(study_id=study.study_id)
        # The study link now refuses arrivals that name another study.
        PanelConfig.objects.filter(publication_id=study.publication_id).update(expected_study_id=study.study_id)
    _remote_save(study, remote)


def _remote_save(study: ProlificStudy, remote: dict) -> None:
    study.remote_status = remote.get("status", "")
    study.total_places = int(remote.get("total_available_places") or 0)
    study.places_taken = int(remote.get("places_taken") or 0)
    cost = remote.get("total_cost")
    with transaction.atomic(durable=True):
        ProlificStudy.objects.filter(pk=study.pk).update(
            remote_status=study.remote_status,
            total_places=study.total_places,
            places_taken=study.places_taken,
            total_cost_minor=int(cost) if isinstance(cost, int | float) else None,
        )


def _campaign_done(campaign: Campaign) -> bool:
    """Every prompt has its final number of labels: no open slot (adaptive k adds one inside the
    submit that fills the last, so no open slot means every prompt stopped)."""
    return not Slot.objects.filter(campaign=campaign, filled=False).exists()


def _study_follow(study: ProlificStudy, client: ProlificClient, remote: dict) -> dict:
    """Pause, start or stop the study as the campaign and the publication say."""
    publication = study.publication
    campaign = Campaign.objects.get(pk=publication.campaign_id)
    status = remote["status"]
    stop = (
        publication.status in (Publication.Status.WITHDRAWING, Publication.Status.WITHDRAWN)
        or campaign.status == Campaign.Status.CLOSED
        or _campaign_done(campaign)
    )
    if stop and status in STOPPABLE:
        remote = _transition(study, client, "STOP", done=lambda now: now not in STOPPABLE)
    elif not stop and campaign.status == Campaign.Status.PAUSED and status == "ACTIVE":
        remote = _transition(study, client, "PAUSE", done=lambda now: now != "ACTIVE")
    elif not stop and campaign.status == Campaign.Status.LIVE and status == "PAUSED":
        remote = _transition(study, client, "START", done=lambda now: now != "PAUSED")
    if stop and publication.status == Publication.Status.WITHDRAWING:
        with transaction.atomic(durable=True):
            Publication.objects.filter(pk=publication.pk).update(status=Publication.Status.WITHDRAWN)
            _publication_status_emit(publication, Publication.Status.WITHDRAWN)
    return remote


STOPPABLE = ("ACTIVE", "PAUSED", "SCHEDULED")


def _transition(study: ProlificStudy, client: ProlificClient, action: str, *, done) -> dict:
    """Send a study transition; when Prolific refuses it because the study moved meanwhile (it filled
    up, a hook's sync got there first), read it again and accept the state if ``done(status)``."""
    try:
        return client.study_transition(study.study_id, action)
    except ChannelPermanentError:
        remote = client.study_get(study.study_id)
        if done(remote["status"]):
            return remote
        raise


def prolific_places_wanted(*, study: ProlificStudy) -> int:
    """The places the study should have: those taken, plus enough for the open slots that the
    participants holding places cannot fill. Never more open places than the open slots can use.

    A place taken is finished (its submission awaits review or was approved), or at work: a
    submission in progress, or a panel session not completed, each able to give the rest of its
    quota. A place Prolific counts as taken that Chorus has not heard of yet (its hook is on the way,
    the participant has not opened the link) is counted as at work with a whole quota, so a
    participant arriving is never counted twice (a place added for their slots could not be taken
    back: places only grow)."""
    publication = study.publication
    lpp = study.labels_per_participant
    known = dict(ProlificSubmission.objects.filter(publication=publication).values_list("submission_id", "status"))
    finished = sum(1 for status in known.values() if status in HOLDING_FINISHED)
    sessions = dict(
        PanelSession.objects.filter(panel__publication=publication, completed_at__isnull=True).values_list(
            "session_ref", "n_labels"
        )
    )
    at_work = {sid for sid, status in known.items() if status in IN_PROGRESS}
    at_work |= {ref for ref in sessions if ref and known.get(ref, "ACTIVE") in IN_PROGRESS}
    unknown = max(study.places_taken - finished - len(at_work), 0)
    capacity = sum(max(lpp - sessions.get(ref, 0), 0) for ref in at_work) + unknown * lpp
    needed = _places_for(max(_open_slots(publication.campaign) - capacity, 0), lpp)
    return study.places_taken + needed


def _places_grow(study: ProlificStudy, client: ProlificClient, remote: dict) -> dict:
    """Prolific's places only grow, and take the new total (§2.3)."""
    if remote["status"] not in ("ACTIVE", "PAUSED", "AWAITING REVIEW", "COMPLETED"):
        return remote
    campaign = Campaign.objects.get(pk=study.publication.campaign_id)
    if campaign.status != Campaign.Status.LIVE or study.publication.status != Publication.Status.PUBLISHED:
        return remote
    study.places_taken = int(remote.get("places_taken") or 0)
    wanted = prolific_places_wanted(study=study)
    if wanted > int(remote.get("total_available_places") or 0):
        remote = client.study_update(study.study_id, {"total_available_places": wanted})
    return remote


def _submission_apply(publication: Publication, remote: dict) -> ProlificSubmission:
    """Record a submission as Prolific reports it; when the participant left (returned, timed out,
    rejected), end their open leases in the campaign at once so their slots go to others."""
    participant = remote.get("participant_id") or remote.get("participant") or ""
    worker = worker_get_or_create(channel=publication.worker_channel, external_id=participant)
    with transaction.atomic(durable=True):
        submission, _ = ProlificSubmission.objects.update_or_create(
            submission_id=remote["id"],
            defaults={
                "publication": publication,
                "participant_id": participant,
                "worker": worker,
                "status": remote["status"],
            },
        )
    if submission.status in LEFT and not submission.leases_ended:
        worker_leases_end(campaign_id=publication.campaign_id, worker_id=worker.pk)
        with transaction.atomic(durable=True):
            ProlificSubmission.objects.filter(pk=submission.pk).update(leases_ended=True)
    return submission


def _blocked_push(campaign: Campaign, account: ProlificAccount, client: ProlificClient, group_id: str) -> None:
    """The safety net under ``prolific_standing_push``: every blocked Prolific participant of the
    campaign is in its exclusion group (adding twice is harmless)."""
    blocked = list(
        Participation.objects.filter(
            campaign=campaign, blocked_at__isnull=False, worker__channel="prolific"
        ).values_list("worker__external_id", flat=True)
    )
    if blocked and group_id:
        client.group_add(group_id, blocked)


# ---------------------------------------------------------------------------------- hooks


def _hooks_ensure(account: ProlificAccount, client: ProlificClient) -> None:
    """Subscribe the account's workspace to submission and study changes, delivered to Chorus's hook
    endpoint, whenever ``CHORUS_PUBLIC_URL`` is set. Chorus does not second-guess the address: where
    Prolific refuses it (it wants a public https URL), reconciliation carries the work, and the
    channels page says so."""
    if account.hooks in (ProlificAccount.Hooks.SUBSCRIBED, ProlificAccount.Hooks.REFUSED):
        return
    if not settings.CHORUS_PUBLIC_URL:
        _hooks_state(account, ProlificAccount.Hooks.NO_URL, "CHORUS_PUBLIC_URL is not set.")
        return
    target = settings.CHORUS_PUBLIC_URL.rstrip("/") + reverse("channels:prolific_hook", args=[account.pk])
    try:
        secret = client.hook_secret_create(account.workspace_id)  # replaces any earlier one
        with transaction.atomic(durable=True):
            ProlificAccount.objects.filter(pk=account.pk).update(hook_secret=secret)
        subscribed = {
            s.get("event_type")
            for s in client.hook_subscriptions(account.workspace_id)
            if s.get("target_url") == target and s.get("is_enabled")
        }
        for event_type in HOOK_EVENTS:
            if event_type in subscribed:
                continue
            subscription, confirm = client.hook_subscribe(
                event_type=event_type, target_url=target, workspace_id=account.workspace_id
            )
            client.hook_confirm(subscription["id"], confirm)
    except ChannelPermanentError as exc:
        _hooks_state(account, ProlificAccount.Hooks.REFUSED, exc.message)
        return
    _hooks_state(account, ProlificAccount.Hooks.SUBSCRIBED, "")


def _hooks_state(account: ProlificAccount, state: str, note: str) -> None:
    account.hooks, account.hooks_note = state, note
    with transaction.atomic(durable=True):
        ProlificAccount.objects.filter(pk=account.pk).update(hooks=state, hooks_note=note)


def prolific_event_receive(*, account_id: int, headers, raw_body: bytes) -> tuple[int, str]:
    """A hook delivery: verify the signature over timestamp and body (constant time), refuse stale
    timestamps, keep the event once by its ``X-Event-ID``, and leave the work to Celery. Returns the
    HTTP status and a short text; a forged or stale delivery changes nothing."""
    from annotation.channels.tasks import prolific_event_task  # noqa: PLC0415 (tasks import services: a cycle)

    account = ProlificAccount.objects.filter(pk=account_id).first()
    timestamp = headers.get("X-Prolific-Request-Timestamp", "")
    signature = headers.get("X-Prolific-Request-Signature", "")
    if account is None or not delivery_verified(
        secret=account.hook_secret, timestamp=timestamp, signature=signature, raw_body=raw_body
    ):
        return 403, "bad signature"
    try:
        age = abs(time.time() - float(timestamp))
    except ValueError:
        return 403, "bad timestamp"
    if age > MAX_DELIVERY_AGE:
        return 403, "stale delivery"
    event_id = headers.get("X-Event-ID", "")
    try:
        payload = json.loads(raw_body)
        resource_id = str(payload["resource_id"])
        event_type = str(payload["event_type"])
    except (ValueError, KeyError, TypeError):
        return 400, "not a Prolific event"
    if not event_id:
        return 400, "no X-Event-ID"
    try:
        with transaction.atomic(durable=True):
            event = ProlificEvent.objects.create(
                account=account,
                event_id=event_id[:200],
                event_type=event_type[:60],
                resource_id=resource_id[:64],
                sent_at=float(headers.get("X-Timestamp") or timestamp or 0),
                payload=payload,
            )
            prolific_event_task.delay_on_commit(event.pk)
    except IntegrityError:
        return 200, "already received"
    return 202, "accepted"


def prolific_event_process(*, event_id: int) -> str:
    """Act on a received event. The payload is a notification, not a snapshot: the resource is read
    again, so deliveries out of order or late apply the current state, never an old one."""
    event = ProlificEvent.objects.select_related("account").get(pk=event_id)
    if event.processed_at:
        return "done before"
    client = prolific_client(event.account)
    if event.event_type.startswith("submission."):
        remote = client.submission_get(event.resource_id)
        study_id = remote.get("study_id") or remote.get("study")
        study = ProlificStudy.objects.select_related("publication").filter(study_id=study_id).first()
        if study is None:
            outcome = "not a Chorus study"
        else:
            remote.setdefault("participant_id", remote.get("participant"))
            _submission_apply(study.publication, remote)
            # The campaign may be complete now, or closed meanwhile: stop or grow the study as the sync would.
            current = _study_follow(study, client, client.study_get(study.study_id))
            _remote_save(study, _places_grow(study, client, current))
            prolific_review_auto(publication_id=study.publication_id, client=client)
            outcome = remote["status"]
    else:
        study = ProlificStudy.objects.filter(study_id=event.resource_id).first()
        if study is None:
            outcome = "not a Chorus study"
        else:
            _remote_save(study, client.study_get(study.study_id))
            outcome = study.remote_status
    with transaction.atomic(durable=True):
        ProlificEvent.objects.filter(pk=event.pk).update(processed_at=timezone.now())
    return outcome


# ---------------------------------------------------------------------------------- reviewing


def _standing(campaign_id: int, worker_id: int) -> str:
    """``blocked``, ``excluded`` or ``good``."""
    participation = Participation.objects.filter(campaign_id=campaign_id, worker_id=worker_id).first()
    if participation is not None and participation.blocked_at:
        return "blocked"
    if participation is not None and participation.excluded_at:
        return "excluded"
    return "good"


def prolific_review_auto(*, publication_id: int, client: ProlificClient | None = None) -> dict:
    """Chorus's verdict on each submission awaiting review: a participant in good standing is approved
    (bulk) once the live audit has read all their labels and applied the rules (``worker_audited``); a
    blocked or excluded one is held for the researcher, never approved automatically. Returns the
    counts by verdict. A submission left waiting is reviewed again when the audit's next quick run has
    applied the rules (its ``rules_applied`` signal, ``annotation.channels.receivers``), and by the
    reconciliation."""
    study = ProlificStudy.objects.select_related("publication", "account").get(publication_id=publication_id)
    publication = study.publication
    waiting = ProlificSubmission.objects.filter(
        publication=publication,
        status="AWAITING REVIEW",
        verdict__in=(
            ProlificSubmission.Verdict.NONE,
            ProlificSubmission.Verdict.WAITING,
            ProlificSubmission.Verdict.HELD,
        ),
    ).select_related("worker")
    approve, held, wait, newly_held = [], [], [], []
    for submission in waiting:
        standing = _standing(publication.campaign_id, submission.worker_id)
        if standing != "good":
            held.append(submission.pk)
            if submission.verdict != ProlificSubmission.Verdict.HELD:
                newly_held.append(submission)
        elif not study.auto_approve:
            continue
        elif worker_audited(
            campaign_id=publication.campaign_id, worker_id=submission.worker_id, public_id=submission.worker.public_id
        ):
            approve.append(submission)
        else:
            wait.append(submission.pk)
    # Conditional on the verdict this run read being still undecided: two reviews run at once (the audit's
    # signal and the reconciliation), and one that saw a worker not yet audited must not write "waiting"
    # over the other's "approve" or "approved" (Prolific would say approved while Chorus waits forever).
    undecided = (ProlificSubmission.Verdict.NONE, ProlificSubmission.Verdict.WAITING, ProlificSubmission.Verdict.HELD)
    with transaction.atomic(durable=True):
        ProlificSubmission.objects.filter(pk__in=held, verdict__in=undecided).update(
            verdict=ProlificSubmission.Verdict.HELD
        )
        ProlificSubmission.objects.filter(pk__in=wait, verdict__in=undecided[:2]).update(
            verdict=ProlificSubmission.Verdict.WAITING
        )
        for submission in newly_held:
            event_emit(
                campaign=publication.campaign,
                event_type=Endpoint.Event.SUBMISSION_HELD,
                data={
                    "publication": publication.pk,
                    "submission": submission.submission_id,
                    "worker": submission.worker.public_id,
                    "standing": _standing(publication.campaign_id, submission.worker_id),
                },
            )
    if approve:
        ids = [s.submission_id for s in approve]
        with transaction.atomic(durable=True):  # Chorus's decision first: a lost answer is re-sent, never reversed
            ProlificSubmission.objects.filter(pk__in=[s.pk for s in approve]).update(
                verdict=ProlificSubmission.Verdict.APPROVE
            )
        (client or prolific_client(study.account)).bulk_approve(ids)
        with transaction.atomic(durable=True):
            ProlificSubmission.objects.filter(pk__in=[s.pk for s in approve]).update(
                verdict=ProlificSubmission.Verdict.APPROVED, reviewed_at=timezone.now()
            )
    return {"approved": len(approve), "held": len(held), "waiting": len(wait)}


def prolific_evidence(*, publication: Publication, worker: Worker) -> dict:
    """What the researcher sees before deciding: the worker's standing, the actions taken on them (with
    the rule that fired and its numbers), and their labels."""
    actions = list(
        WorkerAction.objects.filter(campaign_id=publication.campaign_id, worker=worker)
        .select_related("rule")
        .order_by("created_at")
    )
    numbers = next((a.numbers for a in reversed(actions) if a.numbers), {})
    return {
        "standing": _standing(publication.campaign_id, worker.pk),
        "actions": [
            {
                "kind": a.kind,
                "reason": a.reason,
                "rule": str(a.rule) if a.rule_id else None,
                "at": a.created_at.isoformat(),
            }
            for a in actions
        ],
        "control_accuracy": numbers.get("control_accuracy"),
        "n_controls": numbers.get("n_controls"),
        "top_share": numbers.get("top_share"),
        "flags": [f.get("text") for f in numbers.get("flags") or [] if isinstance(f, dict)],
        "n_labels": Label.objects.counted().filter(campaign_id=publication.campaign_id, worker=worker).count(),
    }


def prolific_rejection_draft(
    *, publication: Publication, worker: Worker, evidence: dict | None = None
) -> tuple[str, str]:
    """A rejection category and a message (at least 100 characters) drafted from the evidence (read
    here unless the caller already has it)."""
    evidence = evidence or prolific_evidence(publication=publication, worker=worker)
    parts = []
    if evidence["control_accuracy"] is not None:
        parts.append(
            f"you answered {round(100 * evidence['control_accuracy'])}% of the {evidence['n_controls']} "
            "check questions with a known answer correctly"
        )
    if evidence["top_share"] is not None and evidence["top_share"] >= 0.9:
        parts.append(f"you gave the same answer to {round(100 * evidence['top_share'])}% of the items")
    reasons = [a["reason"] for a in evidence["actions"] if a["kind"] in ("block", "exclude", "recollect")]
    category = "FAILED_CHECK" if evidence["control_accuracy"] is not None else "LOW_EFFORT"
    found = "; ".join(parts) or (reasons[-1] if reasons else "your answers did not follow the instructions")
    message = (
        f"Thank you for taking part. We cannot approve this submission: {found}. "
        "Our quality checks, applied in the same way to every participant, found that these answers "
        "cannot be used in the study."
    )
    return category, message


def prolific_review(
    *, publication: Publication, submission_id: str, decision: str, user, category: str = "", message: str = ""
) -> ProlificSubmission:
    """The researcher's decision on one submission awaiting review, sent to Prolific (approve and
    reject are idempotent there, so a retry after a lost answer is safe)."""
    submission = ProlificSubmission.objects.filter(publication=publication, submission_id=submission_id).first()
    if submission is None:
        raise PublicationRefused(
            f"No submission {submission_id!r} in this publication.", code="unknown_submission", status=404
        )
    if decision not in ("approve", "reject"):
        raise PublicationRefused(
            "decision must be approve or reject.", code="invalid", fields={"decision": "approve or reject"}
        )
    fields = {}
    if decision == "reject":
        message = (message or "").strip()
        if category not in REJECTION_CATEGORIES:
            raise PublicationRefused(
                f"category must be one of Prolific's rejection categories: {', '.join(REJECTION_CATEGORIES)}.",
                code="invalid",
                fields={"category": "unknown rejection category"},
            )
        if len(message) < MIN_REJECTION_MESSAGE:
            raise PublicationRefused(
                f"A rejection message has at least {MIN_REJECTION_MESSAGE} characters (Prolific's rule); "
                f"this one has {len(message)}.",
                code="invalid",
                fields={"message": f"at least {MIN_REJECTION_MESSAGE} characters"},
            )
        fields = {"message": message, "rejection_category": category}
    if submission.status not in ("AWAITING REVIEW", "APPROVED" if decision == "approve" else "REJECTED"):
        raise PublicationRefused(
            f"This submission is {submission.status.lower()}: only one awaiting review can be decided.",
            code="not_awaiting_review",
            status=409,
        )
    client = prolific_client(publication.prolific.account)
    try:
        remote = client.submission_transition(submission_id, decision.upper(), **fields)
    except ChannelTransientError as exc:
        raise PublicationRefused(
            f"{exc.message} Nothing was decided; try again.", code="prolific_unavailable", status=503
        ) from None
    except ChannelPermanentError as exc:
        raise PublicationRefused(exc.message, code="prolific_refused") from None
    with transaction.atomic(durable=True):
        ProlificSubmission.objects.filter(pk=submission.pk).update(
            status=remote.get("status") or submission.status,
            verdict=ProlificSubmission.Verdict.APPROVED
            if decision == "approve"
            else ProlificSubmission.Verdict.REJECTED,
            rejection_category=category if decision == "reject" else "",
            message=fields.get("message", ""),
            reviewed_by=user,
            reviewed_at=timezone.now(),
        )
        publication_activity(
            publication,
            f"submission.{'approved' if decision == 'approve' else 'rejected'}",
            f"{'Approved' if decision == 'approve' else 'Rejected'} the Prolific submission {submission.submission_id}",
            detail={"submission_id": submission.submission_id, "category": category},
            actor=user,
        )
    if decision == "reject":  # the place reopens: whoever takes it labels what this participant's labels leave
        _sync_soon(publication.pk)
    submission.refresh_from_db()
    return submission


# ---------------------------------------------------------------------------------- bonuses


def _bonus_check(*, publication: Publication, worker_ref: str, amount, reason: str):
    """The submission a bonus goes with, the amount and the reason, checked; ``PublicationRefused``
    names each bad field."""
    errors = {}
    try:
        amount = Decimal(str(amount).strip())
        if not amount.is_finite() or amount <= 0 or amount.as_tuple().exponent < -2:
            raise InvalidOperation
    except (InvalidOperation, ValueError):
        errors["amount"] = "amount must be a positive amount with at most 2 decimals."
    else:
        if amount > settings.CHORUS_MAX_BONUS:
            errors["amount"] = f"A bonus is at most {settings.CHORUS_MAX_BONUS} (CHORUS_MAX_BONUS)."
    reason = (reason or "").strip()
    if not reason or len(reason) > 1000:
        errors["reason"] = "Say why, in 1 to 1,000 characters."
    external = str(worker_ref or "").strip().removeprefix(f"{publication.worker_channel}:")
    submission = (
        ProlificSubmission.objects.filter(publication=publication, participant_id=external)
        .exclude(status__in=("RETURNED", "TIMED-OUT"))
        .select_related("worker")
        .order_by("-pk")
        .first()
    )
    if submission is None:
        errors["worker"] = f"{worker_ref!r} has no submission in this publication."
    if errors:
        raise PublicationRefused(" ".join(errors.values()), code="invalid", fields=errors)
    return submission, amount, reason


def prolific_bonus_grant(
    *, publication: Publication, worker_ref: str, amount, reason: str, key: str, user
) -> tuple[ProlificBonus, bool]:
    """Record a bonus (paid after commit by Celery). The same ``key`` again returns the bonus recorded
    under it (``created`` False), so a retried request never pays twice; the same key with other
    values is refused."""
    if not key or len(key) > 200:
        raise PublicationRefused(
            "An idempotency key of 1 to 200 characters is required.",
            code="invalid",
            fields={"key": "1 to 200 characters"},
        )
    submission, amount, reason = _bonus_check(
        publication=publication, worker_ref=worker_ref, amount=amount, reason=reason
    )
    existing = ProlificBonus.objects.filter(publication=publication, key=key).first()
    if existing is None:
        try:
            with transaction.atomic(durable=True):
                bonus = _bonus_record(publication, submission, amount, reason, key, user)
            return bonus, True
        except IntegrityError:  # the same key, concurrently
            existing = ProlificBonus.objects.get(publication=publication, key=key)
    if existing.worker_id != submission.worker_id or existing.amount != amount:
        raise PublicationRefused("This Idempotency-Key was used for another bonus.", code="key_reused", status=409)
    return existing, False


def _bonus_record(publication, submission, amount, reason, key, user) -> ProlificBonus:
    bonus = ProlificBonus.objects.create(
        publication=publication,
        worker=submission.worker,
        submission_id=submission.submission_id,
        amount=amount,
        reason=reason,
        key=key,
        created_by=user,
    )
    publication_activity(
        publication,
        "bonus.granted",
        f"Granted a bonus of {amount} to {submission.worker.external_id}",
        detail={"bonus_id": bonus.pk, "amount": str(amount), "reason": reason},
        actor=user,
    )
    _bonus_enqueue(bonus.pk)
    return bonus


def prolific_bonus_csv(*, publication: Publication, data: bytes, user) -> list[ProlificBonus]:
    """Bonuses from a CSV file with the columns ``worker,amount,reason``: all or nothing (every bad line
    is named), and keyed by the file's content and line, so uploading the same file again pays nobody
    twice."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise PublicationRefused("The file is not UTF-8 text.", code="bad_csv") from None
    rows = list(csv.DictReader(io.StringIO(text)))
    if not rows or not {"worker", "amount", "reason"} <= set(rows[0]):
        raise PublicationRefused("The CSV needs a header row: worker,amount,reason.", code="bad_csv")
    digest = hashlib.sha256(data).hexdigest()[:16]
    checked, errors = [], []
    for line, row in enumerate(rows, start=2):
        try:
            checked.append(
                (
                    line,
                    *_bonus_check(
                        publication=publication, worker_ref=row["worker"], amount=row["amount"], reason=row["reason"]
                    ),
                )
            )
        except PublicationRefused as exc:
            errors.append(f"line {line}: {exc.message}")
    if errors:
        raise PublicationRefused(
            f"Nothing was paid: {'; '.join(errors[:20])}"
            + (f" (and {len(errors) - 20} more)" if len(errors) > 20 else ""),
            code="bad_csv",
        )
    bonuses = []
    with transaction.atomic(durable=True):
        for line, submission, amount, reason in checked:
            key = f"csv:{digest}:{line}"
            bonus = ProlificBonus.objects.filter(publication=publication, key=key).first()
            bonuses.append(bonus or _bonus_record(publication, submission, amount, reason, key, user))
    return bonuses


def prolific_bonus_rule(
    *, publication: Publication, min_control_accuracy: float, amount, reason: str, user
) -> list[ProlificBonus]:
    """A bonus for every participant whose control accuracy (in the newest worker table) is at least
    ``min_control_accuracy``; keyed per participant and rule, so running it again pays nobody twice."""
    rows = worker_numbers(campaign_id=publication.campaign_id)
    bonuses = []
    for row in rows:
        accuracy = row.get("control_accuracy")
        worker = str(row.get("worker") or "")
        if accuracy is None or accuracy < min_control_accuracy or not worker.startswith("prolific:"):
            continue
        key = f"rule:control>={min_control_accuracy}:{amount}:{worker}"
        if not ProlificSubmission.objects.filter(publication=publication, participant_id=worker[9:]).exists():
            continue
        bonus, _ = prolific_bonus_grant(
            publication=publication, worker_ref=worker, amount=amount, reason=reason, key=key, user=user
        )
        bonuses.append(bonus)
    return bonuses


def _bonus_enqueue(bonus_id: int) -> None:
    from annotation.channels.tasks import prolific_bonus_task  # noqa: PLC0415 (tasks import services: a cycle)

    prolific_bonus_task.delay_on_commit(bonus_id)


def prolific_bonus_pay(*, bonus_id: int, client: ProlificClient | None = None) -> str:
    """Set the bonus up once, then pay it once. Prolific's pay is not idempotent: the row says
    ``paying`` before the call, and a bonus found ``paying`` (the answer was lost, or the process
    died) is first checked against the submission's ``bonus_payments``: paid there, it is marked
    paid; only when Prolific shows fewer payments of that amount than Chorus sent is it paid again."""
    lock = f"channels:prolific-bonus:{bonus_id}"
    if not cache.add(lock, 1, 300):
        return "busy"
    try:
        return _bonus_pay(bonus_id, client)
    finally:
        cache.delete(lock)


def _bonus_pay(bonus_id: int, client: ProlificClient | None) -> str:
    bonus = ProlificBonus.objects.select_related("publication__prolific__account").get(pk=bonus_id)
    study = bonus.publication.prolific
    client = client or prolific_client(study.account)
    if bonus.status == ProlificBonus.Status.PAYING:
        remote = client.submission_get(bonus.submission_id)
        minor = int(bonus.amount * 100)
        seen = sum(1 for paid in remote.get("bonus_payments") or [] if int(paid) == minor)
        sent = ProlificBonus.objects.filter(
            publication=bonus.publication,
            submission_id=bonus.submission_id,
            amount=bonus.amount,
            status__in=(ProlificBonus.Status.PAID, ProlificBonus.Status.PAYING),
        ).count()
        if seen >= sent:
            return _bonus_state(bonus, ProlificBonus.Status.PAID)
        # [I] Not there: the pay never reached Prolific. It is sent again for the same set-up.
        _bonus_state(bonus, ProlificBonus.Status.SET_UP)
    if bonus.status == ProlificBonus.Status.RECORDED:
        try:
            setup = client.bonus_setup(study_id=study.study_id, participant_id=bonus.submission_id, amount=bonus.amount)
        except ChannelPermanentError as exc:
            return _bonus_state(bonus, ProlificBonus.Status.FAILED, error=exc.message)
        bonus.setup_id = setup["id"]
        _bonus_state(bonus, ProlificBonus.Status.SET_UP, setup_id=bonus.setup_id)
    if bonus.status == ProlificBonus.Status.SET_UP:
        with transaction.atomic(durable=True):
            if not ProlificBonus.objects.filter(pk=bonus.pk, status=ProlificBonus.Status.SET_UP).update(
                status=ProlificBonus.Status.PAYING
            ):
                return "busy"
        bonus.status = ProlificBonus.Status.PAYING
        try:
            client.bonus_pay(bonus.setup_id)
        except ChannelPermanentError as exc:
            return _bonus_state(bonus, ProlificBonus.Status.FAILED, error=exc.message)
        return _bonus_state(bonus, ProlificBonus.Status.PAID)
    return bonus.status


def _bonus_state(bonus: ProlificBonus, status: str, **fields) -> str:
    bonus.status = status
    if status == ProlificBonus.Status.PAID:
        fields["paid_at"] = timezone.now()
    with transaction.atomic(durable=True):
        ProlificBonus.objects.filter(pk=bonus.pk).update(status=status, **fields)
    return status


# ---------------------------------------------------------------------------------- blocking


def prolific_standing_push(*, campaign_id: int, worker: Worker) -> int:
    """In the caller's transaction, on a block or an unblock: after commit, make the campaign's
    exclusion groups (every study of the campaign excludes them) hold the participant if they are
    blocked then, and not otherwise. Returns how many groups."""
    from annotation.channels.tasks import prolific_group_task  # noqa: PLC0415 (tasks import services: a cycle)

    if worker.channel != "prolific":
        return 0
    groups = list(ProlificExclusionGroup.objects.filter(campaign_id=campaign_id).values_list("pk", flat=True))
    for group_id in groups:
        prolific_group_task.delay_on_commit(group_id, worker.pk)
    return len(groups)


def prolific_group_push(*, group_pk: int, worker_id: int) -> str:
    """Make the group's membership match the worker's standing now (so a block and an unblock sent out
    of order end as the later one says)."""
    group = ProlificExclusionGroup.objects.select_related("account").get(pk=group_pk)
    if not group.group_id:
        return "no group yet"  # the next sync creates it and pushes the blocked (``_blocked_push``)
    worker = Worker.objects.get(pk=worker_id)
    client = prolific_client(group.account)
    if _standing(group.campaign_id, worker_id) == "blocked":
        client.group_add(group.group_id, [worker.external_id])
        return "added"
    client.group_remove(group.group_id, [worker.external_id])
    return "removed"


def prolific_publications_open() -> list[int]:
    """Publications the reconciliation visits: Prolific studies not failed, not finished."""
    return list(
        Publication.objects.filter(kind=Publication.Kind.PROLIFIC)
        .exclude(status=Publication.Status.FAILED)
        .filter(Q(closed_at__isnull=True))
        .values_list("pk", flat=True)
    )
