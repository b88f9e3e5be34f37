"""The worker-quality statistics' tables as SQL (``audits.services.quality_stats`` keeps them): the
upsert the folds write with, and the campaign median's anchor, which each fold shifts and the quick
run's read walks from and moves (``worker_numbers``). Outside ``audits.services`` so that the
selectors reach it without importing the services package."""

from django.db import connection
from django.db.models import F

from audits.models import AuditStats, LabelSeconds

BIAS_FIELDS = ("n", "sx", "sxx", "so", "soo", "sxo")


def quote(name: str) -> str:
    return connection.ops.quote_name(name)


def sql(statement: str, params: list) -> list:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def upsert(model, keys: tuple, fields: tuple, rows: list, *, add: bool) -> None:
    """Insert ``rows`` (keys then fields, one list each) into ``model``'s table, or on a conflict on
    ``keys`` (a unique constraint's columns) add the fields to the row's (``add``) or replace them; in
    key order, so two writers cannot deadlock, 500 rows a statement."""
    table = quote(model._meta.db_table)
    columns = [*keys, *fields]
    sets = ", ".join(
        f"{quote(f)} = {table}.{quote(f)} + excluded.{quote(f)}" if add else f"{quote(f)} = excluded.{quote(f)}"
        for f in fields
    )
    one = "(" + ", ".join(["%s"] * len(columns)) + ")"
    rows = sorted(rows)
    for start in range(0, len(rows), 500):
        batch = rows[start : start + 500]
        sql(
            f"INSERT INTO {table} ({', '.join(quote(c) for c in columns)}) VALUES {', '.join([one] * len(batch))} "
            f"ON CONFLICT ({', '.join(quote(k) for k in keys)}) DO UPDATE SET {sets}",
            [x for row in batch for x in row],
        )


def median_anchor_shift(*, campaign_id: int, rows: list) -> None:
    """Count the fold's new ``LabelSeconds`` rows ``(seconds, label id)`` into the campaign median's
    anchor (in the fold's transaction): those that order before the anchor raise its rank, all of
    them the number of rows. The row is written even without an anchor (which a read then counts
    for itself): a read that overlapped the fold must meet the write and be retried, or it would
    place an anchor that misses the fold's rows."""
    if not rows:
        return
    at = (
        AuditStats.objects.filter(campaign_id=campaign_id, median_seconds_at__isnull=False)
        .values_list("median_seconds_at", "median_label_at")
        .first()
    )
    before = 0 if at is None else sum(1 for row in rows if tuple(row) < at)
    AuditStats.objects.filter(campaign_id=campaign_id).update(
        median_rank_at=F("median_rank_at") + before, median_of=F("median_of") + len(rows)
    )


def campaign_median_seconds(*, campaign_id: int, n: int) -> float | None:
    """The median seconds per label over the campaign's ``n`` timed labels (None without any): the
    mean of the rows of rank ⌊(n − 1)/2⌋ and ⌊n/2⌋ (from 0) in the order (seconds, label).

    An offset from the fastest label walks half the campaign's rows, which at a million labels was
    half of a quick run's time. So each read leaves an anchor on ``AuditStats``: the row of the lower
    middle rank, that rank and the number of rows. Each fold counts its new rows into it
    (:func:`median_anchor_shift`), and the next read walks from the anchor to the new middle: its cost
    follows the labels since the last read, not the campaign. The rows must number ``n`` (else
    ``ValueError``: the statistics disagree with their rows).

    Call it inside the statistics read's transaction (REPEATABLE READ on PostgreSQL): the rows it
    walks are those the read's counts include (the fold inserts both together). A rebuild clears the
    anchor; without one, the read counts the rows and walks from the fastest.
    """
    table = quote(LabelSeconds._meta.db_table)
    anchor = (
        AuditStats.objects.filter(campaign_id=campaign_id)
        .values_list("median_seconds_at", "median_label_at", "median_rank_at", "median_of")
        .first()
    )
    at, rank_at = None, 0
    if anchor is not None and anchor[0] is not None:
        at, rank_at, total = (anchor[0], anchor[1]), anchor[2], anchor[3]
    else:
        total = sql(f"SELECT COUNT(*) FROM {table} WHERE campaign_id = %s", [campaign_id])[0][0]
    if total != n:
        raise ValueError(f"label seconds ({total} rows) do not match the worker-quality counts ({n})")
    if n == 0:
        return None
    lo, hi = (n - 1) // 2, n // 2
    if at is None or lo >= rank_at:  # forward from the anchor (or the fastest row) to lo, then hi
        middle = _walk(table, campaign_id, at, forward=True, offset=lo - rank_at, count=hi - lo + 1)
    elif hi < rank_at:  # backward from the row before the anchor to hi, then lo
        middle = _walk(table, campaign_id, at, forward=False, offset=rank_at - 1 - hi, count=hi - lo + 1)[::-1]
    else:  # lo is the row before the anchor, hi the anchor
        middle = _walk(table, campaign_id, at, forward=False, offset=0, count=1)
        middle += _walk(table, campaign_id, at, forward=True, offset=0, count=1)
    AuditStats.objects.filter(campaign_id=campaign_id).update(
        median_seconds_at=middle[0][0], median_label_at=middle[0][1], median_rank_at=lo, median_of=n
    )
    return (middle[0][0] + middle[-1][0]) / 2


def _walk(table: str, campaign_id: int, at: tuple | None, *, forward: bool, offset: int, count: int) -> list:
    """``count`` rows ``(seconds, label id)`` from ``offset`` rows past the anchor ``at`` (itself the
    first forward, the row before it the first backward) in the order (seconds, label), by index;
    without an anchor, forward from the fastest row."""
    where, params = "campaign_id = %s", [campaign_id]
    if at is not None:
        where, params = where + f" AND (seconds, label_id) {'>=' if forward else '<'} (%s, %s)", [*params, *at]
    order = "seconds, label_id" if forward else "seconds DESC, label_id DESC"
    rows = sql(
        f"SELECT seconds, label_id FROM {table} WHERE {where} ORDER BY {order} LIMIT %s OFFSET %s",
        [*params, count, offset],
    )
    if len(rows) != count:  # the anchor's rank is off: the quick run marks a rebuild, which clears it
        raise ValueError("label seconds do not match their anchor")
    return rows
