"""Labels files (``noise-audit.md``, "Files and field names").

A labels file is CSV (header row; ``.tsv`` is read tab-separated) or JSONL with at least the fields
``worker``, ``prompt``, ``value``; optional ``gold`` (the prompt's putative label, repeated on its
rows), ``group`` and ``created_at``. Other fields are ignored, so Chorus's own export is a valid
labels file. Gold may also come from a separate file with ``prompt`` and ``gold``.

A malformed file raises :class:`LabelFileError` naming the file, the line and the column (or
field). Values that are missing or outside the schema are *not* errors: they are counted as
missing / invalid by :class:`~audits.engine.matrix.LabelMatrix`.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from audits.engine._util import SMALL, pandas
from audits.engine.matrix import DuplicateLabelError, LabelMatrix

__all__ = ["LabelFileError", "read_labels", "read_gold", "read_predictions", "read_table", "LABEL_FIELDS"]

LABEL_FIELDS = ("worker", "prompt", "value")
OPTIONAL_FIELDS = ("gold", "group", "created_at")
#: Chorus's export marks the rows the live audit leaves out: a control prompt's labels, and the labels
#: of a worker excluded from the audit. read_labels leaves them out too, so the offline audit of an
#: export equals the live one.
LEFT_OUT_FIELDS = ("control", "excluded")
_TRUE = {"1", "true", "yes"}


class LabelFileError(ValueError):
    """A labels (or gold / predictions) file that cannot be read, with where and why.

    Attributes: ``path``, ``line`` (1-based, None when not about one line), ``column`` (1-based
    column number, field name, or None) and ``reason``.
    """

    def __init__(self, path: str, line: int | None, column: Any, reason: str):
        self.path, self.line, self.column, self.reason = str(path), line, column, reason
        where = []
        if line is not None:
            where.append(f"line {line}")
        if column is not None:
            where.append(f"column {column}")
        super().__init__(f"{path}: {', '.join(where)}: {reason}" if where else f"{path}: {reason}")


def _format_of(path: str, fmt: str | None) -> str:
    if fmt is not None:
        if fmt not in ("csv", "tsv", "jsonl"):
            raise ValueError(f"fmt: expected 'csv', 'tsv' or 'jsonl', got {fmt!r}")
        return fmt
    low = str(path).lower()
    if low.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    if low.endswith((".tsv", ".tab")):
        return "tsv"
    if low.endswith(".csv"):
        return "csv"
    with open(path, "rb") as fh:
        head = fh.read(4096).lstrip(b"\xef\xbb\xbf").lstrip()
    return "jsonl" if head.startswith(b"{") else "csv"


def _col(header: list[str], i: int) -> str:
    return f"{i + 1} ({header[i]!r})" if i < len(header) else f"{i + 1}"


def _csv_records(path: str, sep: str):
    """Yield ``(first_line, last_line, row)`` for each non-blank record (header included)."""
    with open(path, newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh, delimiter=sep, strict=True)
        start = 1
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise LabelFileError(path, reader.line_num, None, f"malformed CSV: {exc}") from None
            if row:
                yield start, reader.line_num, row
            start = reader.line_num + 1


def _record_line(path: str, sep: str, record: int) -> int:
    """The first physical line of data record ``record`` (0-based, header excluded)."""
    for i, (first, _, _) in enumerate(_csv_records(path, sep)):
        if i == record + 1:
            return first
    return -1


def read_table(
    path: str, *, required: tuple, optional: tuple = (), fmt: str | None = None, id_fields: tuple = ()
) -> tuple[dict, dict]:
    """Read the wanted fields of a CSV/TSV/JSONL file into columns (1-d object arrays).

    Returns ``(columns, info)``: ``columns`` maps each present field to its values (strings for
    CSV; JSON values for JSONL); ``info["line_of"](i)`` gives the line of row i and
    ``info["column_of"](field)`` names the column. Raises :class:`LabelFileError` for a missing file or
    field, a row with the wrong number of fields, bad quoting / JSON, or an empty id in ``id_fields``.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise LabelFileError(path, None, None, "no such file")
    kind = _format_of(path, fmt)
    try:
        if kind == "jsonl":
            return _read_jsonl(path, required, optional, id_fields)
        return _read_csv(path, "\t" if kind == "tsv" else ",", required, optional, id_fields)
    except UnicodeDecodeError as exc:
        raise LabelFileError(path, None, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _read_csv(path, sep, required, optional, id_fields):
    records = _csv_records(path, sep)
    try:
        _, _, header = next(records)
    except StopIteration:
        raise LabelFileError(path, 1, None, "empty file: expected a header row with " + ", ".join(required)) from None
    header = [h.strip() for h in header]
    for name in required:
        if name not in header:
            raise LabelFileError(path, 1, name, f"missing required column {name!r} (header: {', '.join(header)})")
    wanted = [c for c in (*required, *optional) if c in header]
    for name in wanted:
        if header.count(name) > 1:
            raise LabelFileError(path, 1, name, f"column {name!r} appears more than once in the header")
    idx = {c: header.index(c) for c in wanted}
    id_idx = [(idx[c], c) for c in id_fields if c in idx]
    ncol = len(header)
    n_rows = 0
    collect = [[] for _ in wanted]
    positions = [idx[c] for c in wanted]
    for first, _, row in records:  # validation pass: field counts and empty ids (+ values if small)
        if len(row) != ncol:
            col = ncol + 1 if len(row) > ncol else len(row) + 1
            raise LabelFileError(path, first, col, f"expected {ncol} fields (as the header), found {len(row)}")
        for i, name in id_idx:
            if row[i].strip() == "":
                raise LabelFileError(path, first, _col(header, i), f"empty {name}")
        if n_rows < SMALL:
            for lst, i in zip(collect, positions):
                lst.append(row[i].strip())
        n_rows += 1
    if n_rows <= SMALL:
        columns = {}
        for c, lst in zip(wanted, collect):
            arr = np.empty(len(lst), dtype=object)
            arr[:] = lst
            columns[c] = arr
    else:
        pd = pandas()
        try:
            frame = pd.read_csv(
                path,
                sep=sep,
                dtype=str,
                keep_default_na=False,
                na_filter=False,
                usecols=wanted,
                encoding="utf-8-sig",
                skip_blank_lines=True,
                engine="c",
            )
        except (pd.errors.ParserError, csv.Error, ValueError) as exc:  # pragma: no cover - caught above
            raise LabelFileError(path, None, None, f"malformed CSV: {exc}") from None
        frame.columns = [c.strip() for c in frame.columns]
        if len(frame) != n_rows:  # the two readers disagree (exotic quoting): trust neither silently
            raise LabelFileError(path, None, None, f"could not parse reliably ({n_rows} records vs {len(frame)} rows)")
        columns = {c: frame[c].str.strip().to_numpy(dtype=object) for c in wanted}
    return columns, {"line_of": lambda i: _record_line(path, sep, i), "column_of": lambda c: _col(header, idx[c])}


def _read_jsonl(path, required, optional, id_fields):
    cols: dict[str, list] = {c: [] for c in (*required, *optional)}
    present = dict.fromkeys(optional, False)
    lines: list[int] = []
    with open(path, encoding="utf-8-sig") as fh:
        for no, text in enumerate(fh, start=1):
            s = text.strip()
            if not s:
                continue
            try:
                obj = json.loads(s)
            except json.JSONDecodeError as exc:
                raise LabelFileError(path, no, exc.colno, f"invalid JSON: {exc.msg}") from None
            if not isinstance(obj, dict):
                raise LabelFileError(path, no, 1, f"expected a JSON object, found {type(obj).__name__}")
            for name in required:
                if name not in obj:
                    raise LabelFileError(path, no, name, f"missing field {name!r}")
            for name in id_fields:
                v = obj.get(name)
                if (
                    v is None
                    or isinstance(v, (dict, list, bool))
                    or (isinstance(v, str) and not v.strip())
                    or (isinstance(v, float) and not math.isfinite(v))
                ):
                    raise LabelFileError(path, no, name, f"{name} must be a non-empty string or number, found {v!r}")
            for name in cols:
                v = obj.get(name)
                if name in present and name in obj:
                    present[name] = True
                if isinstance(v, (dict, list)):
                    v = json.dumps(v)  # not a label value: it will count as invalid
                elif isinstance(v, str):
                    v = v.strip()
                cols[name].append(v)
            lines.append(no)
    if not lines:
        raise LabelFileError(path, None, None, "no records")
    names = [c for c in required] + [c for c in optional if present[c]]
    for name in id_fields:  # ids as text unless all are integers, so "12" and 12 do not mix
        if not all(isinstance(v, int) for v in cols[name]):
            cols[name] = [v if isinstance(v, str) else str(v) for v in cols[name]]
    columns = {}
    for c in names:
        arr = np.empty(len(cols[c]), dtype=object)
        arr[:] = cols[c]
        columns[c] = arr
    return columns, {"line_of": lambda i: lines[i], "column_of": lambda c: c}


def read_gold(path: str, *, fmt: str | None = None) -> dict:
    """Read a gold file (fields ``prompt``, ``gold``) into ``{prompt: raw gold}``.

    Raises :class:`LabelFileError` for a malformed file or a prompt given two different golds.
    """
    columns, info = read_table(path, required=("prompt", "gold"), fmt=fmt, id_fields=("prompt",))
    return _unique_per_prompt(path, columns, "gold", info)


def read_predictions(path: str, *, fmt: str | None = None) -> dict:
    """Read a system's predictions (``prompt`` plus ``prediction``, ``value`` or ``label``).

    Returns ``{prompt: raw prediction}``.
    """
    path = os.fspath(path)
    for field in ("prediction", "value", "label"):
        try:
            columns, info = read_table(path, required=("prompt", field), fmt=fmt, id_fields=("prompt",))
        except LabelFileError as exc:
            if exc.column == field and "missing" in exc.reason:
                continue
            raise
        return _unique_per_prompt(path, columns, field, info)
    raise LabelFileError(path, 1, "prediction", "missing column 'prediction' (or 'value' / 'label')")


def _without_left_out_rows(cols: dict, info: dict) -> tuple[dict, dict]:
    """The columns without the rows marked true in a ``control`` or ``excluded`` column (see
    ``LEFT_OUT_FIELDS``), and an ``info`` whose line numbers still name the file's lines."""
    marks = [cols.pop(field) for field in LEFT_OUT_FIELDS if field in cols]
    if not marks:
        return cols, info
    left_out = np.zeros(len(cols["worker"]), dtype=bool)
    for column in marks:
        left_out |= np.fromiter((v is True or str(v).strip().lower() in _TRUE for v in column), bool, len(column))
    if not left_out.any():
        return cols, info
    kept = np.flatnonzero(~left_out)
    line_of = info["line_of"]
    return {name: values[kept] for name, values in cols.items()}, {**info, "line_of": lambda i: line_of(int(kept[i]))}


def _unique_per_prompt(path, columns, field, info) -> dict:
    """``{prompt: value}`` from a column repeated per row; a prompt with two different values is an error."""
    out: dict = {}
    norm_of: dict = {}
    for i, (p, v) in enumerate(zip(columns["prompt"].tolist(), columns[field].tolist())):
        if v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and v.strip() == ""):
            continue
        nv = _norm_value(v)
        if p in norm_of:
            if norm_of[p] != nv:
                raise LabelFileError(
                    path,
                    info["line_of"](i),
                    info["column_of"](field),
                    f"{field} {v!r} for prompt {p!r} conflicts with an earlier {out[p]!r}",
                )
        else:
            norm_of[p] = nv
            out[p] = v
    return out


