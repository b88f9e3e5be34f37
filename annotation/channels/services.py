"""Every write of the channels app.

Web requests only write rows and enqueue work: publishing and reconciliation talk to MTurk from Celery
(``annotation.channels.tasks``) or the ``mturk_reconcile`` command, and never inside a database
transaction — each remote call is followed by a short transaction recording its outcome, so a crash
between the two is healed by the next run (every call is idempotent: tokens derived from our rows,
approvals and rejections read back when MTurk says they were already done).

Who labels what is never decided here: the task pages call ``lease_acquire`` and ``label_submit``.
"""
import logging
import re
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.urls import reverse
from django.utils import timezone
from django.utils.crypto import get_random_string
from django.utils.text import slugify

from annotation.channels.base import ChannelError, ChannelPermanentError, GroupSpec, UnitSpec, PreparedGroup
from annotation.channels.models import (
    MTurkAssignment,
    MTurkBonus,
    MTurkHIT,
    MTurkWorkerBlock,
    PanelConfig,
    PanelSession,
    Publication,
)
from annotation.channels.registry import get_channel
from annotation.models import Campaign, Label, Slot, Worker
from annotation.schemas import parse_int, shown
from annotation.services import ServiceError, label_void, worker_get_or_create

logger = logging.getLogger(__name__)

MTURK_COMMISSION_THRESHOLD = 10  # HITs with this many assignments or more pay the higher commission
MTURK_BONUS_MAX = Decimal("100.00")  # per bonus, in US dollars: a mistyped amount must not empty the prepaid balance
REFILL_FEEDBACK = "No label was recorded in Chorus for this assignment."
# How long after an assignment's deadline reconciliation still waits for MTurk to list it as submitted
# before it voids the assignment's label: MTurk's listing may lag behind a submission made at the deadline.
MTURK_SUBMIT_GRACE = timedelta(minutes=5)
_TOKEN_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789"
_PARTICIPANT_ID = re.compile(r"^[A-Za-z0-9_.:@-]{1,200}$")
_PANEL_NAME = re.compile(r"^[a-z][a-z0-9_]{1,19}$")
RESERVED_WORKER_CHANNELS = {Worker.NATIVE, "mturk", "mturk_sandbox", "locmem"}


class PublicationRefused(ServiceError):
    code = "publication_refused"
    status = 400


class PanelRefused(ServiceError):
    code = "panel_refused"
    status = 400


def mturk_client_token(assignment_id: str) -> str:
    """The label's client token for an MTurk assignment: one label per assignment, enforced by the
    unique (worker, client_token) constraint of Label."""
    return f"mturk-{assignment_id}"[:64]


# --- MTurk options ---------------------------------------------------------------------------------

MTURK_DEFAULTS = {
    "keywords": "labeling, annotation, research",
    "assignments_per_hit": 9,
    "lifetime": 7 * 24 * 3600,
    "auto_approval_delay": 3 * 24 * 3600,
    "locales": [],
    "min_approval_rate": None,
    "min_approved": None,
    "frame_height": 0,
}
MTURK_FIELDS = {
    "title", "description", "keywords", "reward", "assignment_duration", "lifetime", "auto_approval_delay",
    "assignments_per_hit", "n_assignments", "locales", "min_approval_rate", "min_approved", "frame_height",
}


def _int_option(options: dict, name: str, low: int, high: int) -> int:
    value = options.get(name)
    if isinstance(value, str):
        value = parse_int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise PublicationRefused(
            f"{name} must be a whole number from {low} to {high}; got {shown(options.get(name))}.", code="bad_options"
        )
    if not low <= value <= high:
        raise PublicationRefused(f"{name} must be from {low} to {high}; got {value}.", code="bad_options")
    return value


def labels_still_needed(*, campaign: Campaign) -> int:
    """Open slots: the labels the campaign still wants from any channel."""
    return Slot.objects.filter(campaign=campaign, filled=False).count()


