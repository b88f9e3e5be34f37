"""Model rows from hand-written SQL, for the worker loop's statements (``services.assignment`` and the
reads it shares with the task pages, ``selectors.assignment``).

Every request of the worker loop runs the same few statements; through the ORM, compiling each
queryset into SQL and building its objects cost more CPU than the database spends answering it (about
three quarters of the web side's time per label: ``benchmarks/cycle_cost.py --profile``). So those
statements are written once as SQL, and their rows become model instances here, exactly as the ORM
would build them: the same columns, the same value converters (SQLite returns dates as text and JSON
as strings), ``Model.from_db``. What is computed once per process is the model's column list and its
converters, which depend only on the schema; no data is kept between calls.
"""

from __future__ import annotations

from functools import cache

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Model


@cache
def quote(name: str) -> str:
    # Remembered: the worker loop's statements are assembled on every request, and quoting went through
    # the connection's proxies each time (a few % of the API cycle's CPU). A process has one database
    # (settings.DATABASES), as ``Columns.sql`` already assumes.
    return connection.ops.quote_name(name)


def table(model: type[Model]) -> str:
    return quote(model._meta.db_table)


class Columns:
    """A model's concrete columns under a table alias, for a SELECT list, and the loader of those
    values of a row: ``Columns(Lease, "l")``, then ``f"SELECT {leases.sql} FROM ... l"`` and
    ``leases.load(row[:len(leases)])``."""

    def __init__(self, model: type[Model], alias: str):
        self.model, self.alias = model, alias
        self.fields = model._meta.concrete_fields
        self.attnames = [field.attname for field in self.fields]
        self.sql = ", ".join(f"{alias}.{quote(field.column)}" for field in self.fields)
        self._converters: dict[str, list] = {}  # by database vendor

    def __len__(self) -> int:
        return len(self.fields)

    def of_row(self, key: str) -> str:
        """The columns of the row whose primary key is the SQL expression ``key``, one scalar subquery
        each, in ``sql``'s order: a write's ``RETURNING`` clause can return a row of another table with
        them (SQLite's may name only the written table's columns, and only by the table's own name), so
        the write need not be followed by a read."""
        pk = quote(self.model._meta.pk.column)
        source = f"FROM {table(self.model)} {self.alias} WHERE {self.alias}.{pk} = {key}"
        return ", ".join(f"(SELECT {column} {source})" for column in self.sql.split(", "))

    def _converters_for(self, db) -> list:
        converters = self._converters.get(db.vendor)
        if converters is None:
            converters = []
            for i, field in enumerate(self.fields):
                column = field.get_col(self.alias)
                functions = db.ops.get_db_converters(column) + column.get_db_converters(db)
                if functions:
                    converters.append((i, column, functions))
            self._converters[db.vendor] = converters
        return converters

    def load(self, values) -> Model:
        """The model instance of these values (in ``sql``'s order), as a queryset would return it."""
        db = connections[DEFAULT_DB_ALIAS]  # the connection itself: each use of the proxy costs a lookup
        values = list(values)
        for i, column, functions in self._converters_for(db):
            for function in functions:
                values[i] = function(values[i], column, db)
        return self.model.from_db(db.alias, self.attnames, values)


def for_update(alias: str, *, skip_locked: bool = False) -> str:
    """A SELECT's row lock on PostgreSQL, on the rows of table ``alias`` only; none on SQLite, whose
    transactions hold the database's write lock from their BEGIN (settings)."""
    if not connection.features.has_select_for_update:
        return ""
    return f" FOR UPDATE OF {alias}" + (" SKIP LOCKED" if skip_locked else "")


def datetime_param(value):
    """A datetime as a parameter of hand-written SQL: what the ORM would send (on SQLite, naive UTC text
    in the stored format, so that comparisons order correctly)."""
    return connection.ops.adapt_datetimefield_value(value)


def fetch(statement: str, params: list) -> list:
    """The rows of a statement that returns rows (a SELECT, or a write with RETURNING). It does not ask
    the cursor whether there are any: psycopg builds ``cursor.description`` anew, a Column object per
    column, on every call, which was a tenth of the API cycle's CPU."""
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall()


def execute(statement: str, params: list) -> int:
    """Run a statement that returns no rows; how many rows it changed."""
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.rowcount
