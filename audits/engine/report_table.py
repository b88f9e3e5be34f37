"""The full audit report (``AuditReport.to_dict``) as one long table, for its Parquet form.

The report is a tree of sections whose shapes differ (scalars, per-worker lists, sweeps) and grow with
``SCHEMA_VERSION``; a table per section would be a second description of the report to keep in step.
Instead each leaf becomes a row addressed by its JSON Pointer (RFC 6901) into the JSON report, so every
number is a query away (``where path = '/level_noise'``, ``where section = 'accuracy'``) and nothing
is lost but empty lists and objects, which hold no value.

>>> rows = report_rows({"n_labels": 6, "accuracy": [{"worker": "a:1", "ci": [0.5, None]}], "notes": {}})
>>> [(row["section"], row["path"], row["number"], row["text"]) for row in rows]
[('n_labels', '/n_labels', 6.0, None), ('accuracy', '/accuracy/0/worker', None, 'a:1'),
 ('accuracy', '/accuracy/0/ci/0', 0.5, None), ('accuracy', '/accuracy/0/ci/1', None, None)]
"""

from collections.abc import Iterator

#: One row per leaf: its top-level key, its JSON Pointer, and its value in the one column of its
#: JSON type (numbers, integers included, as float64: exact up to 2**53); all three empty for null.
REPORT_COLUMNS: dict[str, object] = {
    "section": str,
    "path": str,
    "number": float | None,
    "text": str | None,
    "flag": bool | None,
}


def _pointer_token(key) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def _leaf(section: str, path: str, value) -> dict:
    row = {"section": section, "path": path, "number": None, "text": None, "flag": None}
    if isinstance(value, bool):  # before numbers: a bool is an int to Python
        row["flag"] = value
    elif isinstance(value, int | float):
        row["number"] = float(value)
    elif value is not None:
        row["text"] = str(value)
    return row


def _leaves(section: str, path: str, value) -> Iterator[dict]:
    if isinstance(value, dict | list):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, child in items:
            yield from _leaves(section, f"{path}/{_pointer_token(key)}", child)
    else:
        yield _leaf(section, path, value)


def report_rows(report: dict) -> Iterator[dict]:
    """The report's leaves in its key order, one row each (``REPORT_COLUMNS``)."""
    for section, value in report.items():
        yield from _leaves(section, "/" + _pointer_token(section), value)