def mturk_options_clean(*, campaign: Campaign, options: dict) -> dict:
    """Check the researcher's MTurk options and fill defaults; raise PublicationRefused naming the field.

    ``reward`` is US dollars per assignment (one label); durations are seconds (MTurk's bounds);
    ``n_assignments`` defaults to the labels the campaign still needs.
    """
    unknown = set(options) - MTURK_FIELDS
    if unknown:
        raise PublicationRefused(f"Unknown MTurk options: {', '.join(sorted(unknown))}.", code="bad_options")
    merged = {**MTURK_DEFAULTS, **{k: v for k, v in options.items() if v is not None and v != ""}}
    clean = {}
    for name, limit in (("title", 128), ("description", 2000), ("keywords", 1000)):
        text = str(merged.get(name, "")).strip()
        if name != "keywords" and not text:
            raise PublicationRefused(f"{name} is required.", code="bad_options")
        if len(text) > limit:
            raise PublicationRefused(f"{name} must be at most {limit} characters.", code="bad_options")
        clean[name] = text
    try:
        reward = Decimal(str(merged.get("reward", ""))).quantize(Decimal("0.01"))
    except InvalidOperation:
        raise PublicationRefused(f"reward must be an amount in US dollars; got {merged.get('reward')!r}.", code="bad_options") from None
    if not Decimal("0.01") <= reward <= Decimal("100"):
        raise PublicationRefused(f"reward must be from 0.01 to 100.00 US dollars; got {reward}.", code="bad_options")
    clean["reward"] = str(reward)
    merged.setdefault("assignment_duration", max(campaign.lease_seconds, 300))
    clean["assignment_duration"] = _int_option(merged, "assignment_duration", 30, 365 * 24 * 3600)
    if clean["assignment_duration"] < campaign.lease_seconds:
        raise PublicationRefused(
            f"assignment_duration must be at least the campaign's lease length ({campaign.lease_seconds} s).", code="bad_options"
        )
    clean["lifetime"] = _int_option(merged, "lifetime", 30, 365 * 24 * 3600)
    clean["auto_approval_delay"] = _int_option(merged, "auto_approval_delay", 0, 30 * 24 * 3600)
    clean["assignments_per_hit"] = _int_option(merged, "assignments_per_hit", 1, 1000)
    clean["frame_height"] = _int_option(merged, "frame_height", 0, 10000)
    needed = labels_still_needed(campaign=campaign)
    if needed == 0:
        raise PublicationRefused("The campaign needs no more labels.", code="nothing_needed")
    merged.setdefault("n_assignments", needed)
    clean["n_assignments"] = _int_option(merged, "n_assignments", 1, 1_000_000)
    if clean["n_assignments"] > needed:
        raise PublicationRefused(
            f"n_assignments ({clean['n_assignments']}) is more than the {needed} labels the campaign still needs.",
            code="bad_options",
        )
    locales = merged.get("locales") or []
    if isinstance(locales, str):
        locales = [part for part in re.split(r"[\s,]+", locales) if part]
    for code in locales:
        if not re.fullmatch(r"[A-Za-z]{2}(-[A-Za-z0-9]{1,3})?", code):
            raise PublicationRefused(f"locales: {code!r} is not a country code such as US or US-NY.", code="bad_options")
    clean["locales"] = [code.upper() for code in locales]
    for name, high in (("min_approval_rate", 100), ("min_approved", 1_000_000)):
        clean[name] = None if merged.get(name) is None else _int_option(merged, name, 0, high)
    return clean


@dataclass(frozen=True)
class CostPreview:
    """What a publication costs on MTurk: rewards plus MTurk's commission (20% per assignment, 40% on
    HITs with 10 or more assignments, at least $0.01 per assignment), in US dollars."""

    n_assignments: int
    n_hits: int
    reward: Decimal
    rewards_total: Decimal
    commission_total: Decimal
    total: Decimal
    commission_rates: tuple[str, ...]


def mturk_plan(*, n_assignments: int, assignments_per_hit: int) -> list[int]:
    """The pool: HIT sizes, ``assignments_per_hit`` each and the remainder last."""
    full, rest = divmod(n_assignments, assignments_per_hit)
    return [assignments_per_hit] * full + ([rest] if rest else [])


def mturk_cost_preview(*, reward: Decimal, n_assignments: int, assignments_per_hit: int) -> CostPreview:
    reward = Decimal(reward).quantize(Decimal("0.01"))
    plan = mturk_plan(n_assignments=n_assignments, assignments_per_hit=assignments_per_hit)
    commission = Decimal("0")
    rates = set()
    for size in plan:
        rate = Decimal("0.40") if size >= MTURK_COMMISSION_THRESHOLD else Decimal("0.20")
        rates.add(f"{int(rate * 100)}%")
        per_assignment = max((reward * rate).quantize(Decimal("0.01")), Decimal("0.01"))
        commission += per_assignment * size
    rewards = reward * n_assignments
    return CostPreview(
        n_assignments=n_assignments, n_hits=len(plan), reward=reward, rewards_total=rewards,
        commission_total=commission, total=rewards + commission, commission_rates=tuple(sorted(rates)),
    )


def _token_prefix() -> str:
    return "c" + get_random_string(11, allowed_chars=_TOKEN_CHARS)


# --- Creating and withdrawing publications -----------------------------------------------------------


def publication_create_mturk(*, campaign: Campaign, user, options: dict, alias: str = "mturk") -> Publication:
    """Check everything, then write ``Publication(status=pending)`` and its planned HITs, and enqueue
    ``publish_campaign_task`` after commit. Nothing is sent to MTurk here."""
    from annotation.channels.tasks import publish_campaign_task

    channel = get_channel(alias)
    if campaign.status != Campaign.Status.LIVE:
        raise PublicationRefused("Launch the campaign before publishing it.", code="campaign_not_live")
    public_url = getattr(settings, "CHORUS_PUBLIC_URL", "")
    if not public_url.startswith("https://"):
        raise PublicationRefused(
            "CHORUS_PUBLIC_URL must be Chorus's https:// address: MTurk opens the task page there.", code="no_public_url"
        )
    clean = mturk_options_clean(campaign=campaign, options=options)
    plan = mturk_plan(n_assignments=clean["n_assignments"], assignments_per_hit=clean["assignments_per_hit"])
    try:
        with transaction.atomic(durable=True):
            publication = Publication.objects.create(
                campaign=campaign, kind=Publication.Kind.MTURK, channel=alias, worker_channel=channel.worker_channel,
                options=clean, token_prefix=_token_prefix(), planned_assignments=clean["n_assignments"], created_by=user,
            )
            MTurkHIT.objects.bulk_create(
                [MTurkHIT(publication=publication, index=i, max_assignments=size) for i, size in enumerate(plan)]
            )
            publish_campaign_task.delay_on_commit(publication.pk)
    except IntegrityError:
        raise PublicationRefused(
            f"This campaign already has an active publication on {alias}; withdraw it first.", code="already_published"
        ) from None
    return publication


