"""Imported studies: a campaign made from a labels file collected elsewhere (WordSim-353, TG-CSR, a
lab's own past study), closed for labeling and read-only, audited like a collected campaign.

The file is the stable labels format of ``noise-audit.md`` ("Files and field names"), read by the same
reader as the offline ``audit`` command (``audits.engine.label_files.read_table``), so that the two
see the same rows; prompt texts come from a ``text`` column or from a second file (``prompt``,
``text``, optional ``gold`` and ``group``). Unlike the offline command, which counts a value outside
the schema as invalid, an import refuses it: a study stored in Chorus holds only values its schema
accepts, as a collected one does.
"""

import hashlib
import math
import os
import random
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, timedelta

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from annotation.importing import MAX_ERRORS_SHOWN, PromptFileError
from annotation.models import Campaign, ImportBatch, Label, Lease, Participation, Prompt, Slot, Worker
from annotation.models.campaigns import MAX_K
from annotation.schemas import LabelSchema, LabelValueError, parse_int, shown
from annotation.services.activity import activity_record
from annotation.services.campaigns import _campaign_new
from annotation.services.errors import CampaignStateError
from annotation.services.prompts import BULK_BATCH
from audits.engine.label_files import LEFT_OUT_FIELDS, OPTIONAL_FIELDS, LabelFileError, read_table
from audits.hook import stats_rebuild

#: Workers of an imported study are known by the study's own ids, on this channel, prefixed with the
#: campaign's slug: the same id in two studies names two people as far as Chorus can tell.
STUDY_CHANNEL = "study"
STUDY_REFUSAL = "An imported study is read-only: its labels were collected elsewhere."
_TRUE = {"1", "true", "yes"}


@dataclass(frozen=True)
class StudyImport:
    campaign: Campaign
    n_prompts: int
    n_workers: int
    n_labels: int
    n_empty: int  # rows of the file without a value, which are no label


def study_check(campaign: Campaign) -> None:
    """Refuse a change to what an imported study collected (its prompts, labels, workers' standing,
    controls, rules, life cycle): raised by the services that would make one."""
    if campaign.imported_at is not None:
        raise CampaignStateError(STUDY_REFUSAL, code="imported_study")


@contextmanager
def uploaded_path(upload):
    """A path to an uploaded file (None for None), for ``study_import``, which reads files by path like
    the offline command: the upload's own temporary file, or a copy of one held in memory, named with
    the upload's extension (which tells CSV, TSV and JSONL apart)."""
    if upload is None:
        yield None
        return
    if hasattr(upload, "temporary_file_path"):
        yield upload.temporary_file_path()
        return
    suffix = os.path.splitext(upload.name)[1][:10]
    with tempfile.NamedTemporaryFile(suffix=suffix) as fh:
        for chunk in upload.chunks():
            fh.write(chunk)
        fh.flush()
        yield fh.name


