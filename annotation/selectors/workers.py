"""Reads on a campaign's workers: their labels, the actions taken on them, the leases running now, a
worker's progress on the task page and their answers to control prompts and gold."""

import functools
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Count, Exists, Max, OuterRef, QuerySet
from django.utils import timezone
from rest_framework.authtoken.models import Token

from annotation.models import Campaign, Label, Lease, Participation, Prompt, Slot, Worker, WorkerAction
from annotation.models.workers import public_worker_id_parse
from annotation.rows import Columns, fetch, table
from annotation.selectors.assignment import labels_left_under_cap


def worker_label_count(*, campaign_id: int, worker_id: int) -> int:
    # Hand-written (annotation.rows): every task page reads it.
    rows = fetch(
        f"SELECT n_labels FROM {table(Participation)} WHERE campaign_id = %s AND worker_id = %s",
        [campaign_id, worker_id],
    )
    return rows[0][0] if rows else 0


def campaign_workers(*, campaign: Campaign) -> QuerySet[Participation]:
    """The campaign's workers as their Participation rows (with the worker), most labels first: each with
    its labels, ``excluded_at`` and ``blocked_at``, and ``flagged``: a flag on them that is not undone."""
    flags = WorkerAction.objects.filter(
        campaign=campaign, worker=OuterRef("worker"), kind=WorkerAction.Kind.FLAG, undone_at__isnull=True
    )
    return (
        Participation.objects.filter(campaign=campaign)
        .select_related("worker__user")
        .annotate(flagged=Exists(flags))
        .order_by("-n_labels", "worker_id")
    )


def campaign_worker_by_pk(*, campaign: Campaign, worker_id: int) -> Participation | None:
    """The Participation row (with the worker, and ``flagged`` as :func:`campaign_workers` has it) of the
    worker with this id if they take part in the campaign; None otherwise, like an unknown id (one past
    what the database can store included: a URL's <int:...> takes any digits)."""
    if not 0 < worker_id <= connection.ops.integer_field_range("BigIntegerField")[1]:
        return None
    return campaign_workers(campaign=campaign).filter(worker_id=worker_id).first()


def worker_labels(*, campaign: Campaign, worker: Worker) -> QuerySet[Label]:
    """The worker's labels in the campaign, newest first, void ones included (``voided_at``): what they
    did, as a researcher judging them reads it. Each with its prompt (``prompt.text``, ``prompt.gold``)."""
    return (
        Label.objects.filter(campaign=campaign, worker=worker)
        .select_related("prompt")
        .only(
            "id",
            "value",
            "is_control",
            "leased_at",
            "created_at",
            "voided_at",
            "void_reason",
            "prompt__external_id",
            "prompt__text",
            "prompt__gold",
            "prompt__is_control",
        )
        .order_by("-created_at", "-id")
    )


def label_correct(campaign: Campaign, label: Label) -> bool | None:
    """Whether the label agrees with its prompt's gold, as control answers are judged
    (:func:`worker_control_results`: through the binarization map, free text by accepted answers);
    None when the prompt has no gold."""
    if label.prompt.gold is None:
        return None
    return _control_answer_correct(campaign.label_schema, label.value, label.prompt.gold)


def campaign_worker(*, campaign: Campaign, public_id: str) -> Worker | None:
    """The worker with this public id (``channel:external id``) if they take part in the campaign; None
    otherwise, whether or not a worker with that id exists elsewhere (so the answer leaks nothing)."""
    channel, external_id = public_worker_id_parse(public_id)
    return Worker.objects.filter(channel=channel, external_id=external_id, participations__campaign=campaign).first()


def worker_actions_of(*, campaign: Campaign) -> QuerySet[WorkerAction]:
    """The campaign's log of actions on workers, newest first, each with its worker, rule and people, and
    whether a later action on the same worker changed their exclusion (``later_exclusion``) or their
    blocking (``later_blocking``): see :func:`action_undoable`."""

    def later(kinds) -> Exists:
        return Exists(
            WorkerAction.objects.filter(
                campaign_id=OuterRef("campaign_id"),
                worker_id=OuterRef("worker_id"),
                kind__in=kinds,
                pk__gt=OuterRef("pk"),
            )
        )

    return (
        WorkerAction.objects.filter(campaign=campaign)
        .select_related("worker__user", "by", "undone_by", "rule")
        .annotate(later_exclusion=later(WorkerAction.EXCLUSION), later_blocking=later(WorkerAction.BLOCKING))
        .order_by("-created_at", "-id")
    )


