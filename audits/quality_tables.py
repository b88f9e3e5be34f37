"""The worker-quality statistics' tables as SQL (``audits.services.quality_stats`` keeps them): the
two writes the quick run's read performs in its own transaction (``worker_numbers``), the fold of the
pending bias deltas and the campaign median's walk (which ranks the label seconds that came since and
moves its anchor). Outside ``audits.services`` so that the selectors reach it without importing the
services package."""

from django.db import connection

from audits.models import AuditStats, LabelSeconds, WorkerBiasDelta, WorkerBiasStats

BIAS_FIELDS = ("n", "sx", "sxx", "so", "soo", "sxo")


def quote(name: str) -> str:
    return connection.ops.quote_name(name)


def sql(statement: str, params: list) -> list:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def campaign_median_seconds(*, campaign_id: int, n: int) -> float | None:
    """The median seconds per label over the campaign's ``n`` timed labels (None without any): the
    mean of the rows of rank ⌊(n − 1)/2⌋ and ⌊n/2⌋ (from 0) in the order (seconds, label).

    An offset from the fastest label walks half the campaign's rows, which at a million labels was
    half of a quick run's time. So each read leaves an anchor on ``AuditStats``: the row of the lower
    middle rank, that rank and the number of rows. The next read marks the rows that came since as
    ranked (``UPDATE … RETURNING`` of the unranked ones, by a partial index), adds those that order
    before the anchor to its rank, and walks from the anchor to the new middle: its cost follows the
    labels since the last read, not the campaign. The rows ranked must then number ``n`` (else
    ``ValueError``: the statistics disagree with their rows).

    Call it inside the statistics read's transaction (REPEATABLE READ on PostgreSQL): the rows it
    ranks and walks are those the read's counts include, and two reads that rank the same rows at
    once conflict and one is retried (``worker_numbers.worker_quality``). A rebuild inserts its rows
    ranked and clears the anchor; without one, the read counts the rows and walks from the fastest.
    """
    table = quote(LabelSeconds._meta.db_table)
    new = sql(
        # "NOT ranked", the partial index's own predicate: SQLite uses the index only for that spelling.
        f"UPDATE {table} SET ranked = TRUE WHERE campaign_id = %s AND NOT ranked RETURNING seconds, label_id",
        [campaign_id],
    )
    anchor = (
        AuditStats.objects.filter(campaign_id=campaign_id)
        .values_list("median_seconds_at", "median_label_at", "median_rank_at", "median_of")
        .first()
    )
    at, rank_at = None, 0
    if anchor is not None and anchor[0] is not None:
        at, total = (anchor[0], anchor[1]), anchor[3] + len(new)
        rank_at = anchor[2] + sum(1 for row in new if tuple(row) < at)
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


def bias_deltas_fold(*, campaign_id: int) -> None:
    """Fold the campaign's pending ``WorkerBiasDelta`` rows into ``WorkerBiasStats`` and delete them,
    in the caller's transaction (the quick run's read)."""
    deltas = sql(
        f"DELETE FROM {quote(WorkerBiasDelta._meta.db_table)} WHERE campaign_id = %s "
        f"RETURNING worker_id, k, {', '.join(BIAS_FIELDS)}",
        [campaign_id],
    )
    acc: dict[tuple[int, int], list] = {}
    for worker_id, k, *row in deltas:
        total = acc.setdefault((worker_id, k), [0] * 6)
        for i, v in enumerate(row):
            total[i] += v
    table = quote(WorkerBiasStats._meta.db_table)
    sets = ", ".join(f"{f} = {table}.{f} + excluded.{f}" for f in BIAS_FIELDS)
    rows = [[campaign_id, w, k, *row] for (w, k), row in sorted(acc.items()) if any(row)]
    for start in range(0, len(rows), 500):  # in key order: two folds cannot deadlock
        batch = rows[start : start + 500]
        sql(
            f"INSERT INTO {table} (campaign_id, worker_id, k, {', '.join(BIAS_FIELDS)}) VALUES "
            + ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s, %s)"] * len(batch))
            + f" ON CONFLICT (campaign_id, worker_id, k) DO UPDATE SET {sets}",
            [x for row in batch for x in row],
        )