def publication_create_panel(
    *, campaign: Campaign, user, panel_name: str = "prolific", slug: str = "", participant_param: str = "PROLIFIC_PID",
    study_param: str = "STUDY_ID", session_param: str = "SESSION_ID", expected_study_id: str = "",
    completion_code: str = "", completion_url: str = "", redirect_on_completion: bool = False,
    quota_per_session: int | None = None, no_work_code: str = "", no_work_url: str = "",
) -> Publication:
    """A link-based panel publication: no remote call, so it is published at once."""
    if not _PANEL_NAME.fullmatch(panel_name or "") or panel_name in RESERVED_WORKER_CHANNELS:
        raise PanelRefused(
            f"panel_name must be 2-20 lowercase letters, digits or _ (not {', '.join(sorted(RESERVED_WORKER_CHANNELS))}); "
            f"got {panel_name!r}.", code="bad_panel_name",
        )
    for name, value in (("participant_param", participant_param), ("study_param", study_param), ("session_param", session_param)):
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
                campaign=campaign, kind=Publication.Kind.PANEL, channel=panel_name, worker_channel=panel_name,
                status=Publication.Status.PUBLISHED, token_prefix=_token_prefix(), created_by=user,
                published_at=timezone.now(),
            )
            PanelConfig.objects.create(
                publication=publication, slug=slug, participant_param=participant_param, study_param=study_param or "",
                session_param=session_param or "", expected_study_id=expected_study_id, completion_code=completion_code,
                completion_url=completion_url, redirect_on_completion=redirect_on_completion,
                quota_per_session=quota_per_session, no_work_code=no_work_code, no_work_url=no_work_url,
            )
    except IntegrityError:
        raise PanelRefused(
            f"This campaign already has an active {panel_name} link; withdraw it first.", code="already_published"
        ) from None
    return publication


def publication_withdraw(*, publication: Publication) -> Publication:
    """Stop recruiting. MTurk HITs are expired by ``withdraw_publication_task`` (after commit); work
    already accepted may still be submitted, and is still reviewed and paid by reconciliation."""
    from annotation.channels.tasks import withdraw_publication_task

    with transaction.atomic(durable=True):
        publication = Publication.objects.select_for_update().get(pk=publication.pk)
        if publication.status in (Publication.Status.WITHDRAWING, Publication.Status.WITHDRAWN):
            return publication
        now = timezone.now()
        if publication.kind == Publication.Kind.PANEL or not publication.hits.filter(hit_id__isnull=False).exists():
            publication.status = Publication.Status.WITHDRAWN
        else:
            publication.status = Publication.Status.WITHDRAWING
            withdraw_publication_task.delay_on_commit(publication.pk)
        publication.withdrawn_at = now
        publication.save(update_fields=["status", "withdrawn_at"])
    return publication


# --- Publishing (the Celery task's body) ---------------------------------------------------------------


@dataclass
class PublishOutcome:
    publication_id: int
    status: str
    created: int = 0
    found_again: int = 0


def _set_status(publication_id: int, status: str, *, only_from: tuple, error: str = "", **fields) -> bool:
    """Move the publication to ``status`` if it is still in one of ``only_from`` (a withdrawal that
    happened meanwhile wins)."""
    with transaction.atomic(durable=True):
        return bool(
            Publication.objects.filter(pk=publication_id, status__in=only_from).update(status=status, error=error, **fields)
        )


def group_spec(publication: Publication) -> GroupSpec:
    o = publication.options
    return GroupSpec(
        title=o["title"], description=o["description"], keywords=o.get("keywords", ""), reward=Decimal(o["reward"]),
        assignment_duration=o["assignment_duration"], auto_approval_delay=o["auto_approval_delay"],
        locales=tuple(o.get("locales") or ()), min_approval_rate=o.get("min_approval_rate"),
        min_approved=o.get("min_approved"),
    )


def task_url(publication: Publication) -> str:
    return f"{settings.CHORUS_PUBLIC_URL.rstrip('/')}{reverse('channels:mturk_task')}?publication={publication.pk}"


def _unit_spec(publication: Publication, hit: MTurkHIT) -> UnitSpec:
    return UnitSpec(
        token=f"{publication.token_prefix}-h{hit.index}", max_assignments=hit.max_assignments,
        lifetime=publication.options["lifetime"], external_url=task_url(publication),
        frame_height=publication.options.get("frame_height", 0), first_attempt_at=hit.first_attempt_at,
    )