def _norm_value(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return str(v).strip().lower()


def read_labels(
    path: str,
    *,
    gold: str | Mapping | None = None,
    binarize: Mapping | str | None = None,
    rescale: tuple | None = None,
    valid_values: Any = None,
    duplicates: str = "error",
    fmt: str | None = None,
) -> LabelMatrix:
    """Read a labels file into a :class:`~audits.engine.matrix.LabelMatrix`.

    Parameters
    ----------
    path : str or path
        CSV (header row), TSV or JSONL, with ``worker``, ``prompt``, ``value`` and optionally ``gold``,
        ``group``, ``created_at``; rows whose ``control`` or ``excluded`` field is true (Chorus's
        export marks so the rows its live audit leaves out) are left out; other fields are ignored.
    gold : str or mapping, optional
        A gold file (``prompt``, ``gold``) or a mapping; it replaces any ``gold`` column.
    binarize, rescale, valid_values, duplicates
        As in :meth:`LabelMatrix.from_triples`.
    fmt : {"csv", "tsv", "jsonl"}, optional
        Defaults to the file extension (or a sniff of the first byte).

    Raises
    ------
    LabelFileError
        naming the line and the column/field for malformed content, an empty worker/prompt id, a
        duplicate (worker, prompt) label, or a prompt whose gold differs between rows.
    """
    path = os.fspath(path)
    cols, info = read_table(
        path, required=LABEL_FIELDS, optional=OPTIONAL_FIELDS + LEFT_OUT_FIELDS, fmt=fmt, id_fields=("worker", "prompt")
    )
    cols, info = _without_left_out_rows(cols, info)
    gold_arg = None
    if gold is not None:
        gold_arg = read_gold(gold) if isinstance(gold, (str, os.PathLike)) else gold
    elif "gold" in cols:
        gold_arg = _unique_per_prompt(path, cols, "gold", info)
    try:
        return LabelMatrix.from_triples(
            cols["worker"],
            cols["prompt"],
            cols["value"],
            gold=gold_arg,
            binarize=binarize,
            rescale=rescale,
            valid_values=valid_values,
            group=cols.get("group"),
            created_at=cols.get("created_at"),
            duplicates=duplicates,
            source=os.path.basename(path),
        )
    except DuplicateLabelError as exc:
        a, b = (info["line_of"](i) for i in exc.positions)
        raise LabelFileError(
            path,
            b,
            info["column_of"]("prompt"),
            f"worker {exc.worker!r} labeled prompt {exc.prompt!r} again (first on line {a}); "
            "use duplicates='first' or 'last' to keep one",
        ) from None
