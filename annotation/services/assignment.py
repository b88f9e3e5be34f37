"""The assignment engine: leases and labels. Every channel (native, MTurk, panels) goes through here.

The guarantees are carried by the database, not by these Python checks:

* at most k labels per prompt: a prompt has k ``Slot`` rows and a label fills one (``Label.slot`` is
  unique); a lease holds a slot through a conditional UPDATE that only succeeds on a free or expired slot.
  Adaptive k: when a label fills a prompt's last open slot, ``services.adaptive`` decides in the same
  transaction whether it gets one slot more (never beyond k_max), so its slot count is its own k.
  A control prompt has no slots: its leases hold none and its labels fill none (``services.controls``);
* never twice: ``Lease`` is unique on (prompt, worker), and so is ``Label``;
* an acknowledged label is committed before the acknowledgment is returned, and never deleted: a label
  a channel voids afterwards (``label_void``) gives its slot back but keeps its row and its lease.

SQLite runs every transaction as BEGIN IMMEDIATE (settings), so writers are serialised; PostgreSQL
runs at READ COMMITTED with row locks (``select_for_update``) where stated.
"""

import logging
import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import IntegrityError, OperationalError, connection, transaction
from django.db.models import F
from django.utils import timezone

from annotation.models import Campaign, Label, Lease, Participation, Prompt, Slot, Worker
from annotation.rows import Columns, datetime_param, execute, fetch, for_update, table
from annotation.schemas import LabelValueError
from annotation.selectors import (
    BLOCKED,
    BLOCKED_REASON,
    campaign_for_workers,
    native_worker_of,
    refusal_before_slots,
    worker_label_count,
    worker_lease,
)
from annotation.services.adaptive import prompt_stop_decide
from annotation.services.controls import control_lease
from annotation.services.errors import LabelRefused, LeaseRefused, NotLeased
from annotation.services.workers import worker_for_user
from audits.hook import audit_stats_invalidate, label_mark_sql, label_stats_add

logger = logging.getLogger(__name__)

# What a worker hears of a prompt the researchers retired while it was on their screen.
PROMPT_RETIRED_REASON = "The researchers withdrew this prompt from the campaign; ask for a new one."


@dataclass(frozen=True)
class NothingLeft:
    """lease_acquire's answer when it has no prompt for this worker; ``reason`` is shown to them."""

    reason: str
    code: str
    worker_labels: int = 0  # the worker's labels in this campaign, as lease_acquire read them
    campaign: Campaign | None = None  # as lease_acquire read it, under the worker's lock


@dataclass(frozen=True)
class LabelAck:
    label_id: int
    lease_id: int
    prompt_id: int
    created_at: datetime
    worker_labels: int
    duplicate: bool
    campaign_slug: str  # where the worker's next prompt is (the API's submit with next)


# The worker loop's statements are hand-written SQL (``annotation.rows``: the ORM's compiling and object
# building was most of each request's CPU). They read what these selectors define, and
# tests/annotation/test_assignment_sql.py checks on both databases that they agree: a free slot is
# ``selectors.free_slots``'s, a worker's live lease ``selectors.live_leases``'s.
_CAMPAIGN, _PROMPT = Columns(Campaign, "c"), Columns(Prompt, "p")
_LEASE = Columns(Lease, "l")
_SLOT_TAKEN = Columns(Slot, table(Slot))  # in the RETURNING of an UPDATE, which SQLite lets name only its table


def _slot_free(alias: str) -> str:
    return f"NOT {alias}.filled AND ({alias}.lease_expires_at IS NULL OR {alias}.lease_expires_at <= %s)"


def _free_slots_sql(*, campaign: Campaign, worker: Worker, now: datetime) -> tuple[str, list]:
    """``selectors.free_slots`` as SQL: the FROM and WHERE clauses over the slots (``s``), and their
    parameters."""
    free = (
        f"FROM {table(Slot)} s WHERE s.campaign_id = %s AND {_slot_free('s')} "
        f"AND s.prompt_id NOT IN (SELECT prompt_id FROM {table(Lease)} WHERE campaign_id = %s AND worker_id = %s)"
    )
    return free, [campaign.pk, datetime_param(now), campaign.pk, worker.pk]


