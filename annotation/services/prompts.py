"""Importing prompts: all or nothing."""

import hashlib
import random

from django.conf import settings
from django.db import IntegrityError, transaction

from annotation.importing import PromptFileError, parse_prompts
from annotation.models import Campaign, ImportBatch, Prompt, Slot
from annotation.services.activity import activity_record

BULK_BATCH = 2000


def prompts_import(*, campaign: Campaign, data: bytes, filename: str, user=None) -> ImportBatch:
    """Validate the whole file, then create its prompts and their k slots in one transaction (a control
    prompt, the file's ``control`` column, gets none: ``services.controls``).

    Raises PromptFileError (nothing imported) for any bad row, for a file already imported into this
    campaign, or for ids the campaign already has.
    """
    if campaign.status == Campaign.Status.CLOSED:
        raise PromptFileError([(0, "the campaign is closed")])
    rows = parse_prompts(
        data, filename=filename, schema=campaign.label_schema, max_bytes=settings.CHORUS_MAX_IMPORT_BYTES
    )
    digest = hashlib.sha256(data).hexdigest()
    try:
        with transaction.atomic(durable=True):
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
            batch = ImportBatch.objects.create(
                campaign=campaign, filename=filename[:255], sha256=digest, n_prompts=len(rows), created_by=user
            )
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


def _existing_ids(campaign: Campaign, ids: list[str]) -> set[str]:
    found = set()
    for start in range(0, len(ids), 900):  # stay under SQLite's bound-parameter limit
        chunk = ids[start : start + 900]
        found.update(
            Prompt.objects.filter(campaign=campaign, external_id__in=chunk).values_list("external_id", flat=True)
        )
    return found