def _publish_hit(channel, publication: Publication, prepared: PreparedGroup, hit: MTurkHIT) -> bool:
    """Create one planned HIT (idempotent through its token); returns whether MTurk created it now."""
    if hit.first_attempt_at is None:  # this attempt is the first: the token is fresh (spec says so)
        with transaction.atomic(durable=True):
            MTurkHIT.objects.filter(pk=hit.pk, first_attempt_at__isnull=True).update(first_attempt_at=timezone.now())
    unit = channel.publish(prepared=prepared, unit=_unit_spec(publication, hit))
    with transaction.atomic(durable=True):
        MTurkHIT.objects.filter(pk=hit.pk).update(
            hit_id=unit.unit_id, status=MTurkHIT.Status.LIVE, expires_at=unit.expires_at, max_assignments=unit.max_assignments
        )
    return unit.created


def publication_publish(*, publication_id: int) -> PublishOutcome:
    """Publish a pending MTurk publication: the HIT type and block list, then every planned HIT.

    Safe to run again at any point (a Celery retry, a second worker, reconciliation resuming a stalled
    run): every call carries a token derived from our rows. Transient channel errors propagate (the task
    retries them); a permanent one marks the publication failed, keeping the HITs already created.
    """
    publication = Publication.objects.select_related("campaign").get(pk=publication_id)
    if publication.kind != Publication.Kind.MTURK or publication.status not in (
        Publication.Status.PENDING, Publication.Status.PUBLISHING
    ):
        return PublishOutcome(publication_id, publication.status)
    _set_status(publication_id, Publication.Status.PUBLISHING,
                only_from=(Publication.Status.PENDING, Publication.Status.PUBLISHING))
    channel = get_channel(publication.channel)
    outcome = PublishOutcome(publication_id, Publication.Status.PUBLISHING)
    try:
        if publication.remote_group_id and publication.remote_block_id:
            prepared = PreparedGroup(publication.remote_group_id, publication.remote_block_id)
        else:
            prepared = channel.prepare(group=group_spec(publication), token=publication.token_prefix)
            with transaction.atomic(durable=True):
                Publication.objects.filter(pk=publication_id).update(
                    remote_group_id=prepared.group_id, remote_block_id=prepared.block_id
                )
        for hit in MTurkHIT.objects.filter(publication_id=publication_id, hit_id__isnull=True).order_by("index"):
            status = Publication.objects.values_list("status", flat=True).get(pk=publication_id)
            if status != Publication.Status.PUBLISHING:  # withdrawn meanwhile
                outcome.status = status
                return outcome
            if not Slot.objects.filter(campaign_id=publication.campaign_id, filled=False).exists():
                break  # the campaign filled up meanwhile: the remaining HITs are not needed
            if _publish_hit(channel, publication, prepared, hit):
                outcome.created += 1
            else:
                outcome.found_again += 1
    except ChannelPermanentError as exc:
        logger.warning("Publishing publication %s failed: %s", publication_id, exc.message)
        if _set_status(publication_id, Publication.Status.FAILED, only_from=(Publication.Status.PUBLISHING,),
                       error=exc.message):
            outcome.status = Publication.Status.FAILED
        return outcome
    if _set_status(publication_id, Publication.Status.PUBLISHED, only_from=(Publication.Status.PUBLISHING,),
                   published_at=timezone.now()):
        outcome.status = Publication.Status.PUBLISHED
    else:
        outcome.status = Publication.objects.values_list("status", flat=True).get(pk=publication_id)
    return outcome


# --- The MTurk task page --------------------------------------------------------------------------------


def mturk_assignment_open(*, hit: MTurkHIT, assignment_id: str, worker: Worker) -> MTurkAssignment:
    """Chorus's record of an assignment the worker opened; refused when the id is already another
    worker's or another HIT's (a forged or mixed-up link)."""
    with transaction.atomic(durable=True):
        assignment, created = MTurkAssignment.objects.get_or_create(
            assignment_id=assignment_id, defaults={"hit": hit, "worker": worker, "opened_at": timezone.now()}
        )
        if not created and (assignment.worker_id != worker.pk or assignment.hit_id != hit.pk):
            raise PublicationRefused("This assignment belongs to another worker or HIT.", code="assignment_mismatch")
        if assignment.opened_at is None:
            assignment.opened_at = timezone.now()
            assignment.save(update_fields=["opened_at"])
    return assignment


def mturk_assignment_labeled(*, assignment: MTurkAssignment, label_id: int) -> None:
    with transaction.atomic(durable=True):
        MTurkAssignment.objects.filter(pk=assignment.pk, label__isnull=True).update(label_id=label_id)


def mturk_nothing_left(*, assignment: MTurkAssignment) -> MTurkWorkerBlock:
    """The worker has nothing left in this campaign: note it, and give them the block-list
    qualification (``mturk_block_worker_task`` after commit) so MTurk stops showing them the HITs."""
    from annotation.channels.tasks import mturk_block_worker_task

    publication_id = assignment.hit.publication_id
    with transaction.atomic(durable=True):
        MTurkAssignment.objects.filter(pk=assignment.pk).update(nothing_left=True)
        block, created = MTurkWorkerBlock.objects.get_or_create(publication_id=publication_id, worker_id=assignment.worker_id)
        if block.status == MTurkWorkerBlock.Status.PENDING:
            mturk_block_worker_task.delay_on_commit(block.pk)
    return block