def _claims(campaign: Campaign, worker: Worker, now: datetime, expires_at: datetime):
    """Leases of open slots to try, as ``(lease id, slot id)``: each is one statement that picks an open
    slot, locks it and inserts the worker's lease of it (``INSERT ... SELECT``); none scans or sorts the
    whole table (the partial indexes ``slot_open_random`` and ``slot_open_fill_first``).

    First from a random point of ``Slot.rand`` (fill-first: among the most-labeled prompts), skipping
    rows other transactions have locked, so concurrent requests spread out instead of queueing. Then
    from the beginning (fill-first: down to less-labeled prompts), still skipping locked rows. Last,
    waiting for a locked row: a submit holds its prompt's open slots until it commits (it raises their
    priority), and that must not make a worker hear "nothing left" while a prompt is open to them.
    """
    free, params = _free_slots_sql(campaign=campaign, worker=worker, now=now)
    order, head, head_params = "s.rand", " AND s.rand >= %s", [random.random()]
    if campaign.policy == Campaign.Policy.FILL_FIRST:
        top = fetch(f"SELECT s.priority {free} ORDER BY s.priority DESC LIMIT 1", params)
        if not top:
            return
        order, head, head_params = "s.priority DESC, s.rand", head + " AND s.priority = %s", [*head_params, top[0][0]]
    lease = [worker.pk, Lease.Status.ACTIVE, datetime_param(now), datetime_param(expires_at)]
    for where, extra, skip_locked in ((head, head_params, True), ("", [], True), ("", [], False)):
        rows = fetch(
            f"INSERT INTO {table(Lease)} (campaign_id, prompt_id, worker_id, slot_id, status, created_at, expires_at) "
            f"SELECT s.campaign_id, s.prompt_id, %s, s.id, %s, %s, %s {free}{where} ORDER BY {order} LIMIT 1"
            + for_update("s", skip_locked=skip_locked)
            + " RETURNING id, slot_id",
            [*lease, *params, *extra],
        )
        if rows:
            yield rows[0]


def _participation_locked(*, worker_id: int, now: datetime, campaign_id: int | None = None, slug: str = ""):
    """The worker's Participation row in the campaign of this id or slug, locked, as ``(n_labels,
    blocked, holds a live lease, the campaign)``; None when the worker has none yet. The campaign is read
    after the lock was granted, so a pause or a grown k that committed while this request waited for it
    is seen."""
    campaign = ("pa.campaign_id", campaign_id) if campaign_id is not None else ("c.slug", slug)
    rows = fetch(
        f"SELECT pa.n_labels, pa.blocked_at, EXISTS (SELECT 1 FROM {table(Lease)} l "
        f"JOIN {table(Prompt)} p ON p.id = l.prompt_id WHERE l.campaign_id = pa.campaign_id "
        "AND l.worker_id = pa.worker_id AND l.status = %s AND l.expires_at > %s AND p.retired_at IS NULL), "
        f"{_CAMPAIGN.sql} FROM {table(Participation)} pa JOIN {table(Campaign)} c ON c.id = pa.campaign_id "
        f"WHERE {campaign[0]} = %s AND pa.worker_id = %s" + for_update("pa"),
        [Lease.Status.ACTIVE, datetime_param(now), campaign[1], worker_id],
    )
    if not rows:
        return None
    n_labels, blocked_at, holds_lease, *campaign = rows[0]
    return n_labels, blocked_at is not None, bool(holds_lease), _CAMPAIGN.load(campaign)


def _live_lease(*, campaign: Campaign, worker: Worker, now: datetime) -> Lease | None:
    """The worker's running lease in the campaign, with its prompt (``selectors.live_lease``)."""
    rows = fetch(
        f"SELECT {_LEASE.sql}, {_PROMPT.sql} FROM {table(Lease)} l JOIN {table(Prompt)} p ON p.id = l.prompt_id "
        "WHERE l.campaign_id = %s AND l.worker_id = %s AND l.status = %s AND l.expires_at > %s "
        "AND p.retired_at IS NULL LIMIT 1",
        [campaign.pk, worker.pk, Lease.Status.ACTIVE, datetime_param(now)],
    )
    if not rows:
        return None
    lease = _LEASE.load(rows[0][: len(_LEASE)])
    lease.prompt, lease.campaign, lease.worker = _PROMPT.load(rows[0][len(_LEASE) :]), campaign, worker
    return lease


