"""Writing a campaign's labels as CSV, JSONL or Parquet, one chunk at a time (web download, API, CLI).

The rows and their columns come from ``label_export_rows`` / ``EXPORT_COLUMNS``; this module only
encodes them. CSV and JSONL come as text chunks, Parquet as bytes: one row group at a time, typed by
``EXPORT_COLUMNS`` (``annotation.parquet``). Two options change the content:

* CSV cells that a spreadsheet would run as a formula (``=``, ``+``, ``-``, ``@``, tab, CR first) get
  a leading ``'`` (OWASP "CSV injection"); plain numbers such as ``-1`` stay numbers. JSONL and
  Parquet are data for programs and are written as is.
* ``pseudonymize`` replaces worker ids by a keyed HMAC of the id (key: SECRET_KEY), so a shared file
  keeps who-labeled-what structure without naming anyone; the same worker gets the same pseudonym.

The web download and the API share ``parse_pseudonymize`` (the query flag) and ``export_response``
(the streamed file), so the two cannot disagree on either.
"""

import csv
import json
import re
from collections.abc import Iterable, Iterator

from django.http import StreamingHttpResponse
from django.utils.crypto import salted_hmac

from annotation import parquet
from annotation.models import Campaign
from annotation.selectors import EXPORT_COLUMNS, EXPORT_FIELDS, label_export_rows
from annotation.services.activity import activity_record

FORMATS = {
    "csv": "text/csv; charset=utf-8",
    "jsonl": "application/x-ndjson; charset=utf-8",
    "parquet": parquet.CONTENT_TYPE,
}
#: The formats whose chunks are bytes, not text (a file for them is opened in binary mode).
BINARY_FORMATS = frozenset({"parquet"})
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_PSEUDONYMIZE_ON = frozenset({"1", "true", "yes", "on"})
_PSEUDONYMIZE_OFF = frozenset({"", "0", "false", "no", "off"})
PSEUDONYMIZE_HELP = (
    "Replace worker ids by stable pseudonyms (keyed hashes): 1, true, yes or on; "
    "0, false, no, off, empty or absent keep the ids. Case does not matter; any other value is refused."
)


class ExportOptionError(ValueError):
    """An export option the caller got wrong; the message says what is accepted."""


def pseudonym(worker_id: str) -> str:
    return "w-" + salted_hmac("chorus.export.pseudonym", worker_id).hexdigest()[:20]


def export_rows(*, campaign: Campaign, pseudonymize: bool = False, labels=None) -> Iterator[dict]:
    """The export's rows; ``labels`` narrows them (see ``label_export_rows``)."""
    for row in label_export_rows(campaign=campaign, labels=labels):
        if pseudonymize:
            row = {**row, "worker": pseudonym(row["worker"])}
        yield row


def neutralise_cell(value) -> str:
    """The CSV text of one cell, defused if a spreadsheet would read it as a formula."""
    # A free-text control's gold is a list of accepted answers: JSON, not Python's repr of a list.
    text = parquet.json_text(value) or ""
    if text.startswith(_FORMULA_START) and not _PLAIN_NUMBER.fullmatch(text):
        return "'" + text
    return text


class EchoLine:
    """csv.writer's file: hands back the line it was given instead of storing it."""

    def write(self, line: str) -> str:
        return line


def csv_chunks(rows: Iterable[dict], fields=EXPORT_FIELDS) -> Iterator[str]:
    """A CSV file's lines: the header ``fields``, then each row's cells, defused for spreadsheets."""
    writer = csv.writer(EchoLine())
    yield writer.writerow(fields)
    for row in rows:
        yield writer.writerow([neutralise_cell(row[field]) for field in fields])


def csv_response(rows: Iterable[dict], *, fields, filename: str) -> StreamingHttpResponse:
    """A CSV download streamed from ``rows`` (the activity log, the prompts list)."""
    response = StreamingHttpResponse(csv_chunks(rows, fields), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def jsonl_chunks(rows: Iterable[dict]) -> Iterator[str]:
    for row in rows:
        yield json.dumps({field: row[field] for field in EXPORT_FIELDS}, ensure_ascii=False) + "\n"


def parquet_chunks(rows: Iterable[dict]) -> Iterator[bytes]:
    return parquet.parquet_chunks(rows, EXPORT_COLUMNS)


_ENCODERS = {"csv": csv_chunks, "jsonl": jsonl_chunks, "parquet": parquet_chunks}


def export_chunks(
    *, campaign: Campaign, fmt: str, pseudonymize: bool = False, labels=None
) -> Iterator[str] | Iterator[bytes]:
    """The export in ``fmt`` (a key of FORMATS): text chunks, or bytes for BINARY_FORMATS; ``labels``
    as for ``export_rows``."""
    if fmt not in FORMATS:
        raise ValueError(f"Unknown export format {fmt!r}; use one of {', '.join(FORMATS)}.")
    return _ENCODERS[fmt](export_rows(campaign=campaign, pseudonymize=pseudonymize, labels=labels))


def export_filename(campaign: Campaign, fmt: str) -> str:
    return f"{campaign.slug}-labels.{fmt}"


def parse_pseudonymize(value: str | None) -> bool:
    """The ``pseudonymize`` query flag as a bool, for the web download and the API alike.

    Accepts 1/true/yes/on and 0/false/no/off, case-insensitively; empty or absent (``None``) is
    off. Anything else raises ExportOptionError rather than quietly meaning "off": a typo such as
    ``pseudonymize=ture`` must not hand out a file that names every worker.
    """
    text = "" if value is None else value.lower()
    if text in _PSEUDONYMIZE_ON:
        return True
    if text in _PSEUDONYMIZE_OFF:
        return False
    # The value is not echoed: the web view answers in HTML, where it would be injected.
    raise ExportOptionError(
        "pseudonymize must be 1, true, yes or on to replace worker ids by pseudonyms, "
        "or 0, false, no, off or empty to keep them."
    )


def export_response(*, campaign: Campaign, fmt: str, pseudonymize: bool = False, labels=None) -> StreamingHttpResponse:
    """The export as a download, streamed chunk by chunk so its size does not matter, with the
    format's content type and ``export_filename`` as the attachment's name; ``labels`` as for
    ``export_rows``."""
    chunks = export_chunks(
        campaign=campaign, fmt=fmt, pseudonymize=pseudonymize, labels=labels
    )  # refuses an unknown fmt
    response = StreamingHttpResponse(chunks, content_type=FORMATS[fmt])
    response["Content-Disposition"] = f'attachment; filename="{export_filename(campaign, fmt)}"'
    activity_record(
        campaign=campaign,
        verb="labels.exported",
        summary=f"Exported the labels as {fmt}" + (" (pseudonymized)" if pseudonymize else ""),
        detail={"format": fmt, "pseudonymize": pseudonymize, "filtered": labels is not None},
    )
    return response
