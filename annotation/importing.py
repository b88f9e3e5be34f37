"""Parsing prompt files (CSV or JSONL). Pure: bytes in, validated rows or a list of errors out.

Columns: ``id`` and ``text`` are required; ``gold``, ``group``, ``control`` and (per-option schemas)
``options`` are optional. In CSV, ``options`` is a JSON list or a ``|``-separated string; gold for a
per-option schema is a JSON list with one rating per option. A prompt has at most ``MAX_OPTIONS``
options. ``control`` (true/false, 1/0, empty for false) makes the prompt a control, which needs a gold.
"""

import csv
import io
import json
import re
from dataclasses import dataclass

from annotation.models.prompts import MAX_OPTIONS
from annotation.schemas import LabelSchema, LabelValueError, shown

MAX_ERRORS_SHOWN = 20
_ESCAPED_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")  # \u0000 after an even number of backslashes


@dataclass(frozen=True)
class PromptRow:
    line: int
    external_id: str
    text: str
    options: list
    gold: object
    group: str
    is_control: bool = False


class PromptFileError(ValueError):
    """The file cannot be imported. ``errors`` lists (line, message); line 0 is the whole file."""

    def __init__(self, errors: list[tuple[int, str]]):
        self.errors = errors
        shown = "; ".join(f"line {line}: {msg}" if line else msg for line, msg in errors[:MAX_ERRORS_SHOWN])
        more = f" (and {len(errors) - MAX_ERRORS_SHOWN} more)" if len(errors) > MAX_ERRORS_SHOWN else ""
        super().__init__(f"Nothing was imported. {shown}{more}")


def too_large_message(*, size: int, limit: int) -> str:
    """The one wording of "this prompt file is over CHORUS_MAX_IMPORT_BYTES", so the parser's error,
    the web form and the API upload cannot drift apart. A clause, like the parser's other errors."""
    return f"the file is {size:,} bytes; the limit is {limit:,}"


def upload_too_large_message(*, size: int, limit: int) -> str:
    """The same as a sentence, for an upload refused by its size before it is read (web form, API)."""
    return f"Nothing was imported: {too_large_message(size=size, limit=limit)}."


def detect_format(filename: str, data: bytes) -> str:
    name = filename.lower()
    if name.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    if name.endswith((".csv", ".tsv", ".txt")):
        return "csv"
    return "jsonl" if data.lstrip()[:1] == b"{" else "csv"


def decode_upload(data: bytes) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise PromptFileError(
            [(line, f"the file is not UTF-8 (byte 0x{data[exc.start]:02x}); save it as UTF-8")]
        ) from exc
    if "\x00" in text:
        raise PromptFileError([(text[: text.index("\x00")].count("\n") + 1, "the file contains NUL bytes")])
    return text


def json_value(text: str):
    """json.loads, reporting nesting too deep for Python's parser as the decoding error it is (a
    RecursionError would otherwise escape as a crash)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", text, 0) from None


def _csv_records(text: str):
    """Each record with the line it starts on: a quoted cell may hold line breaks, and an error names
    the line where its record begins. The csv module ends lines at line feeds and carriage returns
    only, so U+2028 and the like stay inside their cell."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    start = 1
    try:
        header = next(reader, [])
        missing = [c for c in ("id", "text") if c not in header]
        if missing:
            raise PromptFileError([(1, f"missing column {', '.join(repr(c) for c in missing)} in the header")])
        # A dict of the record would keep the last of two same-named columns and drop the other unseen.
        repeated = ", ".join(repr(c) for c in sorted({c for c in header if header.count(c) > 1}))
        if repeated:
            raise PromptFileError([(1, f"column {repeated} appears more than once in the header")])
        start = reader.line_num + 1
        for cells in reader:
            if len(cells) > len(header):
                yield start, None, "more cells than header columns"
            elif cells:  # [] is a blank line
                yield start, dict(zip(header, cells)), None
            start = reader.line_num + 1
    except csv.Error as exc:  # named by its record's first line: an unclosed quote is found only at the end
        raise PromptFileError([(start, f"broken CSV: {exc}")]) from exc


def file_lines(text: str):
    """The file's lines, numbered from 1. Only a line feed ends a line (CR LF too): str.splitlines() also
    breaks at U+2028, U+2029, U+0085 and form feeds, which are text inside a JSON string."""
    for number, line in enumerate(text.split("\n"), start=1):
        yield number, line.removesuffix("\r")


def _jsonl_records(text: str):
    for number, raw in file_lines(text):
        if not raw.strip():
            continue
        if _ESCAPED_NUL.search(raw):  # PostgreSQL text cannot hold NUL; the raw-byte check misses \u0000
            yield number, None, "the line contains a NUL character (\\u0000)"
            continue
        try:
            record = json_value(raw)
        except json.JSONDecodeError as exc:
            yield number, None, f"not valid JSON ({exc.msg} at column {exc.colno})"
            continue
        except ValueError as exc:  # a number too long for int() ("Exceeds the limit (4300 digits) ...")
            yield number, None, f"not valid JSON ({exc})"
            continue
        if not isinstance(record, dict):
            yield number, None, "each line must be a JSON object"
            continue
        missing = [c for c in ("id", "text") if c not in record]
        if missing:
            yield number, None, f"missing field {', '.join(repr(c) for c in missing)}"
            continue
        yield number, record, None