def lease_acquire(*, campaign: Campaign, worker: Worker) -> Lease | NothingLeft:
    """Lease the worker one prompt of the campaign, or say why there is none.

    A worker holds at most one live lease per campaign on a prompt still in it: asking again (a reload,
    a double click) returns the same lease; one on a prompt retired since (``prompts_retired_set``) is
    passed over, and runs out unused. Locks the worker's Participation row for the whole transaction, so one
    worker's requests are serialised; candidate slots are locked with SKIP LOCKED, so concurrent
    workers do not wait on each other's candidates. It waits for a slot only when every open one is
    locked, holding no slot itself; that cannot deadlock, because the transactions that wait while
    holding slots (label_submit) lock their Participation row before any slot.

    A control is served instead of a normal prompt when one is due (``services.controls.control_lease``:
    the worker's first ``control_first`` labels, then at the campaign's ``control_rate``).

    Either answer carries ``worker_labels``, the worker's labels in this campaign (an attribute on the
    lease): read here under the lock anyway, so callers showing it need no query of their own.
    """
    with transaction.atomic(durable=True):
        now = timezone.now()
        participation = _participation_locked(campaign_id=campaign.pk, worker_id=worker.pk, now=now)
        return _lease_under_lock(participation or _participation_first(campaign.pk, worker), worker, now)


def lease_acquire_by_slug(*, slug: str, user) -> Lease | NothingLeft:
    """``lease_acquire`` for the signed-in ``user``'s native worker, on a worker-facing URL that names its
    campaign by slug, with ``campaign_for_workers``'s 404 for a campaign ``user`` may not see. The
    campaign is found with the worker's locked Participation row, so a worker who already takes part
    costs no read of it of its own (the API's and the task pages' next task); on their first request,
    or for an unknown slug, ``campaign_for_workers`` decides first, and a 404 creates no worker."""
    worker = native_worker_of(user=user)
    if worker is None:
        campaign = campaign_for_workers(slug=slug, user=user)
        return lease_acquire(campaign=campaign, worker=worker_for_user(user=user))
    with transaction.atomic(durable=True):
        now = timezone.now()
        participation = _participation_locked(slug=slug, worker_id=worker.pk, now=now)
        if participation is None:
            participation = _participation_first(campaign_for_workers(slug=slug, user=user).pk, worker)
        elif participation[3].launched_at is None:
            campaign_for_workers(slug=slug, user=user)  # never launched: only those who manage it, else 404
        return _lease_under_lock(participation, worker, now)


def lease_acquire_after_label(*, campaign_slug: str, worker: Worker) -> Lease | NothingLeft | None:
    """``lease_acquire`` right after the worker's label committed, in its own transaction (the task pages'
    POST, the API's submit with next: a request fewer per label); None when it cannot answer, and the
    caller sends the worker to ask for their next prompt as usual (next, next-task), which will.

    That is when the database refused the claim (``OperationalError``: SQLite busy under load, say;
    logged): the label stands, so the answer must not be an error. Or when the worker has no
    Participation row in the campaign, which only a campaign deleted since their label leaves: the
    usual door answers that with its 404. The worker labeled in the campaign, so its visibility to
    them was decided then (``campaign_for_workers``), and their Participation row finds it by slug."""
    try:
        with transaction.atomic(durable=True):
            now = timezone.now()
            participation = _participation_locked(slug=campaign_slug, worker_id=worker.pk, now=now)
            return None if participation is None else _lease_under_lock(participation, worker, now)
    except OperationalError:
        logger.warning("claim after a saved label failed; the worker is sent to ask again", exc_info=True)
        return None


def _participation_first(campaign_id: int, worker: Worker):
    """``_participation_locked``'s answer on the worker's first request: the row is inserted (a row this
    transaction inserts is as locked as one it selected FOR UPDATE), and the campaign read on its own,
    under that lock."""
    Participation.objects.get_or_create(campaign_id=campaign_id, worker=worker)
    return 0, False, False, Campaign.objects.get(pk=campaign_id)


