"""Acting on a campaign's workers, by a researcher or by a quality rule: flag, exclude from the audit and
include again, block and unblock, exclude and re-collect; and undo an action. Each action writes one
``WorkerAction`` row, the log: who (``by``; empty when a rule acted, ``rule``), when, why (``reason``) and
the numbers that led to it.

* **Exclude** (``Participation.excluded_at``): the worker's labels stay stored and exported (the
  export's ``excluded`` column), and every audit number is recomputed without them: the statistics
  are rebuilt from ``Label.objects.audited()`` (``audit_stats_invalidate``), and the quick run's fold
  leaves the labels they give meanwhile out of them (``stats_fold``). **Include** reverses it.
* **Block** (``Participation.blocked_at``): no further lease on any channel (``lease_acquire``
  refuses, ``selectors.refusal_before_slots``; every channel also keeps them out where it recruits,
  ``channels.services.blocking.worker_block_on_channels``: MTurk's block-list qualification,
  Prolific's exclusion group); their live leases end now (released, their slots free for others).
  **Unblock** reverses it on every channel (``worker_unblock_on_channels``; MTurk keeps its
  qualification where the worker has nothing left there anyway).
* **Re-collect**: exclude, block, and void their counted labels (``label_void``'s writes: rows and
  leases kept, so they never see those prompts again; slots freed, so other workers label them).
  Undoing it includes and unblocks the worker; the voids stay (the slots may be filled again already).
* **Flag**: a note in the log, nothing else changes. **Unflag** marks the worker's standing flags
  undone (a researcher's and the rules' alike; the activity log keeps who and why).
* **Several workers at once** (``workers_act``): one action, one reason, one transaction: every worker
  is acted on, or (one of them refused) none is. Re-collecting stays one worker at a time.

Each service is idempotent: acting when the worker is already so (excluded, blocked, ...) writes
nothing and returns the action that made them so; ``action.logged`` says whether this call wrote it.
Including or unblocking a worker who never was excluded or blocked is refused. Each runs in its own
transaction, which locks like ``label_void``: the worker's labels (re-collect), their Participation row,
then prompts and slots; so a label in flight is either in before the action (and excluded or voided
with the others) or after it (left out of the audit, or refused from a blocked worker). A block ends
the worker's live leases in a second transaction, once the first committed (``worker_leases_end``).

A worker who is not in the campaign, or a missing reason, is refused with a ``ValidationError`` naming
the field, before anything is written.
"""

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from annotation.channels.services.blocking import worker_block_on_channels, worker_unblock_on_channels
from annotation.models import Campaign, Label, Participation, QualityRule, Worker, WorkerAction
from annotation.services.activity import activity_record
from annotation.services.assignment import label_void_locked, worker_leases_end
from annotation.services.errors import ServiceError
from annotation.services.studies import study_check
from audits.hook import audit_stats_invalidate

Kind = WorkerAction.Kind
REASON_MAX = WorkerAction._meta.get_field("reason").max_length
#: Not a kind of log entry: unflagging marks the flags undone, as undoing each of them would.
UNFLAG = "unflag"
#: What ``workers_act`` does to several workers at once: re-collecting voids labels for good, so it
#: stays one worker at a time, after a page that asks first.
BULK_KINDS = (Kind.FLAG, UNFLAG, Kind.EXCLUDE, Kind.INCLUDE, Kind.BLOCK, Kind.UNBLOCK)
#: The kinds an undo reverses; an include or an unblock is reversed by excluding or blocking again.
UNDOABLE = (Kind.FLAG, Kind.EXCLUDE, Kind.BLOCK, Kind.RECOLLECT)
RECOLLECT_UNDO_NOTE = (
    "Undoing a re-collection includes and unblocks the worker again; the labels it voided stay void, since "
    "other workers may have filled their slots already."
)


class WorkerActionRefused(ServiceError):
    """An action that the worker's state makes meaningless (including a worker never excluded, undoing
    an undo). Nothing was written."""

    code = "worker_action_refused"
    status = 409


