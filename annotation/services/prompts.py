"""Importing prompts: all or nothing."""

import hashlib
import random
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.importing import PromptFileError, PromptRow, parse_prompts
from annotation.models import Campaign, ImportBatch, Label, Lease, Prompt, Slot
from annotation.services.activity import activity_record
from annotation.services.controls import MAX_IDS_AT_ONCE
from annotation.services.errors import CampaignStateError

BULK_BATCH = 2000


def prompts_check(*, campaign: Campaign, data: bytes, filename: str) -> list[PromptRow]:
    """The rows ``prompts_import`` would import now, changing nothing (an upload's preview): raises the
    PromptFileError it would raise."""
    rows = _parsed(campaign=campaign, data=data, filename=filename)
    _refuse_known(campaign=campaign, digest=hashlib.sha256(data).hexdigest(), rows=rows)
    return rows


def prompts_import(*, campaign: Campaign, data: bytes, filename: str, user=None) -> ImportBatch:
    """Validate the whole file, then create its prompts and their k slots in one transaction (a control
    prompt, the file's ``control`` column, gets none: ``services.controls``).

    Raises PromptFileError (nothing imported) for any bad row, for a file already imported into this
    campaign (and not removed since: ``import_remove``), or for ids the campaign already has.
    """
    rows = _parsed(campaign=campaign, data=data, filename=filename)
    digest = hashlib.sha256(data).hexdigest()
    try:
        with transaction.atomic(durable=True):
            _refuse_known(campaign=campaign, digest=digest, rows=rows)
            batch = ImportBatch.objects.create(
                campaign=campaign, filename=filename[:255], sha256=digest, n_prompts=len(rows), created_by=user
            )
            prompts_create(campaign=campaign, batch=batch, rows=rows)
            activity_record(
                campaign=campaign,
                verb="prompts.imported",
                summary=f"Imported {len(rows)} prompts from {batch.filename}",
                detail={"import_id": batch.pk, "filename": batch.filename, "n_prompts": len(rows), "sha256": digest},
                actor=user,
            )
    except IntegrityError as exc:
        # A concurrent import of the same file or ids won the race; this one changed nothing.
        raise PromptFileError([(0, f"a concurrent import conflicts with this file ({exc})")]) from exc
    return batch


@transaction.atomic(savepoint=False)
def prompts_create(*, campaign: Campaign, batch: ImportBatch, rows) -> None:
    """Create ``rows`` (anything with a parsed row's attributes: ``external_id``, ``text``, ``options``,
    ``gold``, ``group``, ``is_control``) as ``batch``'s prompts, each but a control with the campaign's k
    slots. Part of its caller's transaction: an import, or a campaign's copy."""
    prompts = Prompt.objects.bulk_create(
        [
            Prompt(
                campaign=campaign,
                batch=batch,
                external_id=r.external_id,
                text=r.text,
                options=r.options,
                gold=r.gold,
                group=r.group,
                is_control=r.is_control,
            )
            for r in rows
        ],
        batch_size=BULK_BATCH,
    )
    Slot.objects.bulk_create(
        (
            Slot(campaign=campaign, prompt=p, index=i, rand=random.random())
            for p in prompts
            if not p.is_control
            for i in range(campaign.k)
        ),
        batch_size=BULK_BATCH,
    )


def import_remove(*, campaign: Campaign, batch: ImportBatch) -> None:
    """Take back a whole import of a campaign never launched: its prompts, their slots, and the batch
    itself, so that the same file can be imported again (its digest no longer counts).

    Only before launch, because only then can nothing else depend on those prompts; a lease or a label
    on one of them (none should exist in a draft: workers get 404 until launch) is refused all the same,
    since deleting it would delete somebody's work. Raises CampaignStateError (409), changing nothing.
    """
    with transaction.atomic(durable=True):
        campaign = Campaign.objects.select_for_update().get(pk=campaign.pk)
        if campaign.launched_at is not None:
            raise CampaignStateError(
                "This campaign was launched: its prompts may have been shown to workers, so its imports stay.",
                code="launched",
            )
        batch = ImportBatch.objects.select_for_update().get(pk=batch.pk, campaign=campaign)
        prompts = Prompt.objects.filter(batch=batch)
        if Lease.objects.filter(prompt__in=prompts).exists() or Label.objects.filter(prompt__in=prompts).exists():
            raise CampaignStateError(
                f"Prompts of {batch.filename} were shown to somebody already: the import cannot be removed.",
                code="import_in_use",
            )
        prompts.delete()  # and their slots, by cascade
        batch.delete()
        activity_record(
            campaign=campaign,
            verb="prompts.import_removed",
            summary=f"Removed the import of {batch.filename} ({batch.n_prompts} prompts)",
            detail={"filename": batch.filename, "n_prompts": batch.n_prompts, "sha256": batch.sha256},
        )


@dataclass(frozen=True)
class Retirement:
    """What :func:`prompts_retired_set` did: the prompt ids it changed, and those already as asked."""

    changed: list[int]
    unchanged: list[int]