def _lease_under_lock(participation, worker: Worker, now: datetime) -> Lease | NothingLeft:
    """lease_acquire's decision, under the worker's Participation row lock (``_participation_locked``)."""
    done, blocked, holds_lease, campaign = participation
    existing = _live_lease(campaign=campaign, worker=worker, now=now) if holds_lease else None
    if existing is not None:
        existing.worker_labels = done
        return existing
    refusal = refusal_before_slots(campaign=campaign, done=done, blocked=blocked)
    if refusal is not None:
        return NothingLeft(refusal.reason, refusal.code, worker_labels=done, campaign=campaign)
    expires_at = now + timedelta(seconds=campaign.lease_seconds)
    control = control_lease(campaign=campaign, worker=worker, done=done, now=now, expires_at=expires_at)
    if control is not None:
        control.worker_labels = done
        return control
    for lease_id, slot_id in _claims(campaign, worker, now, expires_at):
        lease = _slot_take(lease_id=lease_id, slot_id=slot_id, worker=worker, now=now, expires_at=expires_at)
        if lease is not None:
            lease.campaign = campaign
            lease.worker_labels = done
            return lease
    reason = "There is nothing left for you to label in this campaign. Thank you!"
    return NothingLeft(reason, "nothing_left", worker_labels=done, campaign=campaign)


def _slot_take(*, lease_id: int, slot_id: int, worker: Worker, now: datetime, expires_at: datetime) -> Lease | None:
    """Give the new lease (``_claims``) its slot if the slot is still free, and return the lease with its
    slot and prompt; None, and the lease row deleted again, when it is not. The conditional UPDATE is the
    capacity check, in the write itself: the claim read the slot free and holds its row lock (PostgreSQL)
    or the database's write lock (SQLite), so it finds the slot as the claim did; the condition keeps
    the guarantee in the write, not in what an earlier statement locked. The lease row comes first
    because the slot points to it; a row deleted in the same transaction is never seen by anyone, and a
    savepoint would cost two statements on every lease, for a path no lease takes in practice."""
    rows = fetch(
        f"UPDATE {table(Slot)} SET lease_id = %s, lease_expires_at = %s WHERE id = %s AND {_slot_free(table(Slot))} "
        f"RETURNING {_SLOT_TAKEN.sql}, {_PROMPT.of_row(f'{table(Slot)}.prompt_id')}",
        [lease_id, datetime_param(expires_at), slot_id, datetime_param(now)],
    )
    if not rows:
        execute(f"DELETE FROM {table(Lease)} WHERE id = %s", [lease_id])
        return None
    slot = _SLOT_TAKEN.load(rows[0][: len(_SLOT_TAKEN)])
    slot.prompt = _PROMPT.load(rows[0][len(_SLOT_TAKEN) :])
    lease = Lease(
        id=lease_id,
        campaign_id=slot.campaign_id,
        prompt=slot.prompt,
        worker=worker,
        slot=slot,
        status=Lease.Status.ACTIVE,
        created_at=now,
        expires_at=expires_at,
    )
    lease._state.adding, lease._state.db = False, connection.alias  # as the ORM leaves a row it inserted
    return lease


def lease_heartbeat(*, lease_id: int, worker: Worker, campaign_slug: str | None = None) -> Lease:
    """Extend a live lease by the campaign's lease length (the labeling page calls this while open).

    A paused or closed campaign extends no lease: the lease keeps its expiry, so its label is
    accepted until then and no later, however long the page stays open. ``campaign_slug``, from a
    URL that names the campaign, must be the lease's campaign's (else NotLeased).
    """
    with transaction.atomic(durable=True):
        lease = _locked_lease(lease_id, worker, campaign_slug)
        now = timezone.now()
        # A retired prompt's lease is not extended: its label would be refused.
        live = lease.status == Lease.Status.ACTIVE and lease.expires_at > now and lease.prompt.retired_at is None
        if live and lease.campaign.status != Campaign.Status.LIVE:
            return lease
        lease.expires_at = now + timedelta(seconds=lease.campaign.lease_seconds)
        # The slot decides, not the clock read above: on PostgreSQL another worker may take the slot
        # of a lease that just expired between that read and this write. A control's lease holds no
        # slot (services.controls): nobody can take its place.
        held = (
            lease.slot_id is None
            or Slot.objects.filter(pk=lease.slot_id, lease=lease).update(lease_expires_at=lease.expires_at) == 1
        )
        if not live or not held:
            raise LeaseRefused("This lease has ended; ask for a new prompt.", code="lease_ended")
        lease.save(update_fields=["expires_at"])
    return lease


def lease_release(*, lease_id: int, worker: Worker, campaign_slug: str | None = None) -> None:
    """The worker gives the prompt back (skip, stop). The slot is free at once; the worker will not
    be offered this prompt again. ``campaign_slug`` as for ``lease_heartbeat``."""
    with transaction.atomic(durable=True):
        lease = _locked_lease(lease_id, worker, campaign_slug)
        if lease.status != Lease.Status.ACTIVE:
            return
        lease.status = Lease.Status.RELEASED
        lease.save(update_fields=["status"])
        Slot.objects.filter(pk=lease.slot_id, lease=lease, filled=False).update(lease=None, lease_expires_at=None)