def study_import(
    *, owner, title: str, labels_path: str, labels_name: str, prompts_path: str | None = None, **fields
) -> StudyImport:
    """A closed, read-only campaign of ``owner`` holding the labels file at ``labels_path`` (its name as
    uploaded: ``labels_name``), with the schema and settings ``fields`` (those of ``campaign_create``).

    Every row is checked first: the fields, each value and gold against the schema
    (``LabelSchema.clean``, as a worker's label would be), one label per worker and prompt, one gold
    and group per prompt, known prompt ids when a prompts file is given. Any error raises
    PromptFileError naming the lines, and nothing is stored. Then everything is written in one
    transaction, as ``label_submit`` would have stored each label (a submitted lease in one of the
    prompt's k slots, k being the most labels any prompt has), and the audit's statistics are built
    from the labels (``audits.hook.stats_rebuild``, a transaction of its own).
    """
    campaign = _campaign_new(owner=owner, title=title, fields=fields)
    schema = LabelSchema.for_campaign(campaign)
    rows = _labels_read(labels_path, schema)
    texts = _prompts_read(prompts_path, schema, rows) if prompts_path else {}
    prompts = _prompts_of(rows, texts, schema)
    most = max(len(p.labels) for p in prompts.values() if p.labels)
    if most > MAX_K:
        raise PromptFileError([(0, f"a prompt has {most} labels; a campaign has at most {MAX_K} per prompt")])
    campaign.k = most
    campaign.full_clean()
    with open(labels_path, "rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    with transaction.atomic(durable=True):
        now = timezone.now()
        campaign.status, campaign.launched_at = Campaign.Status.CLOSED, None
        campaign.closed_at = campaign.imported_at = now
        campaign.save()
        batch = ImportBatch.objects.create(
            campaign=campaign, filename=labels_name[:255], sha256=digest, n_prompts=len(prompts), created_by=owner
        )
        stored = Prompt.objects.bulk_create(
            [
                Prompt(
                    campaign=campaign,
                    batch=batch,
                    external_id=p.external_id,
                    text=p.text,
                    gold=p.gold,
                    group=p.group,
                    n_labels=len(p.labels),
                )
                for p in prompts.values()
            ],
            batch_size=BULK_BATCH,
        )
        workers = _workers_create(campaign, rows)
        _labels_place(campaign, stored, list(prompts.values()), rows, workers, now)
        activity_record(
            campaign=campaign,
            verb="study.imported",
            summary=f"Imported a study of {len(rows.value)} labels from {batch.filename}",
            detail={
                "filename": batch.filename,
                "n_prompts": len(prompts),
                "n_labels": len(rows.value),
                "sha256": digest,
            },
            actor=owner,
        )
    # The campaign is closed: no label will ever fold itself into the statistics, so build them now.
    stats_rebuild(campaign_id=campaign.pk)
    return StudyImport(campaign, len(prompts), len(workers), len(rows.value), rows.n_empty)


# The import's steps, in the order study_import takes them.


@dataclass
class _Rows:
    """The labels file's rows, checked: one entry per label, in file order."""

    worker: list
    prompt: list
    value: list
    created_at: list
    line: list
    extra: dict = None  # the per-prompt columns (gold, group, text) as given, one entry per label
    n_empty: int = 0  # rows without a value: no label


@dataclass
class _Prompt:
    external_id: str
    text: str = ""
    gold: object = None
    group: str = ""
    labels: list = None  # row numbers into _Rows


def _file_error(exc: LabelFileError) -> PromptFileError:
    column = f"{exc.column}: " if exc.column is not None else ""
    return PromptFileError([(exc.line or 0, f"{column}{exc.reason}")])


def _raw(value):
    """A value as a labels file spells it, typed: CSV gives text, JSONL gives JSON values."""
    if not isinstance(value, str):
        return value
    if (number := parse_int(value)) is not None:
        return number
    try:
        number = float(value)
    except ValueError:
        return value
    return number if math.isfinite(number) else value


def _checked(errors: list, line: int, what: str, check, value):
    try:
        return check(_raw(value))
    except LabelValueError as exc:
        errors.append((line, f"{what}: {exc}"))
        return None


def _labels_read(path: str, schema: LabelSchema) -> _Rows:
    try:
        columns, info = read_table(
            path,
            required=("worker", "prompt", "value"),
            optional=(*OPTIONAL_FIELDS, *LEFT_OUT_FIELDS, "text"),
            id_fields=("worker", "prompt"),
        )
    except LabelFileError as exc:
        raise _file_error(exc) from None
    n = len(columns["value"])
    # A Chorus export marks the labels its audit leaves out (a control's, an excluded worker's): left
    # out here as the offline command leaves them out, so the study audits as its source did.
    kept = [
        i
        for i in range(n)
        if not any(str(columns[f][i]).strip().lower() in _TRUE for f in LEFT_OUT_FIELDS if f in columns)
    ]
    line_of = info["line_of"]
    errors, seen = [], {}
    rows = _Rows([], [], [], [], [], {})
    for i in kept:
        if columns["value"][i] is None or str(columns["value"][i]).strip() == "":
            rows.n_empty += 1  # no label: the worker left this prompt unanswered, as the offline command reads it
            continue
        line = line_of(i) if len(errors) < MAX_ERRORS_SHOWN else 0
        worker, prompt = str(columns["worker"][i]).strip(), str(columns["prompt"][i]).strip()
        first = seen.setdefault((worker, prompt), line)
        if first != line:
            errors.append((line, f"worker {shown(worker)} labels prompt {shown(prompt)} again (first on line {first})"))
        value = _checked(errors, line, "value", schema.clean, columns["value"][i])
        created = None
        if "created_at" in columns and str(columns["created_at"][i] or "").strip():
            created = parse_datetime(str(columns["created_at"][i]).strip())
            if created is None:
                errors.append((line, f"created_at: {shown(columns['created_at'][i])} is not an ISO 8601 time"))
            elif timezone.is_naive(created):
                created = created.replace(tzinfo=UTC)
        rows.worker.append(worker)
        rows.prompt.append(prompt)
        rows.value.append(value)
        rows.created_at.append(created)
        rows.line.append(line)
    if not rows.value:
        errors.append((0, "the file has no labels"))
    if errors:
        raise PromptFileError(errors)
    given = [i for i in kept if columns["value"][i] is not None and str(columns["value"][i]).strip() != ""]
    rows.extra = {c: [columns[c][i] for i in given] for c in ("gold", "group", "text") if c in columns}
    return rows


def _prompts_read(path: str, schema: LabelSchema, rows: _Rows) -> dict:
    """The prompts file's rows by prompt id: ``{id: (text, gold, group)}``; every labeled prompt must be
    in it."""
    try:
        columns, info = read_table(path, required=("prompt", "text"), optional=("gold", "group"), id_fields=("prompt",))
    except LabelFileError as exc:
        raise _file_error(exc) from None
    errors, found = [], {}
    for i, prompt in enumerate(columns["prompt"]):
        prompt = str(prompt).strip()
        if prompt in found:
            errors.append((info["line_of"](i), f"prompt {shown(prompt)} is given twice"))
            continue
        gold = columns["gold"][i] if "gold" in columns else None
        if gold is not None and str(gold).strip() != "":
            gold = _checked(errors, info["line_of"](i), "gold", schema.clean_gold, gold)
        else:
            gold = None
        group = str(columns["group"][i]).strip() if "group" in columns else ""
        found[prompt] = (str(columns["text"][i]).strip(), gold, group)
    unknown = sorted(set(rows.prompt) - set(found))
    if unknown:
        errors.append((0, f"{len(unknown)} labeled prompts are not in the prompts file: {', '.join(unknown[:10])}"))
    if errors:
        raise PromptFileError(errors)
    return found


def _prompts_of(rows: _Rows, texts: dict, schema: LabelSchema) -> dict[str, _Prompt]:
    """The study's prompts in the order they first appear (the prompts file's first, when given), with
    their labels' row numbers; one gold and one group per prompt, as in the offline command."""
    prompts = {p: _Prompt(p, text, gold, group, []) for p, (text, gold, group) in texts.items()}
    errors = []
    for i, prompt in enumerate(rows.prompt):
        p = prompts.setdefault(prompt, _Prompt(prompt, prompt, labels=[]))
        p.labels.append(i)
        for column in ("gold", "group", "text"):
            given = rows.extra.get(column)
            if given is None or given[i] is None or str(given[i]).strip() == "":
                continue
            value = str(given[i]).strip()
            if column == "gold":
                value = _checked(errors, rows.line[i], "gold", schema.clean_gold, given[i])
            current = {"gold": p.gold, "group": p.group, "text": p.text if p.text != prompt else ""}[column]
            if current in (None, ""):
                setattr(p, column, value)
            elif current != value:
                errors.append(
                    (rows.line[i], f"{column}: prompt {shown(prompt)} has {shown(current)} on an earlier line")
                )
    if errors:
        raise PromptFileError(errors)
    return prompts


def _workers_create(campaign: Campaign, rows: _Rows) -> dict[str, int]:
    """The study's workers (``<slug>/<their id>``) and their participations; returns their pks by id."""
    counts: dict[str, int] = {}
    for worker in rows.worker:
        counts[worker] = counts.get(worker, 0) + 1
    created = Worker.objects.bulk_create(
        [Worker(channel=STUDY_CHANNEL, external_id=f"{campaign.slug}/{w}") for w in counts], batch_size=BULK_BATCH
    )
    workers = {w: stored.pk for w, stored in zip(counts, created)}
    Participation.objects.bulk_create(
        [Participation(campaign=campaign, worker_id=workers[w], n_labels=n) for w, n in counts.items()],
        batch_size=BULK_BATCH,
    )
    return workers


def _labels_place(campaign, stored: list[Prompt], prompts: list[_Prompt], rows: _Rows, workers, now) -> None:
    """Each label as its worker's submitted lease and counted label in one of the prompt's k slots, as
    ``label_submit`` would have stored it; a prompt with fewer labels keeps its other slots free (it got
    fewer labels than k, as the study says). Prompt by prompt, in chunks, so that memory stays flat."""
    k = campaign.k
    for start in range(0, len(stored), BULK_BATCH):
        chunk = list(zip(stored[start : start + BULK_BATCH], prompts[start : start + BULK_BATCH]))
        slots = Slot.objects.bulk_create(
            [
                Slot(
                    campaign=campaign,
                    prompt=s,
                    index=i,
                    rand=random.random(),
                    priority=len(p.labels),
                    filled=i < len(p.labels),
                )
                for s, p in chunk
                for i in range(k)
            ]
        )
        placed = [
            (s, slots[number * k + n], row) for number, (s, p) in enumerate(chunk) for n, row in enumerate(p.labels)
        ]
        leases = Lease.objects.bulk_create(
            [
                Lease(
                    campaign=campaign,
                    prompt=prompt,
                    worker_id=workers[rows.worker[row]],
                    slot=slot,
                    status=Lease.Status.SUBMITTED,
                    created_at=rows.created_at[row] or now,
                    expires_at=(rows.created_at[row] or now) + timedelta(seconds=campaign.lease_seconds),
                )
                for prompt, slot, row in placed
            ]
        )
        for (_, slot, _), lease in zip(placed, leases):
            slot.lease = lease
        Slot.objects.bulk_update([slot for _, slot, _ in placed], ["lease"], batch_size=BULK_BATCH)
        Label.objects.bulk_create(
            [
                Label(
                    campaign=campaign,
                    prompt=prompt,
                    worker_id=lease.worker_id,
                    lease=lease,
                    slot=slot,
                    value=rows.value[row],  # as label_submit stores it: LabelSchema.clean's canonical form
                    client_token=f"study:{campaign.pk}:{lease.pk}",
                    leased_at=lease.created_at,
                    created_at=lease.created_at,
                )
                for (prompt, slot, row), lease in zip(placed, leases)
            ],
            batch_size=BULK_BATCH,
        )
