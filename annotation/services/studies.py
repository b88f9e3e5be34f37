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
from array import array
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, timedelta

import numpy as np
from django.db import transaction
from django.db.models import OuterRef, Subquery
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


def study_import_uploaded(*, owner, labels, prompts=None, **fields) -> StudyImport:
    """``study_import`` of uploaded files (the page's and the API's): ``labels`` and ``prompts`` are
    uploaded files (Django's ``UploadedFile``), ``prompts`` optional."""
    with uploaded_path(labels) as labels_path, uploaded_path(prompts) as prompts_path:
        return study_import(
            owner=owner, labels_path=labels_path, labels_name=labels.name, prompts_path=prompts_path, **fields
        )


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
    most = int(rows.per_prompt.max())
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
        for p in prompts:
            p.campaign, p.batch = campaign, batch
        stored = Prompt.objects.bulk_create(prompts, batch_size=BULK_BATCH)
        workers = _workers_create(campaign, rows)
        _labels_place(campaign, stored, rows, workers, now)
        activity_record(
            campaign=campaign,
            verb="study.imported",
            summary=f"Imported a study of {rows.n_labels} labels from {batch.filename}",
            detail={"filename": batch.filename, "n_prompts": len(prompts), "n_labels": rows.n_labels, "sha256": digest},
            actor=owner,
        )
    # The campaign is closed and its labels were never submitted (no mark for the quick run's fold):
    # build the statistics from them now.
    stats_rebuild(campaign_id=campaign.pk)
    return StudyImport(campaign, len(prompts), len(rows.worker_ids), rows.n_labels, rows.n_empty)


# The import's steps, in the order study_import takes them.


@dataclass
class _Rows:
    """The labels file's labels, checked, as arrays over the labels in file order: a 1M-label file costs
    a few arrays of numbers more than the offline command's columns, not an object per label."""

    columns: dict  # the file's columns (read_table), every row
    line_of: object  # a row's line in the file, for messages (slow on a large CSV: errors only)
    source: np.ndarray  # label → its row in ``columns``
    worker: np.ndarray  # label → its worker, an index into worker_ids
    prompt: np.ndarray  # label → its prompt, an index into prompt_ids
    value: list  # label → its value, in LabelSchema.clean's canonical form (as label_submit stores it)
    created_at: list | None  # label → its time, or None (the import's time); None without the column
    worker_ids: list
    prompt_ids: list
    n_empty: int  # rows without a value: no label (the worker left the prompt unanswered)

    @property
    def n_labels(self) -> int:
        return len(self.value)

    @property
    def per_prompt(self) -> np.ndarray:
        return np.bincount(self.prompt, minlength=len(self.prompt_ids))


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


def _blank(value) -> bool:
    return value is None or (isinstance(value, str) and value.strip() == "")


class _Errors(list):
    """(line, message) pairs; past the number a message shows, only counted (a line can be slow to find)."""

    def add(self, line_of, row: int, message: str) -> None:
        self.append((line_of(row) if len(self) < MAX_ERRORS_SHOWN else 0, message))


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
    line_of, values = info["line_of"], columns["value"]
    # A Chorus export marks the labels its audit leaves out (a control's, an excluded worker's): left
    # out here as the offline command leaves them out, so the study audits as its source did.
    left_out = [columns[f] for f in LEFT_OUT_FIELDS if f in columns]
    times = columns.get("created_at")
    errors = _Errors()
    workers, prompts, seen = {}, {}, set()
    # Typed arrays, not lists: 8 bytes a label each instead of an int object and a pointer.
    source, worker_of, prompt_of = array("q"), array("q"), array("q")
    cleaned, created = [], [] if times is not None else None
    n_empty = 0
    for i in range(len(values)):
        if any(str(c[i]).strip().lower() in _TRUE for c in left_out):
            continue
        if _blank(values[i]):
            n_empty += 1
            continue
        w = workers.setdefault(str(columns["worker"][i]).strip(), len(workers))
        p = prompts.setdefault(str(columns["prompt"][i]).strip(), len(prompts))
        if (p << 32 | w) in seen:
            errors.add(line_of, i, _again(columns, line_of, source, worker_of, prompt_of, w, p, i))
        seen.add(p << 32 | w)
        try:
            cleaned.append(schema.clean(_raw(values[i])))
        except LabelValueError as exc:
            errors.add(line_of, i, f"value: {exc}")
            cleaned.append(None)
        if times is not None:
            when = None if _blank(times[i]) else parse_datetime(str(times[i]).strip())
            if when is None and not _blank(times[i]):
                errors.add(line_of, i, f"created_at: {shown(times[i])} is not an ISO 8601 time")
            elif when is not None and timezone.is_naive(when):
                when = when.replace(tzinfo=UTC)
            created.append(when)
        source.append(i)
        worker_of.append(w)
        prompt_of.append(p)
    del seen
    if not cleaned:
        errors.append((0, "the file has no labels"))
    if errors:
        raise PromptFileError(errors)
    return _Rows(
        columns=columns,
        line_of=line_of,
        source=np.frombuffer(source, dtype=np.int64),
        worker=np.frombuffer(worker_of, dtype=np.int64),
        prompt=np.frombuffer(prompt_of, dtype=np.int64),
        value=cleaned,
        created_at=created,
        worker_ids=list(workers),
        prompt_ids=list(prompts),
        n_empty=n_empty,
    )