def mturk_block_push(*, block_id: int) -> bool:
    """Send a pending block to MTurk; returns whether a call was made."""
    block = MTurkWorkerBlock.objects.select_related("publication", "worker").get(pk=block_id)
    if block.status != MTurkWorkerBlock.Status.PENDING or not block.publication.remote_block_id:
        return False
    get_channel(block.publication.channel).block_worker(
        block_id=block.publication.remote_block_id, worker_ref=block.worker.external_id
    )
    with transaction.atomic(durable=True):
        MTurkWorkerBlock.objects.filter(pk=block.pk).update(status=MTurkWorkerBlock.Status.DONE, done_at=timezone.now())
    return True


class BonusAlreadyGranted(PublicationRefused):
    """The same bonus was already granted: ``bonus`` is the row that was (or will be) paid."""

    code = "bonus_already_granted"
    status = 409

    def __init__(self, message: str, *, bonus: MTurkBonus):
        super().__init__(message)
        self.bonus = bonus


def mturk_bonus_grant(*, assignment: MTurkAssignment, amount, reason: str, user=None) -> MTurkBonus:
    """Grant a bonus; reconciliation pays it (with a token derived from the new row).

    A bonus is identified by its worker, publication, amount and reason. Granting an identical one again
    (a double-clicked form, a resubmitted page) raises BonusAlreadyGranted with the first row instead of
    writing a second one: a second row would carry a second token, which MTurk would pay a second time.
    A different amount or reason is a different bonus; a failed bonus does not count.

    Locks the publication's row, so two concurrent grants cannot both find no earlier bonus. A grant on a
    closed publication reopens it: reconciliation skips closed publications, and one with a pending
    bonus is not closed (see ``_keep_or_expire``).
    """
    try:
        amount = Decimal(str(amount)).quantize(Decimal("0.01"))
    except InvalidOperation:
        raise PublicationRefused(f"amount must be in US dollars; got {amount!r}.", code="bad_amount") from None
    if not Decimal("0.01") <= amount <= MTURK_BONUS_MAX:
        raise PublicationRefused(f"A bonus must be from 0.01 to {MTURK_BONUS_MAX} US dollars.", code="bad_amount")
    if not reason.strip():
        raise PublicationRefused("Workers see the reason for a bonus: give one.", code="no_reason")
    if assignment.status not in (MTurkAssignment.Status.SUBMITTED, MTurkAssignment.Status.APPROVED):
        raise PublicationRefused("Only a submitted or approved assignment can get a bonus.", code="bad_assignment")
    reason = reason.strip()[:900]
    publication_id = MTurkHIT.objects.values_list("publication_id", flat=True).get(pk=assignment.hit_id)
    with transaction.atomic(durable=True):
        Publication.objects.select_for_update().filter(pk=publication_id).values_list("pk", flat=True).get()
        earlier = (
            MTurkBonus.objects.filter(
                assignment__hit__publication_id=publication_id, assignment__worker_id=assignment.worker_id,
                amount=amount, reason=reason,
            )
            .exclude(status=MTurkBonus.Status.FAILED)
            .select_related("assignment__worker")
            .order_by("pk")
            .first()
        )
        if earlier is not None:
            raise BonusAlreadyGranted(
                f"This bonus (${earlier.amount} to {earlier.assignment.worker.external_id}, \"{earlier.reason}\") was "
                f"already granted on {earlier.created_at:%Y-%m-%d %H:%M} UTC and is {earlier.get_status_display().lower()}; "
                "it is paid once. To grant another, change the amount or the reason.",
                bonus=earlier,
            )
        bonus = MTurkBonus.objects.create(assignment=assignment, amount=amount, reason=reason, created_by=user)
        Publication.objects.filter(pk=publication_id, closed_at__isnull=False).update(closed_at=None)
    return bonus


# --- Reconciliation -------------------------------------------------------------------------------------


@dataclass
class ReconcileReport:
    publication_id: int
    hits: int = 0
    seen: int = 0
    approved: int = 0
    rejected: int = 0
    already_reviewed: int = 0
    refilled: int = 0
    bonuses_paid: int = 0
    blocks_pushed: int = 0
    extended: int = 0
    expired: int = 0
    abandoned: int = 0
    voided: int = 0
    errors: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        counts = ", ".join(
            f"{name} {getattr(self, name)}"
            for name in ("hits", "seen", "approved", "rejected", "already_reviewed", "refilled", "bonuses_paid",
                         "blocks_pushed", "extended", "expired", "abandoned", "voided")
        )
        return f"publication {self.publication_id}: {counts}" + (f"; errors: {'; '.join(self.errors)}" if self.errors else "")


FAILED = object()  # a reconciliation step that failed permanently this run

_ORDER = {MTurkAssignment.Status.ACCEPTED: 0, MTurkAssignment.Status.ABANDONED: 0, MTurkAssignment.Status.SUBMITTED: 1,
          MTurkAssignment.Status.APPROVED: 2, MTurkAssignment.Status.REJECTED: 2}