def worker_act(
    *,
    kind: str,
    campaign: Campaign,
    worker: Worker,
    by=None,
    rule: QualityRule | None = None,
    reason: str,
    numbers: dict | None = None,
) -> WorkerAction:
    """Act on one of the campaign's workers, by ``by`` (a researcher) or ``rule`` (a quality rule);
    ``kind`` is a ``WorkerAction.Kind``:

    - ``flag``: note in the log that the worker looks wrong; nothing else changes. Idempotent per rule
      (or per researcher's flags, ``rule`` None): a flag not undone yet is returned again.
    - ``exclude``: leave the worker's labels out of every number of the campaign's audit, from now on
      and retroactively (the statistics are rebuilt); the labels stay stored and exported.
    - ``include``: take an excluded worker's labels into the audit again (the statistics are rebuilt).
    - ``block``: give the worker no further lease in the campaign, on any channel; end their live
      leases now.
    - ``unblock``: let a blocked worker take leases in the campaign again (on MTurk their block-list
      qualification is lifted, unless they have nothing left there).
    - ``recollect``: exclude and block the worker, and void their counted labels so that other workers
      label those prompts again. The log's ``numbers`` gain ``labels_voided``. The voids cannot be
      undone.
    - ``unflag`` (by a researcher): mark every flag on the worker that is not undone yet undone, and
      return the newest; the activity log keeps the reason. A worker never flagged is refused; one
      whose flags are all undone already gets the newest back, ``logged`` false.

    An unknown kind is refused with a ``ValidationError`` naming ``kind``."""
    if kind not in (*Kind.values, UNFLAG):
        raise ValidationError({"kind": f"Unknown action {kind!r}: one of {', '.join([*Kind.values, UNFLAG])}."})
    if kind == UNFLAG and rule is not None:
        raise ValidationError({"rule": "A rule flags; only a researcher unflags."})
    reason = _reason_check(reason)
    study_check(campaign)
    if rule is not None and rule.campaign_id != campaign.pk:
        raise ValidationError({"rule": f"Rule {rule.pk} is not one of this campaign's rules."})
    with transaction.atomic(durable=True):
        action, blocked = _act_locked(kind, campaign, worker, by=by, rule=rule, reason=reason, numbers=numbers)
    if blocked:
        worker_leases_end(campaign_id=campaign.pk, worker_id=worker.pk)
    return action


def workers_act(*, kind: str, campaign: Campaign, workers: list[Worker], by, reason: str) -> list[WorkerAction]:
    """A researcher's one action (``BULK_KINDS``: flag, unflag, exclude, include, block, unblock) on
    several of the campaign's workers, with one reason, all or nothing: in one transaction, so a worker
    the action is refused for (not in the campaign, never excluded, ...) leaves every other one as they
    were, and the refusal names that worker. Each worker's action is ``worker_act``'s (idempotent,
    logged, in the activity log); returns them in the order of the workers' ids. A blocked worker's
    leases end once the whole commits."""
    if kind not in BULK_KINDS:
        raise ValidationError(
            {"kind": f"{kind!r} is not done to several workers at once: one of {', '.join(BULK_KINDS)}."}
        )
    if not workers:
        raise ValidationError({"workers": "Choose at least one worker."})
    reason = _reason_check(reason)
    study_check(campaign)
    actions, blocked = [], []
    with transaction.atomic(durable=True):
        # One worker after the other in id order: two bulk actions lock the Participation rows in one order.
        for worker in sorted({w.pk: w for w in workers}.values(), key=lambda w: w.pk):
            action, was_blocked = _act_locked(kind, campaign, worker, by=by, rule=None, reason=reason, numbers=None)
            actions.append(action)
            if was_blocked:
                blocked.append(worker.pk)
    for worker_id in blocked:
        worker_leases_end(campaign_id=campaign.pk, worker_id=worker_id)
    return actions


def action_undo(*, action: WorkerAction, by) -> WorkerAction:
    """Undo a flag, an exclusion, a block or a re-collection: mark it undone (``undone_at``,
    ``undone_by``) and, where it still holds, log its inverse by ``by`` (include, unblock, or both for
    a re-collection, whose voids stay: ``RECOLLECT_UNDO_NOTE``). An action a later one superseded (an
    exclusion the researcher lifted and set again) only gets marked. Idempotent: undoing an undone
    action returns it unchanged. Returns the undone action."""
    if action.kind not in UNDOABLE:
        raise WorkerActionRefused(
            f"An {action.get_kind_display().lower()} action cannot be undone: "
            f"{'exclude' if action.kind == Kind.INCLUDE else 'block'} the worker again instead.",
            code="not_undoable",
        )
    undone = f"Undo of “{action.get_kind_display()}” of {action.created_at:%Y-%m-%d %H:%M}: {action.reason}"
    reason = _reason_check(undone[:REASON_MAX])
    with transaction.atomic(durable=True):
        participation = _participation_lock(action.campaign_id, action.worker_id)
        action = WorkerAction.objects.select_for_update().get(pk=action.pk)
        if action.undone_at is not None:
            action.logged = False
            return action
        now = timezone.now()
        numbers = {"undoes": action.pk}
        families = {
            Kind.EXCLUDE: [WorkerAction.EXCLUSION],
            Kind.BLOCK: [WorkerAction.BLOCKING],
            Kind.RECOLLECT: [WorkerAction.EXCLUSION, WorkerAction.BLOCKING],
        }
        for family in families.get(action.kind, []):
            if _latest(action.campaign_id, action.worker_id, family).pk != action.pk:
                continue  # a later action decides this state now
            inverse = Kind.INCLUDE if family is WorkerAction.EXCLUSION else Kind.UNBLOCK
            _apply(inverse, participation, now)
            _log(inverse, participation, by=by, rule=None, reason=reason, numbers=numbers, now=now)
        action.undone_at, action.undone_by = now, by
        action.save(update_fields=["undone_at", "undone_by"])
    action.logged = True
    return action