def _again(columns, line_of, source, worker_of, prompt_of, w: int, p: int, row: int) -> str:
    """The message for a second label of one worker on one prompt, naming the first one's line (found
    by a scan: an error's cost, not every label's)."""
    first = next(source[j] for j in range(len(source)) if worker_of[j] == w and prompt_of[j] == p)
    who, what = shown(columns["worker"][row]), shown(columns["prompt"][row])
    return f"worker {who} labels prompt {what} again (first on line {line_of(first)})"


def _prompts_read(path: str, schema: LabelSchema, rows: _Rows) -> dict:
    """The prompts file's rows by prompt id: ``{id: (text, gold, group)}``; every labeled prompt must be
    in it."""
    try:
        columns, info = read_table(path, required=("prompt", "text"), optional=("gold", "group"), id_fields=("prompt",))
    except LabelFileError as exc:
        raise _file_error(exc) from None
    errors, found = _Errors(), {}
    for i, prompt in enumerate(columns["prompt"]):
        prompt = str(prompt).strip()
        if prompt in found:
            errors.add(info["line_of"], i, f"prompt {shown(prompt)} is given twice")
            continue
        gold = None
        if "gold" in columns and not _blank(columns["gold"][i]):
            try:
                gold = schema.clean_gold(_raw(columns["gold"][i]))
            except LabelValueError as exc:
                errors.add(info["line_of"], i, f"gold: {exc}")
        group = str(columns["group"][i]).strip() if "group" in columns else ""
        found[prompt] = (str(columns["text"][i]).strip(), gold, group)
    unknown = sorted(set(rows.prompt_ids) - set(found))
    if unknown:
        errors.append((0, f"{len(unknown)} labeled prompts are not in the prompts file: {', '.join(unknown[:10])}"))
    if errors:
        raise PromptFileError(errors)
    return found


def _prompts_of(rows: _Rows, texts: dict, schema: LabelSchema) -> list[Prompt]:
    """The study's prompts (unsaved), labeled ones in the order they first appear in the labels file, then
    the prompts file's others. Text, gold and group come from the prompts file, else from the labels
    file's columns, where a prompt's rows must agree (one gold per prompt, as in the offline command);
    a prompt without a text shows its id."""
    n = len(rows.prompt_ids)
    given = {c: [None] * n for c in ("text", "gold", "group")}
    errors = _Errors()
    for column in given:
        if column not in rows.columns:
            continue
        found, first = given[column], {}
        for row, p in zip(rows.source.tolist(), rows.prompt.tolist(), strict=True):
            raw = rows.columns[column][row]
            if _blank(raw):
                continue
            if column == "gold":
                try:
                    value = schema.clean_gold(_raw(raw))
                except LabelValueError as exc:
                    errors.add(rows.line_of, row, f"gold: {exc}")
                    continue
            else:
                value = str(raw).strip()
            if found[p] is None:
                found[p], first[p] = value, row
            elif found[p] != value:
                where = rows.line_of(first[p]) if len(errors) < MAX_ERRORS_SHOWN else "an earlier line"
                errors.add(
                    rows.line_of,
                    row,
                    f"{column}: prompt {shown(rows.prompt_ids[p])} has {shown(found[p])} on line {where}",
                )
    if errors:
        raise PromptFileError(errors)
    counts = rows.per_prompt.tolist()
    prompts = []
    for p, external_id in enumerate(rows.prompt_ids):
        text, gold, group = texts.get(external_id, (None, None, None))
        prompts.append(
            Prompt(
                external_id=external_id,
                text=text or given["text"][p] or external_id,
                gold=gold if gold is not None else given["gold"][p],
                group=group or given["group"][p] or "",
                n_labels=counts[p],
            )
        )
    labeled = set(rows.prompt_ids)
    prompts += [
        Prompt(external_id=i, text=text, gold=gold, group=group, n_labels=0)
        for i, (text, gold, group) in texts.items()
        if i not in labeled
    ]
    return prompts