def _record_submission(publication: Publication, hit: MTurkHIT, submission, worker: Worker) -> MTurkAssignment:
    """Mirror one remote assignment: create or advance our row, attach the label Chorus holds for it."""
    remote = MTurkAssignment.Status(submission.status)
    with transaction.atomic(durable=True):
        assignment, created = MTurkAssignment.objects.select_for_update().get_or_create(
            assignment_id=submission.submission_id,
            defaults={"hit": hit, "worker": worker, "status": remote, "submitted_at": submission.submitted_at},
        )
        changed = []
        if not created and _ORDER[remote] > _ORDER[assignment.status]:
            assignment.status = remote
            changed.append("status")
        if assignment.submitted_at is None and submission.submitted_at:
            assignment.submitted_at = submission.submitted_at
            changed.append("submitted_at")
        if assignment.label_id is None and assignment.worker_id == worker.pk:
            label_id = Label.objects.filter(
                worker=worker, client_token=mturk_client_token(submission.submission_id)
            ).values_list("pk", flat=True).first()
            if label_id:
                assignment.label_id = label_id
                changed.append("label")
        if remote == MTurkAssignment.Status.REJECTED and assignment.refill == MTurkAssignment.Refill.NONE:
            assignment.refill = MTurkAssignment.Refill.PENDING
            changed.append("refill")
        if changed:
            assignment.save(update_fields=changed)
    if assignment.status == MTurkAssignment.Status.REJECTED:
        _void_label(assignment, "The MTurk assignment was rejected.")
    return assignment


def _void_label(assignment: MTurkAssignment, reason: str) -> bool:
    """Void the assignment's label unless it is void already; returns whether it voided one."""
    if assignment.label_id is None or not Label.objects.counted().filter(pk=assignment.label_id).exists():
        return False
    label_void(label_id=assignment.label_id, reason=reason)
    return True


def _close_lapsed(publication: Publication, listed_since, report: ReconcileReport) -> None:
    """Assignments opened in Chorus that MTurk did not list as submitted, although their time ran out
    before the listing began (plus ``MTURK_SUBMIT_GRACE``): the worker returned the HIT or let it expire.
    MTurk gives the slot back on its HIT by itself; Chorus gives back the label's slot, since a label
    counts only when its assignment is Submitted or Approved."""
    cutoff = listed_since - timedelta(seconds=publication.options["assignment_duration"]) - MTURK_SUBMIT_GRACE
    lapsed = MTurkAssignment.objects.filter(
        hit__publication=publication, status=MTurkAssignment.Status.ACCEPTED, opened_at__lt=cutoff
    )
    for assignment in lapsed:
        if _void_label(assignment, "The MTurk assignment was returned or expired without being submitted."):
            report.voided += 1
        with transaction.atomic(durable=True):
            report.abandoned += MTurkAssignment.objects.filter(
                pk=assignment.pk, status=MTurkAssignment.Status.ACCEPTED
            ).update(status=MTurkAssignment.Status.ABANDONED)


def _record_review(assignment: MTurkAssignment, status: str) -> None:
    fields = {"status": status, "reviewed_at": timezone.now()}
    if status == MTurkAssignment.Status.REJECTED:
        fields["refill"] = MTurkAssignment.Refill.PENDING
    with transaction.atomic(durable=True):
        MTurkAssignment.objects.filter(pk=assignment.pk).exclude(status=status).update(**fields)


def _campaign_wants_labels(publication: Publication) -> bool:
    campaign = Campaign.objects.get(pk=publication.campaign_id)
    return (
        publication.status == Publication.Status.PUBLISHED
        and campaign.status == Campaign.Status.LIVE
        and Slot.objects.filter(campaign=campaign, filled=False).exists()
    )


def _refill(channel, publication: Publication, prepared: PreparedGroup, assignment: MTurkAssignment, report) -> None:
    """Give back the slot a rejected assignment used: one more assignment on the same HIT (token from the
    assignment's row), or — when MTurk forbids it (a HIT created with fewer than 10 assignments cannot
    reach 10) — a new one-assignment HIT of the pool."""
    if not _campaign_wants_labels(publication):
        with transaction.atomic(durable=True):
            MTurkAssignment.objects.filter(pk=assignment.pk).update(refill=MTurkAssignment.Refill.SKIPPED)
        return
    hit = MTurkHIT.objects.get(pk=assignment.hit_id)
    token = f"{publication.token_prefix}-r{assignment.pk}"
    if hit.max_assignments + 1 < MTURK_COMMISSION_THRESHOLD or hit.max_assignments >= MTURK_COMMISSION_THRESHOLD:
        channel.add_slots(unit_id=hit.hit_id, count=1, token=token, expected_total=hit.max_assignments + 1)
        with transaction.atomic(durable=True):
            MTurkHIT.objects.filter(pk=hit.pk).update(max_assignments=F("max_assignments") + 1)
            MTurkAssignment.objects.filter(pk=assignment.pk).update(refill=MTurkAssignment.Refill.DONE)
    else:
        with transaction.atomic(durable=True):
            # The new HIT's row (and so its token) is derived from the assignment: a retry finds it again.
            new_hit, _ = MTurkHIT.objects.get_or_create(
                publication=publication, index=1_000_000 + assignment.pk, defaults={"max_assignments": 1}
            )
        if new_hit.hit_id is None:
            _publish_hit(channel, publication, prepared, new_hit)
        with transaction.atomic(durable=True):
            MTurkAssignment.objects.filter(pk=assignment.pk).update(refill=MTurkAssignment.Refill.DONE)
    report.refilled += 1


