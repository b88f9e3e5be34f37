"""The worker-quality statistics' tables as SQL (``audits.services.quality_stats`` keeps them): the
reads that the quick run's selector shares with the service that writes them, and the fold of the
pending bias deltas, which that read performs in its own transaction (``worker_numbers``). Outside
``audits.services`` so that the selectors reach it without importing the services package."""

from django.db import connection

from audits.models import LabelSeconds, WorkerBiasDelta, WorkerBiasStats

BIAS_FIELDS = ("n", "sx", "sxx", "so", "soo", "sxo")


def quote(name: str) -> str:
    return connection.ops.quote_name(name)


def sql(statement: str, params: list) -> list:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def median_seconds(campaign_id: int, n: int, worker_id: int | None = None) -> float | None:
    """The median of the campaign's (or one worker's) ``LabelSeconds`` of ``n`` rows, by index."""
    if n <= 0:
        return None
    table = quote(LabelSeconds._meta.db_table)
    where, params = "campaign_id = %s", [campaign_id]
    if worker_id is not None:
        where, params = where + " AND worker_id = %s", [*params, worker_id]
    rows = sql(
        f"SELECT seconds FROM {table} WHERE {where} ORDER BY seconds LIMIT %s OFFSET %s",
        [*params, 2 - n % 2, (n - 1) // 2],
    )
    if len(rows) != 2 - n % 2:
        raise ValueError("label seconds do not match the worker-quality counts")
    return (rows[0][0] + rows[-1][0]) / 2


def campaign_median_seconds(*, campaign_id: int, n: int) -> float | None:
    """The median seconds per label over the campaign's ``n`` timed labels (None without any)."""
    return median_seconds(campaign_id, n)


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