def action_undoable(action: WorkerAction) -> bool:
    """Whether undoing the action would change something now: a flag, exclusion, block or re-collection
    not undone yet, whose standing no later action decided (``worker_actions_of``'s annotations; an
    action without them is taken as the newest). Undoing a superseded one only marks it."""
    if action.undone_at is not None or action.kind in (WorkerAction.Kind.INCLUDE, WorkerAction.Kind.UNBLOCK):
        return False
    later_exclusion = getattr(action, "later_exclusion", False)
    later_blocking = getattr(action, "later_blocking", False)
    return {
        WorkerAction.Kind.EXCLUDE: not later_exclusion,
        WorkerAction.Kind.BLOCK: not later_blocking,
        WorkerAction.Kind.RECOLLECT: not (later_exclusion and later_blocking),
    }.get(action.kind, True)


@dataclass(frozen=True)
class LiveLeases:
    count: int  # prompts on workers' screens now, whose labels would still be accepted
    until: datetime | None  # when the last of these leases runs out, if none is extended


def campaign_live_leases(*, campaign: Campaign) -> LiveLeases:
    """The leases running now, from the slots they hold (the partial index over unfilled slots). A control
    prompt's lease holds no slot and is left out: its label measures a worker, not the benchmark."""
    held = Slot.objects.filter(campaign=campaign, filled=False, lease_expires_at__gt=timezone.now())
    totals = held.aggregate(count=Count("id"), until=Max("lease_expires_at"))
    return LiveLeases(count=totals["count"], until=totals["until"])


# The task page's "about N left for you" stops counting at this many prompts, so it reads at most k (or
# k_max) times as many slots: it costs the same for 10k prompts as for 1M.
PROMPTS_LEFT_COUNTED = 500


@dataclass(frozen=True)
class WorkerProgress:
    """A worker's progress in a campaign, as the task page shows it."""

    labeled: int
    left: int  # prompts still open to them, the one on their screen included
    more: bool  # the count stopped at PROMPTS_LEFT_COUNTED: there may be more


def worker_progress(
    *, campaign: Campaign, worker: Worker, quota_left: int | None = None, labeled: int | None = None
) -> WorkerProgress:
    """For a worker on a task page: the labels they gave in this campaign, and about how many prompts are
    left for them: the one on their screen, and those with an unfilled slot that they were never leased
    (and, while there are such, the control prompts they were never leased, in a campaign that serves
    controls); at most what the campaign's cap per worker and ``quota_left`` (a channel's own quota)
    still allow.

    "About": a prompt counts while other workers hold its open slots, and they take and give back
    slots at any moment. Two queries: the worker's label count, and a count over at most
    ``PROMPTS_LEFT_COUNTED`` × k (or k_max) unfilled slots (their partial index); one, when the caller passes
    ``labeled`` (the ``worker_labels`` that lease_acquire reads under its lock and lease_for_worker with the
    lease); one more, a bounded count of the unseen controls, in a campaign that serves them.
    """
    if labeled is None:
        labeled = worker_label_count(campaign_id=campaign.pk, worker_id=worker.pk)
    limits = [] if quota_left is None else [quota_left]
    cap_left = labels_left_under_cap(campaign=campaign, done=labeled)
    if cap_left is not None:
        limits.append(cap_left)
    limit = max(min(limits), 0) if limits else None
    bound = PROMPTS_LEFT_COUNTED if limit is None else min(limit, PROMPTS_LEFT_COUNTED)
    # A prompt has at most k unfilled slots (adaptive k: k_max), so the first n × k of them hold at least
    # n prompts, or they are all there are.
    most = campaign.k if campaign.k_max is None else campaign.k_max
    # _unfilled_slots, hand-written (annotation.rows): every task page counts it.
    others = fetch(
        f"SELECT COUNT(DISTINCT prompt_id) FROM (SELECT s.prompt_id FROM {table(Slot)} s "
        "WHERE s.campaign_id = %s AND NOT s.filled AND s.prompt_id NOT IN "
        f"(SELECT prompt_id FROM {table(Lease)} WHERE campaign_id = %s AND worker_id = %s) LIMIT %s) sample",
        [campaign.pk, campaign.pk, worker.pk, max(bound - 1, 0) * most],
    )[0][0]
    if others and (campaign.control_rate is not None or campaign.control_first):
        # A control is a prompt like any other to the worker (services.controls), served while other work
        # is left: counting the controls still unseen keeps "left" going down by one on every page.
        unseen = Prompt.objects.filter(campaign=campaign, is_control=True, retired_at__isnull=True).exclude(
            pk__in=Lease.objects.filter(campaign=campaign, worker=worker).values("prompt_id")
        )
        others += unseen[: max(bound - 1 - others, 0)].count()
    left = min(1 + others, bound)
    more = left == PROMPTS_LEFT_COUNTED and (limit is None or limit > PROMPTS_LEFT_COUNTED)
    return WorkerProgress(labeled=labeled, left=left, more=more)