def mturk_reconcile(*, publication_id: int) -> ReconcileReport:
    """Bring one MTurk publication and MTurk into agreement. Idempotent; run by the periodic
    ``mturk_reconcile_task`` and the ``mturk_reconcile`` command.

    1. resume publishing if it stalled; push pending blocks;
    2. list every HIT's assignments (all pages): a label counts when its assignment is Submitted or
       Approved; approve Submitted ones whose label Chorus holds, reject those without (and refill);
       void the labels of assignments rejected, or no longer submittable and never listed (returned
       or expired), so their slots go back to the pool. An assignment submitted after its label was
       voided is still approved (the worker did the work) but its label stays void: by then another
       worker may hold the slot;
    3. pay pending bonuses (token per bonus row);
    4. keep HITs alive while the campaign wants labels; expire them once it is full, closed or withdrawn.
    """
    publication = Publication.objects.select_related("campaign").get(pk=publication_id)
    report = ReconcileReport(publication_id)
    if publication.kind != Publication.Kind.MTURK or publication.closed_at is not None:
        return report
    if publication.status in (Publication.Status.PENDING, Publication.Status.PUBLISHING):
        publication_publish(publication_id=publication_id)
        publication.refresh_from_db()
    if not publication.remote_group_id:
        return report
    channel = get_channel(publication.channel)
    prepared = PreparedGroup(publication.remote_group_id, publication.remote_block_id)

    def attempt(what, call, *args, **kwargs):
        """Run one remote step; a permanent error is reported and skipped (the step is retried next
        run), a transient one ends this run (Celery / the next period retries)."""
        try:
            return call(*args, **kwargs)
        except ChannelPermanentError as exc:
            report.errors.append(f"{what}: {exc.message}")
            logger.warning("mturk_reconcile %s: %s: %s", publication_id, what, exc.message)
            return FAILED

    for block_id in MTurkWorkerBlock.objects.filter(
        publication=publication, status=MTurkWorkerBlock.Status.PENDING
    ).values_list("pk", flat=True):
        if attempt(f"block {block_id}", mturk_block_push, block_id=block_id) is True:
            report.blocks_pushed += 1

    listed_since = timezone.now()
    hits = list(MTurkHIT.objects.filter(publication=publication, hit_id__isnull=False).order_by("index"))
    report.hits = len(hits)
    workers: dict[str, Worker] = {}
    for hit in hits:
        for submission in channel.sync_submissions(unit_id=hit.hit_id):
            report.seen += 1
            worker = workers.get(submission.worker_ref)
            if worker is None:
                worker = workers[submission.worker_ref] = worker_get_or_create(
                    channel=publication.worker_channel, external_id=submission.worker_ref
                )
            assignment = _record_submission(publication, hit, submission, worker)
            if submission.status != "submitted" or assignment.status != MTurkAssignment.Status.SUBMITTED:
                continue
            if assignment.label_id is not None and assignment.worker_id == worker.pk:
                result = attempt(f"approve {assignment.assignment_id}", channel.approve,
                                 submission_id=assignment.assignment_id, feedback="Thank you!")
            else:
                result = attempt(f"reject {assignment.assignment_id}", channel.reject,
                                 submission_id=assignment.assignment_id, feedback=REFILL_FEEDBACK)
            if result is FAILED:
                continue
            _record_review(assignment, result.status)
            if result.already:
                report.already_reviewed += 1
            elif result.status == "approved":
                report.approved += 1
            else:
                report.rejected += 1

    _close_lapsed(publication, listed_since, report)

    for assignment in MTurkAssignment.objects.filter(
        hit__publication=publication, refill=MTurkAssignment.Refill.PENDING
    ).select_related("hit"):
        attempt(f"refill after {assignment.assignment_id}", _refill, channel, publication, prepared, assignment, report)

    for bonus in MTurkBonus.objects.filter(
        assignment__hit__publication=publication, status=MTurkBonus.Status.PENDING
    ).select_related("assignment__worker", "assignment__hit__publication"):
        result = attempt(
            f"bonus {bonus.pk}", channel.pay_bonus, worker_ref=bonus.assignment.worker.external_id,
            submission_id=bonus.assignment.assignment_id, amount=bonus.amount,
            reason=f"{bonus.reason} (ref {bonus.token})", token=bonus.token,
        )
        if result is not FAILED:
            with transaction.atomic(durable=True):
                MTurkBonus.objects.filter(pk=bonus.pk).update(status=MTurkBonus.Status.SENT, sent_at=timezone.now())
            report.bonuses_paid += 0 if result.already else 1

    _keep_or_expire(channel, publication, report, attempt)
    return report