def worker_leases_end(*, campaign_id: int, worker_id: int) -> int:
    """End the worker's live leases in the campaign as ``lease_release`` does (released, their slots
    free for others): a blocked worker, or a panel participant who returned or timed out. Returns how
    many ended.

    In a transaction of its own, after the block committed: label_submit locks its lease before the
    Participation row, so a transaction that held that row while waiting for a lease could deadlock
    with it. A label submitted meanwhile is refused all the same: label_submit reads the block under
    the row's lock.
    """
    with transaction.atomic(durable=True):
        leases = Lease.objects.select_for_update().filter(
            campaign_id=campaign_id, worker_id=worker_id, status=Lease.Status.ACTIVE
        )
        ended = list(leases.values_list("pk", flat=True))
        Lease.objects.filter(pk__in=ended).update(status=Lease.Status.RELEASED)
        Slot.objects.filter(lease_id__in=ended, filled=False).update(lease=None, lease_expires_at=None)
    return len(ended)


def _locked_lease(
    lease_id: int, worker: Worker, campaign_slug: str | None = None, *, label_token: bool = False
) -> Lease:
    """The worker's lease, locked, with its campaign and prompt (``selectors.worker_lease``)."""
    lease = worker_lease(
        lease_id=lease_id, worker=worker, campaign_slug=campaign_slug, label_token=label_token, lock=True
    )
    if lease is None:
        raise NotLeased("This prompt is not leased to you.")
    return lease


def label_submit(
    *, lease_id: int, worker: Worker, value, client_token: str, campaign_slug: str | None = None
) -> LabelAck:
    """Accept the worker's label for their lease, once.

    ``value`` is the label's raw value, or a function of the lease's prompt and the campaign's schema
    kind that returns it: a task page's form, whose fields depend on the prompt
    (``forms.label_from_post``), is read under the lease's lock without a read of its own.
    ``campaign_slug`` as for ``lease_heartbeat``.

    A resubmission with the same client token returns the first acknowledgment (double clicks,
    retries after a lost response). Everything is checked before anything is written, and any refusal
    rolls the transaction back, so a refused label leaves the prompt as it was. Locks the lease row
    first (a lease that is not the worker's is ``NotLeased``, whatever the token), so concurrent
    submissions of one lease are serialised.
    """
    with transaction.atomic(durable=True):
        lease = _locked_lease(lease_id, worker, campaign_slug, label_token=True)  # first: not yours is NotLeased
        if not client_token or len(client_token) > 64:
            raise LabelRefused("A client token of 1 to 64 characters is required.", code="bad_client_token")
        if lease.label_token is not None:
            if lease.label_token != client_token:
                raise LabelRefused("You have already labeled this prompt.", code="already_labeled")
            return _ack(Label.objects.get(lease=lease), lease.campaign, duplicate=True)

        campaign, prompt = lease.campaign, lease.prompt
        if callable(value):
            value = value(prompt, campaign.schema)
        try:
            raw = campaign.label_schema.clean(value, n_options=len(prompt.options))
        except LabelValueError as exc:
            raise LabelRefused(str(exc), code="bad_value") from exc
        now = timezone.now()
        if lease.status == Lease.Status.RELEASED:
            # Blocking a worker releases the lease they hold: say why, not "you gave it back".
            if Participation.objects.filter(campaign=campaign, worker=worker, blocked_at__isnull=False).exists():
                raise LabelRefused(BLOCKED_REASON, code=BLOCKED)
            raise LabelRefused("You gave this prompt back; ask for a new one.", code="lease_released")
        if lease.expires_at <= now:
            if campaign.status == Campaign.Status.CLOSED:
                raise LabelRefused("This campaign is closed.", code="campaign_closed")
            raise LabelRefused(
                "Your time on this prompt ran out, so it may have gone to another worker. Ask for a new prompt.",
                code="lease_expired",
            )
        # Lock order shared with lease_acquire: the Participation row before any slot. Then the prompt
        # (its counter's UPDATE takes the row lock), so that submits on one prompt queue here: each
        # raises the priority of the others' slots below, and in any other order two of them deadlock
        # on PostgreSQL. Both counters are rolled back with everything else on a refusal.
        # The worker's label count goes up here, and the UPDATE takes the row lock: it is rolled back with
        # the rest if anything below refuses.
        worker_labels, blocked = _participation_count_label(campaign_id=campaign.pk, worker_id=worker.pk)
        if blocked:  # blocked while the prompt was on their screen (services.quality)
            raise LabelRefused(BLOCKED_REASON, code=BLOCKED)
        # Conditional on the prompt not being retired (prompts_retired_set), under the prompt's lock: a
        # retirement that committed first is seen here (PostgreSQL re-reads the row it waited for), one that
        # comes after finds the count raised and refuses. The same query as counting, so the cost stays.
        counted = f"UPDATE {table(Prompt)} SET n_labels = n_labels + 1 WHERE id = %s AND retired_at IS NULL"
        if not execute(counted, [prompt.pk]):
            raise LabelRefused(PROMPT_RETIRED_REASON, code="prompt_retired")
        filled, open_slots = (True, None) if prompt.is_control else _slot_fill(lease=lease)
        if not filled:
            raise LabelRefused("Your lease on this prompt is no longer valid.", code="lease_expired")
        # No savepoint: a clash leaves nothing to continue with, the refusal rolls the whole transaction back.
        try:
            label, marked = _label_insert(lease=lease, value=raw, client_token=client_token, now=now)
        except IntegrityError as exc:
            raise LabelRefused(
                "This client token was already used for another label.", code="bad_client_token"
            ) from exc
        if campaign.k_max is not None and open_slots == 0:  # adaptive k: stop or extend
            prompt_stop_decide(campaign=campaign, prompt_id=prompt.pk, now=now)
        # Marks the label for the live audit's next fold (unless its INSERT did); schedules it on commit.
        label_stats_add(label=label, marked=marked)
        return _ack(label, campaign, worker_labels=worker_labels, duplicate=False)