def prompts_retired_set(*, campaign: Campaign, prompt_ids: list[int], retired: bool = True) -> Retirement:
    """Retire the campaign's prompts named by ``prompt_ids`` (their pks), or bring them back
    (``retired=False``), all or none.

    A retired prompt is never served again and is owed no labels: its slots are closed
    (``Slot.filled``: the pool's queries and every count of open slots leave it out with no condition
    of their own), a control is no longer drawn (``control_lease``), a label submitted for a lease
    taken before is refused (``label_submit``), and the campaign's progress counts it out. Bringing it
    back reopens its slots. It stays stored, with its leases, in the prompts list and its page.

    Only a prompt without a counted label can be retired (a void label does not count): retiring must
    not hide somebody's counted work from the audit. Refused with ``ValidationError`` on ``prompts``,
    naming each id at fault and changing nothing: an id that is not one of the campaign's prompts, a
    prompt with counted labels. Refused with ``CampaignStateError`` in a draft (its imports can be
    removed whole instead, ``import_remove``) and in a closed campaign (its prompts stay as they
    are). A prompt already as asked is left alone (idempotent).

    Locks the prompts (FOR NO KEY UPDATE), then closes or opens their slots: ``label_submit`` takes the
    prompt's lock to count a label (its counter's UPDATE, conditional on the prompt not being retired)
    before it fills a slot, so a label and a retirement never both commit on one prompt. The same lock
    order as label_submit's and label_void's (prompt, then slots); no lease is locked here.
    """
    ids = list(dict.fromkeys(prompt_ids))
    if not ids:
        raise ValidationError({"prompts": "Give the ids of the prompts, one or more."})
    if len(ids) > MAX_IDS_AT_ONCE:
        raise ValidationError({"prompts": f"{len(ids)} ids: change at most {MAX_IDS_AT_ONCE} prompts at a time."})
    with transaction.atomic(durable=True):
        campaign = Campaign.objects.get(pk=campaign.pk)
        if campaign.launched_at is None:
            raise CampaignStateError(
                "This campaign was never launched: remove a whole import instead of retiring its prompts.",
                code="not_launched",
            )
        if campaign.status == Campaign.Status.CLOSED:
            raise CampaignStateError("The campaign is closed: its prompts stay as they are.", code="campaign_closed")
        prompts = {
            prompt.pk: prompt
            for prompt in Prompt.objects.select_for_update(no_key=True)
            .filter(campaign=campaign, pk__in=ids)
            .order_by("pk")
        }
        errors = []
        for pk in ids:
            prompt = prompts.get(pk)
            if prompt is None:
                errors.append(f"{pk} is not a prompt of this campaign.")
            elif retired and prompt.retired_at is None and prompt.n_labels:
                errors.append(
                    f"{pk} ({prompt.external_id!r}) has {prompt.n_labels} counted label"
                    f"{'s' if prompt.n_labels != 1 else ''}: only a prompt without labels can be retired."
                )
        if errors:
            raise ValidationError({"prompts": errors})
        changed = [pk for pk in ids if (prompts[pk].retired_at is not None) != retired]
        if changed:
            Prompt.objects.filter(pk__in=changed).update(retired_at=timezone.now() if retired else None)
            # A retired prompt has no counted label, so none of its slots is filled by one: all close, all reopen.
            Slot.objects.filter(prompt_id__in=changed).update(filled=retired)
            activity_record(
                campaign=campaign,
                verb="prompts.retired" if retired else "prompts.unretired",
                summary=f"{len(changed)} prompt{'s' if len(changed) != 1 else ''} "
                f"{'retired' if retired else 'brought back'}",
                detail={"n_prompts": len(changed), "external_ids": [prompts[pk].external_id for pk in changed]},
            )
    return Retirement(changed=changed, unchanged=[pk for pk in ids if pk not in changed])


def _parsed(*, campaign: Campaign, data: bytes, filename: str) -> list[PromptRow]:
    if campaign.status == Campaign.Status.CLOSED:
        raise PromptFileError([(0, "the campaign is closed")])
    return parse_prompts(
        data, filename=filename, schema=campaign.label_schema, max_bytes=settings.CHORUS_MAX_IMPORT_BYTES
    )


def _refuse_known(*, campaign: Campaign, digest: str, rows: list[PromptRow]) -> None:
    """Refuse a file this campaign already has, or any id it already has."""
    previous = ImportBatch.objects.filter(campaign=campaign, sha256=digest).first()
    if previous:
        raise PromptFileError(
            [
                (
                    0,
                    f"this file was already imported as {previous.filename!r} "
                    f"on {previous.created_at:%Y-%m-%d %H:%M} UTC",
                )
            ]
        )
    existing = _existing_ids(campaign, [row.external_id for row in rows])
    if existing:
        raise PromptFileError(
            [
                (row.line, f"id {row.external_id!r} is already in this campaign")
                for row in rows
                if row.external_id in existing
            ]
        )


def _existing_ids(campaign: Campaign, ids: list[str]) -> set[str]:
    found = set()
    for start in range(0, len(ids), 900):  # stay under SQLite's bound-parameter limit
        chunk = ids[start : start + 900]
        found.update(
            Prompt.objects.filter(campaign=campaign, external_id__in=chunk).values_list("external_id", flat=True)
        )
    return found
