"""Control prompts: prompts whose gold is known, served to workers to measure them (issue 12).

A control has no slots. So it never counts against any prompt's k, its leases hold no slot
(``Lease.slot`` is empty) and an expired one frees nothing, and its labels fill none
(``Label.is_control``). Every worker may label every control once: the Lease unique on (prompt,
worker) is the never-twice guarantee here as everywhere. Control labels are stored and exported like
all labels, never enter the benchmark's audit (``Label.objects.audited()``), and feed the worker's
quality (``annotation.selectors.worker_control_results``).

Serving them is part of ``lease_acquire`` (its one call to :func:`control_lease`), so every channel
(native, panels, MTurk) serves them alike, on the same page and through the same API answer as any
prompt: workers cannot tell a control from another prompt.

* :func:`control_lease`: inside lease_acquire, the control due to this worker, if any.
* :func:`prompts_control_set`: the researcher marks prompts as controls, or unmarks them.
* :func:`control_settings_check`: the campaign's ``control_rate`` and ``control_first``, checked
  once for the web form and the API.
"""

import math
import random
from dataclasses import dataclass
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import transaction

from annotation.models import Campaign, Lease, Prompt, Slot, Worker
from annotation.selectors import free_slots
from annotation.services.activity import activity_record
from annotation.services.errors import CampaignStateError

#: The most prompt ids one marking takes (it names each in one query; SQLite binds at most 999 values).
MAX_IDS_AT_ONCE = 500


def control_settings_check(*, control_rate, control_first) -> None:
    """Raise ``ValidationError`` naming each bad field: ``control_rate`` is empty (no controls at a
    rate) or a share strictly between 0 and 1; ``control_first`` is a whole number, at least 0. The
    web form and the API both ask this, so they refuse the same things in the same words."""
    errors = {}
    if control_rate is not None:
        try:
            rate = float(control_rate)
            valid = not isinstance(control_rate, bool) and math.isfinite(rate) and 0 < rate < 1
        except (TypeError, ValueError):
            valid = False
        if not valid:
            errors["control_rate"] = (
                f"The control rate is a share between 0 and 1, both excluded (0.1: about one prompt in ten is a "
                f"control); leave it empty for none. Got {control_rate!r}."
            )
    if isinstance(control_first, bool) or not isinstance(control_first, int) or control_first < 0:
        errors["control_first"] = (
            f"The number of controls served first is a whole number, 0 or more; got {control_first!r}."
        )
    if errors:
        raise ValidationError(errors)


def _control_due(campaign: Campaign, done: int) -> bool:
    """Whether the worker's next prompt should be a control: one of their first ``control_first``
    (a qualification), else with probability ``control_rate``."""
    if done < campaign.control_first:
        return True
    return campaign.control_rate is not None and random.random() < campaign.control_rate


def control_lease(
    *, campaign: Campaign, worker: Worker, done: int, now: datetime, expires_at: datetime
) -> Lease | None:
    """Lease the worker a control, if one is due and left for them; else None (serve a normal prompt).

    Call it inside lease_acquire's transaction, holding the worker's Participation row (``done`` is
    their label count, read under it). A control is due for each of a worker's first
    ``control_first`` labels and, after those, with probability ``control_rate``; it is drawn at
    random among the campaign's controls this worker was never leased. None when no control is due,
    none is left for the worker, or the campaign has no other prompt left for them (controls measure
    workers for the labels they will give).

    Campaigns without controls pay nothing: no query. Otherwise two: whether normal work is left,
    and the draw, which locks the drawn prompt (FOR NO KEY UPDATE, SKIP LOCKED) and reads it again:
    :func:`prompts_control_set` takes the same lock before it unmarks a control, so a prompt stops
    being a control either before the draw (which then does not see it) or after this lease exists
    (and then it refuses). A control locked by another worker's request is passed over.
    """
    if campaign.control_rate is None and campaign.control_first == 0:
        return None
    if not _control_due(campaign, done) or not free_slots(campaign=campaign, now=now, worker=worker).exists():
        return None
    seen = Lease.objects.filter(campaign=campaign, worker=worker).values("prompt_id")
    prompt = (
        Prompt.objects.filter(campaign=campaign, is_control=True, retired_at__isnull=True)
        .exclude(pk__in=seen)
        .order_by("?")
        .select_for_update(no_key=True, skip_locked=True)
        .first()
    )
    if prompt is None:
        return None
    return Lease.objects.create(
        campaign=campaign, prompt=prompt, worker=worker, slot=None, created_at=now, expires_at=expires_at
    )