def _label_insert(*, lease: Lease, value, client_token: str, now: datetime) -> tuple[Label, bool]:
    """Insert the lease's label (``value`` as the schema cleaned it) and mark the lease submitted; return
    the label, as ``Label.objects.create`` would, and whether its statement also marked it for the live
    audit's fold. A client token the worker already used raises IntegrityError.

    On PostgreSQL the three writes are one statement (data-modifying ``WITH``: the label's INSERT, the
    lease's UPDATE and the mark's INSERT, ``label_mark_sql``), so a submit pays one round trip and one
    parse for them; none of them waits on a lock (the lease is already locked by this transaction, the
    others are new rows). SQLite has no data-modifying ``WITH``: the label, then the lease, and the
    caller marks the label."""
    prompt = lease.prompt
    fields = dict(
        campaign_id=lease.campaign_id,
        prompt_id=prompt.pk,
        worker_id=lease.worker_id,
        lease_id=lease.pk,
        slot_id=lease.slot_id,
        is_control=prompt.is_control,
        value=value,
        client_token=client_token,
        leased_at=lease.created_at,
        created_at=now,
        void_reason="",
    )
    adapt = {
        "value": lambda v: Label._meta.get_field("value").get_db_prep_save(v, connection),
        "leased_at": datetime_param,
        "created_at": datetime_param,
    }
    params = [adapt[name](v) if name in adapt else v for name, v in fields.items()]
    insert = f"INSERT INTO {table(Label)} ({', '.join(fields)}) VALUES ({', '.join(['%s'] * len(fields))})"
    submitted = f"UPDATE {table(Lease)} SET status = %s WHERE id = %s"
    marked = connection.vendor == "postgresql"
    if marked:
        ((label_id,),) = fetch(
            f"WITH added AS ({insert} RETURNING id, campaign_id), submitted AS ({submitted}), "
            f"marked AS ({label_mark_sql('added')}) SELECT id FROM added",
            [*params, Lease.Status.SUBMITTED, lease.pk],
        )
    else:
        ((label_id,),) = fetch(f"{insert} RETURNING id", params)
        execute(submitted, [Lease.Status.SUBMITTED, lease.pk])
    lease.status = Lease.Status.SUBMITTED
    label = Label(id=label_id, **fields)
    label._state.adding, label._state.db = False, connection.alias
    return label, marked


