"""Rows of dicts as a Parquet file, written one row group at a time so memory stays flat.

A column definition maps each column's name to the type of its values, ``T`` or ``T | None`` (may
be empty); the Arrow schema is derived from it (``parquet_schema``), so a file and the definition it
came from cannot disagree. ``parquet_chunks`` yields the file's bytes as each row group is written
and the footer last, for a streamed download. No Django here: the labels export and the audit report
both use it.
"""

import json
import types
from collections.abc import Iterable, Iterator
from datetime import datetime
from itertools import islice

import pyarrow as pa
import pyarrow.parquet as pq

CONTENT_TYPE = "application/vnd.apache.parquet"
#: Rows per row group: large enough for Parquet's column compression and fast scans, small enough
#: that one group (about 10 MB of labels in Arrow's form) is all the memory an export of any size needs.
ROW_GROUP_ROWS = 65_536
#: Rows turned from Python objects into Arrow columns at a time: a row as a dict of Python values takes
#: several times its Arrow form (for a label about 900 bytes against 150), so a row group is gathered
#: in Arrow form, batch by batch.
BATCH_ROWS = 8_192

# ``object`` is a JSON value of no fixed type (a number, text or a list): stored as its text (below).
_ARROW_TYPES = {
    str: pa.string(),
    int: pa.int64(),
    float: pa.float64(),
    bool: pa.bool_(),
    datetime: pa.timestamp("us", tz="UTC"),
    object: pa.string(),
}


def _column_type(annotation) -> tuple[object, bool]:
    """A column's value type and whether it may be empty, from ``T`` or ``T | None``."""
    if isinstance(annotation, types.UnionType):
        (kind,) = (arg for arg in annotation.__args__ if arg is not type(None))
        return kind, True
    return annotation, False


def parquet_schema(columns: dict[str, object]) -> pa.Schema:
    fields = []
    for name, annotation in columns.items():
        kind, nullable = _column_type(annotation)
        fields.append(pa.field(name, _ARROW_TYPES[kind], nullable=nullable))
    return pa.schema(fields)


def json_text(value) -> str | None:
    """A JSON value as text, as the CSV export writes it: a list as JSON, anything else with str()."""
    if value is None:
        return None
    return json.dumps(value, ensure_ascii=False) if isinstance(value, list) else str(value)


def _arrow_column(values: list, kind, field: pa.Field) -> pa.Array:
    if kind is object:
        return pa.array([json_text(v) for v in values], type=pa.string())
    if kind is datetime:
        # Times may come as ISO 8601 text with their offset (the labels' rows): Arrow parses it in C.
        return pa.array(values).cast(field.type)
    return pa.array(values, type=field.type)


def _record_batch(rows: list[dict], columns: dict[str, object], schema: pa.Schema) -> pa.RecordBatch:
    arrays = [
        _arrow_column([row[name] for row in rows], _column_type(columns[name])[0], schema.field(name))
        for name in columns
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _row_groups(rows: Iterable[dict], columns: dict[str, object], schema: pa.Schema, size: int) -> Iterator[pa.Table]:
    """The rows as tables of ``size`` rows (the last one shorter), each gathered from record batches of
    at most BATCH_ROWS rows: the rows' Python objects are dropped batch by batch, not held for a group."""
    rows = iter(rows)
    batches, n = [], 0
    while batch := list(islice(rows, min(BATCH_ROWS, size - n))):
        batches.append(_record_batch(batch, columns, schema))
        n += len(batch)
        if n == size:
            yield pa.Table.from_batches(batches, schema=schema)
            batches, n = [], 0
    if batches:
        yield pa.Table.from_batches(batches, schema=schema)


class _Drain:
    """The writer's file: keeps what was written until the caller takes it (``take``)."""

    closed = False

    def __init__(self):
        self._parts: list[bytes] = []

    def write(self, data) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        data, self._parts = b"".join(self._parts), []
        return data


def parquet_chunks(
    rows: Iterable[dict], columns: dict[str, object], *, row_group_rows: int = ROW_GROUP_ROWS
) -> Iterator[bytes]:
    """The rows as a Parquet file with the schema of ``columns``, in byte chunks: one per row group
    as it is written, then the footer. No rows give a valid file of the schema and no row group."""
    schema = parquet_schema(columns)
    sink = _Drain()
    writer = pq.ParquetWriter(sink, schema)
    for table in _row_groups(rows, columns, schema, row_group_rows):
        writer.write_table(table, row_group_size=row_group_rows)
        yield sink.take()
    writer.close()
    yield sink.take()