# ---------------------------------------------------------------------------------------------------


def _act_locked(
    kind: str, campaign: Campaign, worker: Worker, *, by, rule: QualityRule | None, reason: str, numbers: dict | None
) -> tuple[WorkerAction, bool]:
    """One action on one worker inside the caller's transaction, ``reason`` checked already: the
    action (``logged``: whether this call wrote it), and whether it blocked the worker (whose leases the
    caller ends once the transaction committed)."""
    numbers = dict(numbers or {})
    if kind == Kind.RECOLLECT:  # label_void's lock order: the labels before the Participation row
        list(_counted_labels(campaign.pk, worker.pk).select_for_update().order_by("pk").values_list("pk"))
    participation = _participation_lock(campaign.pk, worker.pk)
    if participation is None:
        raise ValidationError({"worker": f"{worker.public_id} is not a worker of this campaign."})
    now = timezone.now()
    if kind == UNFLAG:
        return _unflag(participation, by=by, reason=reason, now=now), False
    holding = _holding(kind, participation, rule)
    if holding is not None:
        holding.logged = False
        return holding, False
    if kind == Kind.RECOLLECT:
        # Labels that arrived while this waited for the Participation row: theirs to void too.
        labels = list(_counted_labels(campaign.pk, worker.pk).select_for_update().order_by("prompt_id", "pk"))
        for label in labels:  # in prompt order, so two re-collections lock prompts in one order
            label_void_locked(label=label, reason=f"Re-collected: {reason}")
        numbers["labels_voided"] = len(labels)
        if labels:
            audit_stats_invalidate(campaign_id=campaign.pk)
    blocked = _apply(kind, participation, now)
    action = _log(kind, participation, by=by, rule=rule, reason=reason, numbers=numbers, now=now)
    action.logged = True
    return action, blocked


def _unflag(participation: Participation, *, by, reason: str, now) -> WorkerAction:
    """Mark the worker's flags that are not undone undone (the caller holds the Participation row);
    the newest flag. Refuses a worker never flagged."""
    flags = list(
        WorkerAction.objects.select_for_update()
        .filter(campaign_id=participation.campaign_id, worker_id=participation.worker_id, kind=Kind.FLAG)
        .order_by("-created_at", "-id")
    )
    if not flags:
        raise WorkerActionRefused(
            f"{participation.worker.public_id} is not flagged: there is nothing to unflag.", code="not_flagged"
        )
    standing = [flag for flag in flags if flag.undone_at is None]
    if not standing:
        flags[0].logged = False
        return flags[0]
    WorkerAction.objects.filter(pk__in=[flag.pk for flag in standing]).update(undone_at=now, undone_by=by)
    for flag in standing:
        flag.undone_at, flag.undone_by = now, by
    activity_record(
        campaign_id=participation.campaign_id,
        verb=f"worker.{UNFLAG}",
        summary=f"Unflagged: worker {participation.worker.external_id}",
        detail={
            "worker": participation.worker.external_id,
            "action_ids": [flag.pk for flag in standing],
            "reason": reason,
        },
        actor=by,
    )
    standing[0].logged = True
    return standing[0]


def _reason_check(reason) -> str:
    text = reason.strip() if isinstance(reason, str) else ""
    if not text:
        raise ValidationError({"reason": "Say why: the log keeps the reason with the action."})
    if len(text) > REASON_MAX:
        raise ValidationError({"reason": f"A reason has at most {REASON_MAX} characters; this one has {len(text)}."})
    return text


def _counted_labels(campaign_id: int, worker_id: int):
    """The worker's counted labels of prompts that are not controls: those whose slots a re-collection frees.
    Control labels stay: they fill no slot, and they are the record the worker was measured on."""
    return Label.objects.counted().filter(campaign_id=campaign_id, worker_id=worker_id, is_control=False)


