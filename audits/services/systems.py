"""Systems (a model's predictions for a campaign's prompts) uploaded to be scored against the crowd
(issue 13): ``system_upload`` reads a CSV or JSONL file, ``system_save`` takes a mapping (the API's
JSON body), ``system_delete`` removes one.

All or nothing: every row is checked first, every problem collected (named by its line, or by its
prompt id for a mapping), and one ``ValidationError`` lists them (``MAX_ERRORS_SHOWN`` of them and
a count); nothing is written then. The file formats:

- CSV with a header naming the prompt id column (``prompt_id`` or ``id``) and the prediction column
  (``prediction``, ``value`` or ``score``);
- JSONL, one ``{"prompt_id": ..., "prediction": ...}`` object per line (``id`` / ``value`` /
  ``score`` accepted as well).

A prediction is a label value of the campaign's schema (binary: 1/0, true/false, or the campaign's
positive and negative texts) or, on a rating campaign, any number (a graded score, ranked by
Spearman's ρ). On a per-option campaign a prompt id names one option's unit, ``<id>#<n>``.
"""

from __future__ import annotations

import csv
import io
import json
import math

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from annotation.importing import (
    MAX_ERRORS_SHOWN,
    PromptFileError,
    decode_upload,
    detect_format,
    file_lines,
    first_seen,
    json_value,
    too_large_message,
)
from annotation.models import Campaign
from annotation.schemas import parse_int, shown
from audits.engine.protoqa_scoring import ProtoQAFormatError, parse_answers
from audits.models import System
from audits.selectors.full import unit_name
from audits.selectors.systems import SCORED_SCHEMAS

ID_FIELDS = ("prompt_id", "id")
VALUE_FIELDS = ("prediction", "value", "score")
#: a name the URL ``systems/leaderboard/`` takes for itself
RESERVED_NAMES = ("leaderboard",)
NAME_MAX = System._meta.get_field("name").max_length


def _refuse(field: str, errors: list[tuple[str, str]]) -> ValidationError:
    """One ValidationError under ``field``: a summary, then up to MAX_ERRORS_SHOWN "where: problem" lines."""
    lines = [f"{where}: {problem}" if where else problem for where, problem in errors[:MAX_ERRORS_SHOWN]]
    more = len(errors) - MAX_ERRORS_SHOWN
    count = f"{len(errors)} problem{'s' if len(errors) != 1 else ''}"
    return ValidationError(
        {field: [f"Nothing was uploaded ({count}).", *lines, *([f"… and {more} more."] if more > 0 else [])]}
    )


def _clean_name(campaign: Campaign, name: str, replace: bool) -> str:
    if campaign.schema not in SCORED_SCHEMAS and campaign.schema != Campaign.Schema.FREE_TEXT:
        raise ValidationError(
            {"file": [f"Systems of {campaign.get_schema_display().lower()} campaigns are not scored here."]}
        )
    name = (name or "").strip()
    problem = None
    if not name:
        problem = "Give the system a name."
    elif len(name) > NAME_MAX:
        problem = f"A name has at most {NAME_MAX} characters."
    elif "/" in name or name.lower() in RESERVED_NAMES:
        problem = f"{shown(name)} cannot be a system's name (no “/”, not {', '.join(RESERVED_NAMES)})."
    elif not replace and System.objects.filter(campaign=campaign, name=name).exists():
        problem = f"A system named {shown(name)} exists already: tick “replace” to replace its predictions."
    if problem:
        raise ValidationError({"name": [problem]})
    return name


# --------------------------------------------------------------------------------------- reading a file
def _pick(header, fields) -> str | None:
    return next((f for f in fields if f in header), None)


