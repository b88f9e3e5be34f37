"""Parsing prompt files (CSV or JSONL). Pure: bytes in, validated rows or a list of errors out.

Columns: ``id`` and ``text`` are required; ``gold``, ``group`` and (per-option schemas) ``options``
are optional. In CSV, ``options`` is a JSON list or a ``|``-separated string; gold for a per-option
schema is a JSON list with one rating per option.
"""
import csv
import io
import json
import re
from dataclasses import dataclass

from annotation.schemas import LabelSchema, LabelValueError

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


def _decode(data: bytes) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise PromptFileError([(line, f"the file is not UTF-8 (byte 0x{data[exc.start]:02x}); save it as UTF-8")])
    if "\x00" in text:
        raise PromptFileError([(text[: text.index("\x00")].count("\n") + 1, "the file contains NUL bytes")])
    return text


def _json(text: str):
    """json.loads, reporting nesting too deep for Python's parser as the decoding error it is (a
    RecursionError would otherwise escape as a crash)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", text, 0) from None


def _csv_records(text: str):
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    try:
        header = reader.fieldnames or []
        missing = [c for c in ("id", "text") if c not in header]
        if missing:
            raise PromptFileError([(1, f"missing column {', '.join(repr(c) for c in missing)} in the header")])
        for record in reader:
            if None in record:
                yield reader.line_num, None, "more cells than header columns"
                continue
            yield reader.line_num, record, None
    except csv.Error as exc:
        # DictReader.line_num still holds the previous record's line; its csv.reader is at the bad one.
        raise PromptFileError([(reader.reader.line_num, f"broken CSV: {exc}")])


def _jsonl_records(text: str):
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        if _ESCAPED_NUL.search(raw):  # PostgreSQL text cannot hold NUL; the raw-byte check misses \u0000
            yield number, None, "the line contains a NUL character (\\u0000)"
            continue
        try:
            record = _json(raw)
        except ValueError as exc:
            yield number, None, f"not valid JSON ({exc.msg} at column {exc.colno})"
            continue
        if not isinstance(record, dict):
            yield number, None, "each line must be a JSON object"
            continue
        missing = [c for c in ("id", "text") if c not in record]
        if missing:
            yield number, None, f"missing field {', '.join(repr(c) for c in missing)}"
            continue
        yield number, record, None


def _options(value) -> list:
    if value in (None, ""):
        return []
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, str):
        stripped = value.strip()
        if stripped.startswith("["):
            parsed = _json(stripped)
            if not isinstance(parsed, list):
                raise ValueError("options must be a list")
            return [str(v) for v in parsed]
        return [part.strip() for part in stripped.split("|")]
    raise ValueError("options must be a list or a |-separated string")


def _gold(value, schema: LabelSchema, n_options: int):
    if value is None or value == "":
        return None
    if schema.kind == "option_rating" and isinstance(value, str):
        value = _json(value)
    return schema.clean_gold(value, n_options=n_options)


def parse_prompts(data: bytes, *, filename: str, schema: LabelSchema, max_bytes: int) -> list[PromptRow]:
    """Validate a whole prompt file. Raises PromptFileError listing every bad line; returns rows otherwise."""
    if len(data) > max_bytes:
        raise PromptFileError([(0, too_large_message(size=len(data), limit=max_bytes))])
    text = _decode(data)
    records = _jsonl_records(text) if detect_format(filename, data) == "jsonl" else _csv_records(text)

    rows, errors, seen = [], [], {}
    for line, record, problem in records:
        if problem:
            errors.append((line, problem))
            continue
        external_id = str(record.get("id") if record.get("id") is not None else "").strip()
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
        if external_id in seen:
            errors.append((line, f"duplicate id {external_id!r} (first on line {seen[external_id]})"))
            continue
        seen[external_id] = line
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
        try:
            gold = _gold(record.get("gold"), schema, len(options))
        except (LabelValueError, ValueError) as exc:
            errors.append((line, f"bad gold value: {exc}"))
            continue
        group = record.get("group")
        rows.append(
            PromptRow(line, external_id, body, options, gold, "" if group is None else str(group).strip()[:200])
        )
    if errors:
        raise PromptFileError(errors)
    if not rows:
        raise PromptFileError([(0, "the file holds no prompts")])
    return rows