def _participation_lock(campaign_id: int, worker_id: int) -> Participation | None:
    rows = Participation.objects.select_for_update(of=("self",)).select_related("worker")
    return rows.filter(campaign_id=campaign_id, worker_id=worker_id).first()


def _latest(campaign_id: int, worker_id: int, kinds) -> WorkerAction | None:
    return (
        WorkerAction.objects.filter(campaign_id=campaign_id, worker_id=worker_id, kind__in=kinds)
        .order_by("-created_at", "-id")
        .first()
    )


def _holding(kind: str, participation: Participation, rule: QualityRule | None) -> WorkerAction | None:
    """The logged action that already made the worker what ``kind`` would make them, or None when
    ``kind`` changes something. Refuses an include or unblock of a worker never excluded or blocked."""
    campaign_id, worker_id = participation.campaign_id, participation.worker_id
    if kind == Kind.FLAG:
        return (
            WorkerAction.objects.filter(
                campaign_id=campaign_id, worker_id=worker_id, kind=Kind.FLAG, rule=rule, undone_at__isnull=True
            )
            .order_by("-created_at", "-id")
            .first()
        )
    excluded, blocked = participation.excluded_at is not None, participation.blocked_at is not None
    if kind == Kind.RECOLLECT:
        if not (excluded and blocked) or _counted_labels(campaign_id, worker_id).exists():
            return None
        return _latest(campaign_id, worker_id, (Kind.RECOLLECT,))
    family = WorkerAction.EXCLUSION if kind in (Kind.EXCLUDE, Kind.INCLUDE) else WorkerAction.BLOCKING
    state = excluded if family is WorkerAction.EXCLUSION else blocked
    wanted = kind in (Kind.EXCLUDE, Kind.BLOCK)
    if state != wanted:
        return None
    latest = _latest(campaign_id, worker_id, family)
    if latest is None and not wanted:
        what = "excluded from the audit" if kind == Kind.INCLUDE else "blocked"
        raise WorkerActionRefused(
            f"{participation.worker.public_id} is not {what}: there is nothing to {kind}.",
            code=f"not_{'excluded' if kind == Kind.INCLUDE else 'blocked'}",
        )
    return latest


def _apply(kind: str, participation: Participation, now) -> bool:
    """Change the worker's standing in the campaign (the caller holds its row lock); nothing for a flag.
    Returns whether it blocked the worker (whose leases the caller then ends)."""
    campaign_id = participation.campaign_id
    fields = {}
    if kind in (Kind.EXCLUDE, Kind.RECOLLECT) and participation.excluded_at is None:
        fields["excluded_at"] = now
    if kind == Kind.INCLUDE:
        fields["excluded_at"] = None
    if kind in (Kind.BLOCK, Kind.RECOLLECT) and participation.blocked_at is None:
        fields["blocked_at"] = now
    if kind == Kind.UNBLOCK:
        fields["blocked_at"] = None
    if not fields:
        return False
    Participation.objects.filter(pk=participation.pk).update(**fields)
    for name, value in fields.items():
        setattr(participation, name, value)
    if "excluded_at" in fields:
        audit_stats_invalidate(campaign_id=campaign_id)
    blocked = fields.get("blocked_at") is not None
    if blocked:
        worker_block_on_channels(campaign_id=campaign_id, worker=participation.worker)
    elif kind == Kind.UNBLOCK:
        worker_unblock_on_channels(campaign_id=campaign_id, worker=participation.worker)
    return blocked


def _log(kind: str, participation: Participation, *, by, rule, reason: str, numbers: dict, now) -> WorkerAction:
    action = WorkerAction.objects.create(
        campaign_id=participation.campaign_id,
        worker_id=participation.worker_id,
        kind=kind,
        by=by,
        rule=rule,
        reason=reason,
        numbers=numbers,
        created_at=now,
    )
    # A rule's action is Chorus's, not the signed-in user's whose request happened to trigger it.
    activity_record(
        campaign_id=participation.campaign_id,
        verb=f"worker.{kind}",
        summary=f"{action.get_kind_display()}: worker {participation.worker.external_id}"
        + (f" (rule “{rule}”)" if rule else ""),
        detail={"worker": participation.worker.external_id, "action_id": action.pk, "reason": reason},
        actor=by,
    )
    return action


__all__ = [
    "BULK_KINDS",
    "RECOLLECT_UNDO_NOTE",
    "UNDOABLE",
    "UNFLAG",
    "WorkerActionRefused",
    "action_undo",
    "worker_act",
    "workers_act",
]