def _csv_rows(text: str):
    """``(line, prompt id, prediction, problem)`` per record; a header problem raises PromptFileError."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    start = 1
    try:
        header = [h.strip() for h in next(reader, [])]
        id_col, value_col = _pick(header, ID_FIELDS), _pick(header, VALUE_FIELDS)
        missing = [what for col, what in ((id_col, ID_FIELDS), (value_col, VALUE_FIELDS)) if col is None]
        if missing:
            wanted = " and ".join("a column " + " or ".join(repr(f) for f in fields) for fields in missing)
            raise PromptFileError([(1, f"the header needs {wanted}")])
        i, j = header.index(id_col), header.index(value_col)
        start = reader.line_num + 1
        for cells in reader:
            if any(c.strip() for c in cells):
                if len(cells) > len(header):
                    yield start, None, None, "more cells than header columns"
                else:
                    cells += [""] * (len(header) - len(cells))
                    yield start, cells[i].strip(), cells[j].strip(), None
            start = reader.line_num + 1
    except csv.Error as exc:
        raise PromptFileError([(start, f"broken CSV: {exc}")]) from exc


def _jsonl_rows(text: str):
    for number, raw in file_lines(text):
        if not raw.strip():
            continue
        try:
            record = json_value(raw)
        except ValueError as exc:  # JSONDecodeError, or a number too long for int()
            yield number, None, None, f"not valid JSON ({getattr(exc, 'msg', exc)})"
            continue
        if not isinstance(record, dict):
            yield number, None, None, "each line must be a JSON object"
            continue
        id_field, value_field = _pick(record, ID_FIELDS), _pick(record, VALUE_FIELDS)
        if id_field is None or value_field is None:
            need = "prompt_id" if id_field is None else "prediction"
            yield number, None, None, f"missing field {need!r}"
            continue
        yield number, record[id_field], record[value_field], None


def _read(data: bytes, filename: str) -> list[tuple[str, object, object, str | None]]:
    """Every record of the file as ``(where, prompt id, prediction, problem)``."""
    limit = settings.CHORUS_MAX_IMPORT_BYTES
    if len(data) > limit:
        raise _refuse("file", [("", too_large_message(size=len(data), limit=limit).capitalize() + ".")])
    try:
        text = decode_upload(data)
        rows = _jsonl_rows(text) if detect_format(filename, data) == "jsonl" else _csv_rows(text)
        return [(f"line {line}", pid, value, problem) for line, pid, value, problem in rows]
    except PromptFileError as exc:
        raise _refuse("file", [(f"line {line}" if line else "", msg) for line, msg in exc.errors]) from exc


# --------------------------------------------------------------------------------------- checking values
def _prompt_ids(campaign: Campaign) -> set[str]:
    """The ids a prediction may name: the audited prompts (not controls), per option on per-option schemas."""
    prompts = campaign.prompts.filter(is_control=False).values_list("external_id", "options")
    if campaign.schema == Campaign.Schema.OPTION_RATING:
        return {unit_name(ext, n) for ext, options in prompts for n in range(1, len(options) + 1)}
    return {ext for ext, _ in prompts}


def _value_parser(campaign: Campaign):
    """``parse(value) -> (stored value, problem)`` for the campaign's schema."""
    if campaign.schema == Campaign.Schema.BINARY:
        words = {"1": 1, "0": 0, "true": 1, "false": 0}
        texts = [t.strip() for t in (campaign.positive_text, campaign.negative_text) if t.strip().lower() not in words]
        words.update({campaign.positive_text.strip().lower(): 1, campaign.negative_text.strip().lower(): 0})
        spelled = ["1", "0", "true", "false", *(repr(t) for t in texts)]
        allowed = ", ".join(spelled[:-1]) + " or " + spelled[-1]

        def parse(value):
            if isinstance(value, bool) or (isinstance(value, (int, float)) and value in (0, 1)):
                return int(value), None
            if isinstance(value, str) and value.strip().lower() in words:
                return words[value.strip().lower()], None
            return None, f"prediction {shown(value)} is not a label of this campaign (expected {allowed})"

        return parse

    def parse(value):  # ratings: a point of the scale, or any number (a graded score)
        number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        if isinstance(value, str):
            number = parse_int(value)
            if number is None:
                try:
                    number = float(value)
                except ValueError:
                    number = None
        try:
            as_float = float(number) if number is not None else math.nan
        except OverflowError:  # an integer beyond a float's range
            as_float = math.inf
        if not math.isfinite(as_float):
            return None, f"prediction {shown(value)} is not a finite number (expected a rating or a graded score)"
        return (int(as_float) if as_float.is_integer() else as_float), None

    return parse


def _check(campaign: Campaign, rows) -> dict:
    """The predictions ``{prompt id: value}`` of valid rows, or a ValidationError listing every bad one."""
    known, parse = _prompt_ids(campaign), _value_parser(campaign)
    predictions, first, errors = {}, {}, []
    for where, pid, value, problem in rows:
        if problem:
            errors.append((where, problem))
            continue
        pid = str(pid).strip() if isinstance(pid, (str, int)) and not isinstance(pid, bool) else None
        if not pid:
            errors.append((where, "empty or malformed prompt id"))
            continue
        if pid not in known:
            errors.append((where, f"unknown prompt id {shown(pid)}"))
            continue
        earlier = first_seen(first, pid, where)
        if earlier is not None:
            errors.append((where, f"duplicate prompt id {shown(pid)} (first at {earlier})"))
            continue
        if value is None or value == "":
            errors.append((where, f"empty prediction for prompt id {shown(pid)}"))
            continue
        clean, problem = parse(value)
        if problem:
            errors.append((where, problem))
            continue
        predictions[pid] = clean
    if errors:
        raise _refuse("file", errors)
    if not predictions:
        raise _refuse("file", [("", "the file holds no predictions")])
    return predictions