def _keep_or_expire(channel, publication: Publication, report: ReconcileReport, attempt) -> None:
    publication.refresh_from_db()
    now = timezone.now()
    wanted = _campaign_wants_labels(publication)
    lifetime = timedelta(seconds=publication.options["lifetime"])
    for hit in MTurkHIT.objects.filter(publication=publication, hit_id__isnull=False):
        if wanted:
            if hit.expires_at is None or hit.expires_at - now < lifetime / 2:
                expires_at = now + lifetime
                if attempt(f"extend {hit.hit_id}", channel.extend, unit_id=hit.hit_id, expires_at=expires_at) is FAILED:
                    continue
                with transaction.atomic(durable=True):
                    MTurkHIT.objects.filter(pk=hit.pk).update(status=MTurkHIT.Status.LIVE, expires_at=expires_at)
                report.extended += 1
        elif hit.status == MTurkHIT.Status.LIVE:
            if attempt(f"expire {hit.hit_id}", channel.withdraw, unit_id=hit.hit_id) is not FAILED:
                with transaction.atomic(durable=True):
                    MTurkHIT.objects.filter(pk=hit.pk).update(status=MTurkHIT.Status.EXPIRED, expires_at=min(now, hit.expires_at or now))
                report.expired += 1
    with transaction.atomic(durable=True):
        fields = {"reconciled_at": now}
        if publication.status == Publication.Status.WITHDRAWING and not MTurkHIT.objects.filter(
            publication=publication, status=MTurkHIT.Status.LIVE
        ).exists():
            fields["status"] = Publication.Status.WITHDRAWN
        settle = timedelta(
            seconds=publication.options["assignment_duration"] + publication.options["auto_approval_delay"]
        ) + MTURK_SUBMIT_GRACE
        if (
            not wanted
            and publication.status in (Publication.Status.PUBLISHED, Publication.Status.WITHDRAWN)
            and not MTurkHIT.objects.filter(publication=publication, status=MTurkHIT.Status.LIVE).exists()
            and not MTurkHIT.objects.filter(publication=publication, expires_at__gt=now - settle).exists()
            and not MTurkAssignment.objects.filter(
                hit__publication=publication,
                status__in=[MTurkAssignment.Status.ACCEPTED, MTurkAssignment.Status.SUBMITTED],
            ).exists()
            and not MTurkBonus.objects.filter(assignment__hit__publication=publication, status=MTurkBonus.Status.PENDING).exists()
        ):
            fields["closed_at"] = now  # nothing can change any more on MTurk's side
        Publication.objects.filter(pk=publication.pk).update(**fields)


def publications_to_reconcile():
    return Publication.objects.filter(kind=Publication.Kind.MTURK, closed_at__isnull=True).exclude(
        status=Publication.Status.FAILED
    ).order_by("pk")


# --- Link-based panels ----------------------------------------------------------------------------------


def panel_session_start(*, panel: PanelConfig, participant_id: str, study_id: str = "", session_id: str = "") -> PanelSession:
    """The participant's session of this panel link, created on first arrival. Refuses (PanelRefused,
    nothing written) a missing or malformed participant id, a study id other than the expected one, and
    a link that is no longer published."""
    publication = panel.publication
    if publication.status != Publication.Status.PUBLISHED:
        raise PanelRefused("This study link is closed.", code="panel_closed")
    if not participant_id:
        raise PanelRefused(
            f"This link must be opened from {publication.channel}: the {panel.participant_param} parameter is missing.",
            code="no_participant",
        )
    for name, value in (("participant id", participant_id), ("study id", study_id), ("session id", session_id)):
        if value and not _PARTICIPANT_ID.fullmatch(value):
            raise PanelRefused(f"The {name} in this link is not valid.", code="bad_participant")
    if panel.expected_study_id and study_id != panel.expected_study_id:
        raise PanelRefused("This link belongs to another study.", code="wrong_study")
    worker = worker_get_or_create(channel=publication.worker_channel, external_id=participant_id)
    try:
        with transaction.atomic(durable=True):
            session, _ = PanelSession.objects.get_or_create(
                panel=panel, worker=worker, session_ref=session_id, defaults={"study_ref": study_id}
            )
    except IntegrityError:  # the same participant's second tab won the race
        session = PanelSession.objects.get(panel=panel, worker=worker, session_ref=session_id)
    return session


def panel_label_counted(*, session: PanelSession) -> PanelSession:
    """One more label in the participant's session (call only for a new label, not a resubmission)."""
    with transaction.atomic(durable=True):
        PanelSession.objects.filter(pk=session.pk).update(n_labels=F("n_labels") + 1)
    session.refresh_from_db()
    return session


def panel_session_complete(*, session: PanelSession) -> PanelSession:
    with transaction.atomic(durable=True):
        PanelSession.objects.filter(pk=session.pk, completed_at__isnull=True).update(completed_at=timezone.now())
    session.refresh_from_db()
    return session


__all__ = [
    "BonusAlreadyGranted", "ChannelError", "CostPreview", "MTURK_BONUS_MAX", "PanelRefused", "PublicationRefused",
    "ReconcileReport", "labels_still_needed", "mturk_assignment_labeled", "mturk_assignment_open", "mturk_block_push",
    "mturk_bonus_grant", "mturk_client_token", "mturk_cost_preview", "mturk_nothing_left", "mturk_options_clean",
    "mturk_plan", "mturk_reconcile", "panel_label_counted", "panel_session_complete", "panel_session_start",
    "publication_create_mturk", "publication_create_panel", "publication_publish", "publication_withdraw",
    "publications_to_reconcile",
]