@dataclass(frozen=True)
class ControlMarking:
    """What :func:`prompts_control_set` did: the ids it changed, and those that already were as asked."""

    changed: list[str]
    unchanged: list[str]


def prompts_control_set(*, campaign: Campaign, external_ids: list[str], control: bool = True) -> ControlMarking:
    """Make the campaign's prompts named by ``external_ids`` controls (``control``) or normal prompts
    again, all or none.

    Refused with ``ValidationError`` on ``external_ids``, naming each id at fault and changing
    nothing, when an id is not one of the campaign's prompts, when a prompt to become a control has
    no gold (a control is scored against it), or when a prompt to change was ever leased to a worker:
    its leases (and any label) were made for what it was, so it stays so. Marking is for prompts no
    worker has seen yet: mark controls in the import file (its ``control`` column) or before launch.
    Refused with ``CampaignStateError`` in a closed campaign. A prompt already as asked is left alone
    (idempotent).

    A new control's slots are deleted; a prompt that stops being a control gets the campaign's k
    slots. No label changes, so the audit's statistics need no rebuild.

    Locks each prompt (FOR NO KEY UPDATE), then its slots, then checks for leases: lease_acquire's
    draw of a control takes the prompt's lock (:func:`control_lease`) and its lease of a slot takes
    the slot's, so a lease made concurrently is either seen here or never made.
    """
    ids = list(dict.fromkeys(str(external_id).strip() for external_id in external_ids if str(external_id).strip()))
    if not ids:
        raise ValidationError({"external_ids": "Give the ids of the prompts to change, one or more."})
    if len(ids) > MAX_IDS_AT_ONCE:
        raise ValidationError({"external_ids": f"{len(ids)} ids: change at most {MAX_IDS_AT_ONCE} prompts at a time."})
    with transaction.atomic(durable=True):
        campaign = Campaign.objects.get(pk=campaign.pk)
        if campaign.status == Campaign.Status.CLOSED:
            raise CampaignStateError("The campaign is closed: its prompts stay as they are.", code="campaign_closed")
        prompts = {
            prompt.external_id: prompt
            for prompt in Prompt.objects.select_for_update(no_key=True)
            .filter(campaign=campaign, external_id__in=ids)
            .order_by("pk")
        }
        to_change = [prompts[i] for i in ids if i in prompts and prompts[i].is_control != control]
        # Waits for any lease_acquire holding one of these slots: its lease is then committed, and seen below.
        list(Slot.objects.select_for_update().filter(prompt__in=to_change).order_by("pk").values_list("pk", flat=True))
        leased = set(Lease.objects.filter(prompt__in=to_change).values_list("prompt__external_id", flat=True))
        errors = []
        for external_id in ids:
            prompt = prompts.get(external_id)
            if prompt is None:
                errors.append(f"{external_id!r} is not a prompt of this campaign.")
            elif prompt.is_control == control:
                continue
            elif control and prompt.gold is None:
                errors.append(f"{external_id!r} has no gold: a control needs a gold label to be scored against.")
            elif external_id in leased:
                errors.append(
                    f"{external_id!r} was already shown to a worker: only a prompt no worker has seen can "
                    f"{'become' if control else 'stop being'} a control."
                )
        if errors:
            raise ValidationError({"external_ids": errors})
        changed = [prompt.pk for prompt in to_change]
        Prompt.objects.filter(pk__in=changed).update(is_control=control)
        if control:
            Slot.objects.filter(prompt__in=changed).delete()
        else:
            # A retired prompt's slots are closed (Slot.filled), those it gets now too.
            Slot.objects.bulk_create(
                Slot(
                    campaign=campaign,
                    prompt_id=prompt.pk,
                    index=index,
                    rand=random.random(),
                    filled=prompt.retired_at is not None,
                )
                for prompt in to_change
                for index in range(campaign.k)
            )
        if changed:
            activity_record(
                campaign=campaign,
                verb="controls.marked" if control else "controls.unmarked",
                summary=f"{len(changed)} prompts {'made controls' if control else 'made normal prompts again'}",
                detail={"external_ids": [prompt.external_id for prompt in to_change]},
            )
    changed_ids = {prompt.external_id for prompt in to_change}
    return ControlMarking(
        changed=[i for i in ids if i in changed_ids], unchanged=[i for i in ids if i not in changed_ids]
    )