# --------------------------------------------------------------------------------------- free text
def _answers(campaign: Campaign, data: bytes, filename: str, field: str) -> dict[str, list[str]]:
    """A free-text system's ranked answers or samples, ``{prompt id: [answers]}`` in ProtoQA's shapes
    (one JSON object, or JSONL lines of such objects: ``audits.engine.protoqa_scoring.parse_answers``); the
    first problem, by line, refuses the whole file."""
    limit = settings.CHORUS_MAX_IMPORT_BYTES
    if len(data) > limit:
        raise _refuse(field, [("", too_large_message(size=len(data), limit=limit).capitalize() + ".")])
    try:
        text = decode_upload(data)
    except PromptFileError as exc:
        raise _refuse(field, [(f"line {line}", msg) for line, msg in exc.errors]) from exc
    known = _prompt_ids(campaign)
    try:
        answers = parse_answers(text, source=filename or field, known_ids=known)
    except ProtoQAFormatError as exc:
        raise _refuse(field, [(f"line {exc.line}" if exc.line else "", exc.problem)]) from exc
    except RecursionError as exc:  # JSON nested deeper than Python's parser goes
        raise _refuse(field, [("", "JSON nested too deeply")]) from exc
    return answers


def _answer_mapping(campaign: Campaign, value, field: str) -> dict[str, list[str]]:
    """A JSON body's ``{prompt id: [answers]}``, checked as a file's (the first problem refuses it)."""
    if not isinstance(value, dict):
        raise _refuse(field, [("", "expected an object {prompt id: [answers]}")])
    try:
        return parse_answers(json.dumps(value), source=field, known_ids=_prompt_ids(campaign))
    except ProtoQAFormatError as exc:
        raise _refuse(field, [("", exc.problem)]) from exc


def _answer_upload(*, campaign, name, data, filename, samples, samples_filename, by) -> System:
    predictions = _answers(campaign, data, filename, "file")
    drawn = _answers(campaign, samples, samples_filename, "samples") if samples is not None else None
    return _write(campaign=campaign, name=name, predictions=predictions, samples=drawn, filename=filename, by=by)


# --------------------------------------------------------------------------------------- the services
def _write(*, campaign: Campaign, name: str, predictions: dict, filename: str, by, samples=None) -> System:
    with transaction.atomic(durable=True):
        system, _ = System.objects.update_or_create(
            campaign=campaign,
            name=name,
            defaults={
                "predictions": predictions,
                "samples": samples,
                "n_predictions": len(predictions),
                "filename": filename[:255],
                "uploaded_by": by if by is not None and by.is_authenticated else None,
                "uploaded_at": timezone.now(),
            },
        )
    return system


def system_upload(
    *,
    campaign: Campaign,
    name: str,
    data: bytes,
    filename: str,
    by,
    replace: bool = False,
    samples: bytes | None = None,
    samples_filename: str = "",
) -> System:
    """Store a system's predictions from a CSV or JSONL file (format by extension, else by content).
    On a free-text campaign the file holds ranked answer lists and ``samples`` (optional) sampled
    answers with repeats, both in ProtoQA's prediction shapes.

    Raises ``ValidationError`` under ``name`` (empty, too long, reserved, taken without ``replace``),
    ``file`` (every bad row by line: unknown, duplicate or empty prompt ids, values outside the
    schema, missing columns, bad encoding, an empty or too large file) or ``samples``. Nothing is
    written then.
    """
    name = _clean_name(campaign, name, replace)
    if campaign.schema == Campaign.Schema.FREE_TEXT:
        return _answer_upload(
            campaign=campaign,
            name=name,
            data=data,
            filename=filename,
            samples=samples,
            samples_filename=samples_filename,
            by=by,
        )
    predictions = _check(campaign, _read(data, filename))
    return _write(campaign=campaign, name=name, predictions=predictions, filename=filename, by=by)


def system_save(*, campaign: Campaign, name: str, predictions, by, replace: bool = False, samples=None) -> System:
    """Store a system's predictions from a mapping ``{prompt id: prediction}`` (the API's JSON body),
    checked as :func:`system_upload` checks a file's rows; problems are named by prompt id. On a
    free-text campaign a prediction is a ranked list of answers, and ``samples`` (optional) maps
    prompt ids to sampled answers."""
    name = _clean_name(campaign, name, replace)
    if campaign.schema == Campaign.Schema.FREE_TEXT:
        ranked = _answer_mapping(campaign, predictions, "predictions")
        drawn = _answer_mapping(campaign, samples, "samples") if samples is not None else None
        return _write(
            campaign=campaign,
            name=name,
            predictions=ranked,
            samples=drawn,
            filename="",
            by=by,
        )
    if not isinstance(predictions, dict):
        raise _refuse("predictions", [("", "expected an object {prompt id: prediction}")])
    rows = [(f"prompt {shown(pid)}", pid, value, None) for pid, value in predictions.items()]
    try:
        clean = _check(campaign, rows)
    except ValidationError as exc:
        raise ValidationError({"predictions": exc.message_dict["file"]}) from exc
    return _write(campaign=campaign, name=name, predictions=clean, filename="", by=by)


def system_delete(*, campaign: Campaign, name: str) -> bool:
    """Delete the campaign's system ``name``; False when there is none."""
    with transaction.atomic(durable=True):
        deleted, _ = System.objects.filter(campaign=campaign, name=name).delete()
    return bool(deleted)