def _workers_create(campaign: Campaign, rows: _Rows) -> list[int]:
    """The study's workers (``<slug>/<their id>``) and their participations; returns their pks, in
    ``rows.worker_ids``' order."""
    created = Worker.objects.bulk_create(
        [Worker(channel=STUDY_CHANNEL, external_id=f"{campaign.slug}/{w}") for w in rows.worker_ids],
        batch_size=BULK_BATCH,
    )
    counts = np.bincount(rows.worker, minlength=len(rows.worker_ids)).tolist()
    Participation.objects.bulk_create(
        [Participation(campaign=campaign, worker=w, n_labels=n) for w, n in zip(created, counts, strict=True)],
        batch_size=BULK_BATCH,
    )
    return [w.pk for w in created]


def _labels_place(campaign, stored: list[Prompt], rows: _Rows, workers: list[int], now) -> None:
    """Each label as its worker's submitted lease and counted label in one of the prompt's k slots, as
    ``label_submit`` would have stored it; a prompt with fewer labels keeps its other slots free (it got
    fewer labels than k, as the study says). Prompts in chunks, so that memory stays flat."""
    k = campaign.k
    order = np.argsort(rows.prompt, kind="stable")  # the labels prompt by prompt, in file order within one
    ends = np.cumsum(rows.per_prompt).tolist()
    lease_time = timedelta(seconds=campaign.lease_seconds)
    step = max(1, BULK_BATCH // k)  # prompts at a time: about BULK_BATCH slots, leases and labels in memory
    for start in range(0, len(rows.prompt_ids), step):
        chunk = range(start, min(start + step, len(rows.prompt_ids)))
        slots = Slot.objects.bulk_create(
            [
                Slot(campaign=campaign, prompt=stored[p], index=i, rand=random.random(), priority=n, filled=i < n)
                for p in chunk
                for n in [stored[p].n_labels]
                for i in range(k)
            ]
        )
        placed = []  # (prompt, slot, label)
        for number, p in enumerate(chunk):
            first = ends[p] - stored[p].n_labels
            placed += [(stored[p], slots[number * k + n], int(label)) for n, label in enumerate(order[first : ends[p]])]
        when = [(rows.created_at[label] if rows.created_at else None) or now for _, _, label in placed]
        leases = Lease.objects.bulk_create(
            [
                Lease(
                    campaign=campaign,
                    prompt=prompt,
                    worker_id=workers[rows.worker[label]],
                    slot=slot,
                    status=Lease.Status.SUBMITTED,
                    created_at=at,
                    expires_at=at + lease_time,
                )
                for (prompt, slot, label), at in zip(placed, when, strict=True)
            ]
        )
        Label.objects.bulk_create(
            [
                Label(
                    campaign=campaign,
                    prompt=prompt,
                    worker_id=lease.worker_id,
                    lease=lease,
                    slot=slot,
                    value=rows.value[label],
                    client_token=f"study:{campaign.pk}:{lease.pk}",
                    leased_at=lease.created_at,
                    created_at=lease.created_at,
                )
                for (prompt, slot, label), lease in zip(placed, leases, strict=True)
            ],
            batch_size=BULK_BATCH,
        )
    # A filled slot names the lease that filled it, as label_submit leaves it: one statement for all.
    holder = Lease.objects.filter(slot=OuterRef("pk")).values("pk")[:1]
    Slot.objects.filter(campaign=campaign, filled=True).update(lease=Subquery(holder))