# --- control prompts ----------------------------------------------------------------------------------


def worker_control_results(*, campaign: Campaign) -> dict[int, tuple[int, int]]:
    """Each worker's answers to the campaign's control prompts: ``{worker id: (n_controls, n_correct)}``.

    Over counted control labels (a void one is left out, as everywhere), excluded workers' included:
    exclusion leaves a worker out of the benchmark's audit, not out of being measured. A worker with
    no counted control label is absent.

    An answer is correct when its **scaled value** equals the gold's, through the campaign's
    binarization map (the scale the audit itself compares on): for a binary schema that is the raw
    value itself; on a 1–4 scale mapped 1, 2 → 0 and 3, 4 → 1, a 3 is right where the gold is 4.
    Where the map leaves the gold's raw value out (a middle point), only that raw value is right.
    A per-option prompt is one control, correct when every option is. A free-text answer is correct
    when it is one of the gold's accepted answers, compared case- and whitespace-insensitively
    (``LabelSchema.answer_correct``). One query over the campaign's
    control labels.
    """
    schema = campaign.label_schema
    results: dict[int, tuple[int, int]] = {}
    rows = (
        Label.objects.counted()
        .filter(campaign=campaign, is_control=True)
        .values_list("worker_id", "value", "prompt__gold")
    )
    for worker_id, value, gold in rows.iterator(chunk_size=2000):
        n, correct = results.get(worker_id, (0, 0))
        results[worker_id] = (n + 1, correct + _control_answer_correct(schema, value, gold))
    return results


def _control_answer_correct(schema, value, gold) -> bool:
    if schema.kind == Campaign.Schema.FREE_TEXT:  # one of the accepted answers, case and spacing aside
        return schema.answer_correct(value, gold)
    if isinstance(value, list):
        return (
            isinstance(gold, list)
            and len(gold) == len(value)
            and all(_control_answer_correct(schema, one, gold_one) for one, gold_one in zip(value, gold))
        )
    expected = None if gold is None or isinstance(gold, list) else schema.binarize(gold)
    return value == gold if expected is None else schema.binarize(value) == expected


@functools.cache
def _identity_columns() -> tuple[Columns, Columns, Columns]:
    # On first use, not at import: the user model is known once the apps are loaded.
    return Columns(Token, "t"), Columns(get_user_model(), "u"), Columns(Worker, "w")


def _user_with_worker(row, users: Columns, workers: Columns):
    """The user of a row's last columns (``users`` then ``workers``: a LEFT JOIN on their native worker),
    with that worker cached on it, or None, so that ``services.worker_for_user`` reads no more."""
    user = users.load(row[-len(users) - len(workers) : -len(workers)])
    worker = workers.load(row[-len(workers) :]) if row[-len(workers)] is not None else None
    type(user).worker.related.set_cached_value(user, worker)
    if worker is not None:
        worker.user = user
    return user


def native_worker_of(*, user) -> Worker | None:
    """A signed-in user's native worker identity, or None when they have none yet (nothing is created:
    ``services.worker_for_user`` creates it). No query when the request read the user with it
    (``_user_with_worker``: the API's token and the session's user)."""
    if "worker" in user._state.fields_cache:
        worker = user._state.fields_cache["worker"]
        if worker is None or (worker.channel == Worker.NATIVE and worker.external_id == str(user.pk)):
            return worker
    return Worker.objects.filter(channel=Worker.NATIVE, external_id=str(user.pk)).first()


def _native_worker_join() -> str:
    return f"LEFT JOIN {table(Worker)} w ON w.user_id = u.id AND w.channel = %s"


def user_with_worker(*, user_id):
    """The user of this id with their native worker, or None: the session's user on every page
    (``annotation.throttling``). Hand-written (``annotation.rows``): every worker page reads it."""
    _, users, workers = _identity_columns()
    rows = fetch(
        f"SELECT {users.sql}, {workers.sql} FROM {table(get_user_model())} u {_native_worker_join()} WHERE u.id = %s",
        [Worker.NATIVE, user_id],
    )
    return _user_with_worker(rows[0], users, workers) if rows else None


def token_with_user(*, key: str) -> Token | None:
    """The API token of this key with its user and the user's native worker, or None: every API request
    signed with a token reads it (``annotation.api.authentication``)."""
    tokens, users, workers = _identity_columns()
    rows = fetch(
        f"SELECT {tokens.sql}, {users.sql}, {workers.sql} FROM {table(Token)} t "
        f"JOIN {table(get_user_model())} u ON u.id = t.user_id {_native_worker_join()} WHERE t.key = %s",
        [Worker.NATIVE, key],
    )
    if not rows:
        return None
    token = tokens.load(rows[0][: len(tokens)])
    token.user = _user_with_worker(rows[0], users, workers)
    return token