def _slot_fill(*, lease: Lease) -> tuple[bool, int]:
    """Fill the lease's slot if it is still the lease's, and raise the priority of its prompt's other open
    slots (fill-first: a prompt with more labels goes first), in one ``UPDATE ... RETURNING`` over the
    prompt's open slots, which it locks: whether the slot was filled, and how many stay open. The
    condition on the slot's lease is re-checked under its row lock (PostgreSQL re-reads a row it waited
    for): a slot that changed hands since the lease expired is not filled."""
    rows = fetch(
        f"UPDATE {table(Slot)} SET filled = (CASE WHEN id = %s AND lease_id = %s THEN TRUE ELSE FALSE END), "
        "priority = priority + (CASE WHEN id = %s AND lease_id = %s THEN 0 ELSE 1 END) "
        "WHERE prompt_id = %s AND NOT filled RETURNING filled",
        [lease.slot_id, lease.pk, lease.slot_id, lease.pk, lease.prompt_id],
    )
    states = [bool(filled) for (filled,) in rows]
    return any(states), states.count(False)


def _participation_count_label(*, campaign_id: int, worker_id: int) -> tuple[int, bool]:
    """Count one label more on the worker's Participation row (locking it) and read it back: the new
    label count and whether the worker is blocked. One ``UPDATE ... RETURNING`` (PostgreSQL, SQLite
    >= 3.35) where a locked read and a write were two; the ORM's update() returns no columns."""
    rows = fetch(
        f"UPDATE {table(Participation)} SET n_labels = n_labels + 1 WHERE campaign_id = %s AND worker_id = %s "
        "RETURNING n_labels, blocked_at",  # not "IS NOT NULL": SQLite 3.40 answers 1 to it here
        [campaign_id, worker_id],
    )
    if not rows:  # a lease is only ever made under the worker's Participation row
        raise Participation.DoesNotExist(f"No participation of worker {worker_id} in campaign {campaign_id}.")
    n_labels, blocked_at = rows[0]
    return n_labels, blocked_at is not None


def label_void(*, label_id: int, reason: str) -> Label:
    """Make an acknowledged label not count, and give its slot back to the pool.

    For channels whose labels count only once the channel confirms them (an MTurk assignment that was
    returned, abandoned or rejected after its label was acknowledged). The row stays, marked void; the
    worker's lease stays too, so the prompt is never shown to them again. Another worker can fill the
    slot. The audit's statistics are rebuilt without the label (``audit_stats_invalidate``).
    Idempotent: voiding a void label changes nothing.
    """
    with transaction.atomic(durable=True):
        label = Label.objects.select_for_update().get(pk=label_id)
        if label.voided_at is not None:
            return label
        label_void_locked(label=label, reason=reason)
        audit_stats_invalidate(campaign_id=label.campaign_id)
    return label


@transaction.atomic(savepoint=False)
def label_void_locked(*, label: Label, reason: str) -> None:
    """``label_void``'s writes, in the caller's transaction: the caller holds the row lock of ``label``
    (a counted label) and invalidates the audit statistics itself, once however many labels it voids
    (``services.quality.worker_act`` re-collecting voids a worker's labels in one transaction)."""
    # label_submit's lock order: the worker's Participation, the prompt, then its slots.
    Participation.objects.filter(campaign_id=label.campaign_id, worker_id=label.worker_id).update(
        n_labels=F("n_labels") - 1
    )
    Prompt.objects.filter(pk=label.prompt_id).update(n_labels=F("n_labels") - 1)
    Slot.objects.filter(prompt_id=label.prompt_id, filled=False).update(priority=F("priority") - 1)
    n_labels = Prompt.objects.values_list("n_labels", flat=True).get(pk=label.prompt_id)
    slot_id = label.slot_id
    label.voided_at, label.void_reason, label.slot = timezone.now(), reason[:200], None
    label.save(update_fields=["voided_at", "void_reason", "slot"])
    Slot.objects.filter(pk=slot_id).update(filled=False, lease=None, lease_expires_at=None, priority=n_labels)


def _ack(label: Label, campaign: Campaign, *, worker_labels: int | None = None, duplicate: bool) -> LabelAck:
    if worker_labels is None:
        worker_labels = worker_label_count(campaign_id=label.campaign_id, worker_id=label.worker_id)
    return LabelAck(
        label_id=label.pk,
        lease_id=label.lease_id,
        prompt_id=label.prompt_id,
        created_at=label.created_at,
        worker_labels=worker_labels,
        duplicate=duplicate,
        campaign_slug=campaign.slug,
    )