_JSON_KINDS = {dict: "an object", list: "a list", bool: "true or false", float: "a decimal number"}


def _as_text(value, what: str) -> str:
    """A JSON value Chorus keeps as text: a string, or a whole number (7 is kept as "7"); null is empty.
    Anything else would be kept as its Python spelling ("{'a': 1}", "True", "1.0"), so it is refused."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise ValueError(f"{what} must be a string or a whole number, not {_JSON_KINDS.get(type(value), 'that')}")


def _options(value) -> list:
    if value in (None, ""):
        return []
    if isinstance(value, str):
        stripped = value.strip()
        if not stripped.startswith("["):
            return [part.strip() for part in stripped.split("|")]
        value = json_value(stripped)
        if not isinstance(value, list):
            raise ValueError("options must be a list")
    if isinstance(value, list):
        return [_as_text(v, f"option {number}") for number, v in enumerate(value, start=1)]
    raise ValueError("options must be a list or a |-separated string")


def _gold(value, schema: LabelSchema, n_options: int):
    if value is None or value == "":
        return None
    if schema.kind == "option_rating" and isinstance(value, str):
        value = json_value(value)
    return schema.clean_gold(value, n_options=n_options)


_CONTROL_WORDS = {"true": True, "1": True, "false": False, "0": False, "": False}


def _control(value) -> bool:
    """The ``control`` cell: true/false or 1/0 (any case, as JSON or as text); empty or absent is false."""
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _CONTROL_WORDS:
        return _CONTROL_WORDS[value.strip().lower()]
    raise ValueError(f"{shown(value)}; use true or false (or 1 or 0)")


def first_seen(seen: dict, key: str, where):
    """Where ``key`` came first in an upload, or None when this is its first row (``where`` is then noted
    in ``seen``): the duplicate-id check of both upload parsers, prompt files here and systems'
    predictions (``audits.services.systems``), each wording its refusal."""
    first = seen.get(key)
    if first is None:
        seen[key] = where
    return first


def parse_prompts(data: bytes, *, filename: str, schema: LabelSchema, max_bytes: int) -> list[PromptRow]:
    """Validate a whole prompt file. Raises PromptFileError listing every bad line; returns rows otherwise."""
    if len(data) > max_bytes:
        raise PromptFileError([(0, too_large_message(size=len(data), limit=max_bytes))])
    text = decode_upload(data)
    records = _jsonl_records(text) if detect_format(filename, data) == "jsonl" else _csv_records(text)

    rows, errors, seen = [], [], {}
    for line, record, problem in records:
        if problem:
            errors.append((line, problem))
            continue
        try:
            external_id = _as_text(record.get("id"), "the id").strip()
            group = _as_text(record.get("group"), "the group").strip()
        except ValueError as exc:
            errors.append((line, str(exc)))
            continue
        body = record.get("text")
        body = body.strip() if isinstance(body, str) else body
        if not external_id:
            errors.append((line, "empty id"))
            continue
        if len(external_id) > 200:
            errors.append((line, "id longer than 200 characters"))
            continue
        if not isinstance(body, str) or not body:
            errors.append((line, f"empty text for id {external_id!r}"))
            continue
        first = first_seen(seen, external_id, line)
        if first is not None:
            errors.append((line, f"duplicate id {external_id!r} (first on line {first})"))
            continue
        try:
            options = _options(record.get("options"))
        except ValueError as exc:
            errors.append((line, f"bad options: {exc}"))
            continue
        if schema.kind == "option_rating" and not options:
            errors.append((line, "a per-option schema needs an 'options' column with the answer options"))
            continue
        if any(not o for o in options):
            errors.append((line, "an answer option is empty"))
            continue
        if len(options) > MAX_OPTIONS:
            errors.append(
                (line, f"id {external_id!r} has {len(options):,} answer options; a prompt has at most {MAX_OPTIONS:,}")
            )
            continue
        try:
            gold = _gold(record.get("gold"), schema, len(options))
        except (LabelValueError, ValueError) as exc:
            errors.append((line, f"bad gold value: {exc}"))
            continue
        try:
            is_control = _control(record.get("control"))
        except ValueError as exc:
            errors.append((line, f"bad control value: {exc}"))
            continue
        if is_control and gold is None:
            errors.append((line, f"id {external_id!r} is a control but has no gold: a control needs a gold label"))
            continue
        rows.append(PromptRow(line, external_id, body, options, gold, group[:200], is_control=is_control))
    if errors:
        raise PromptFileError(errors)
    if not rows:
        raise PromptFileError([(0, "the file holds no prompts")])
    return rows


@dataclass(frozen=True)
class PromptFilePreview:
    """What a valid file would import, shown before anything is: counts, and its first rows."""

    n_prompts: int
    n_gold: int
    n_controls: int
    n_groups: int
    first_rows: list[PromptRow]


PREVIEW_ROWS = 5


def prompts_preview(rows: list[PromptRow]) -> PromptFilePreview:
    return PromptFilePreview(
        n_prompts=len(rows),
        n_gold=sum(row.gold is not None for row in rows),
        n_controls=sum(row.is_control for row in rows),
        n_groups=len({row.group for row in rows if row.group}),
        first_rows=rows[:PREVIEW_ROWS],
    )
