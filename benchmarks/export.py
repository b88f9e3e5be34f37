"""Cost of the labels export in each format (CSV, JSONL, Parquet): time, throughput, size and memory.

Run from the repository root::

    .venv/bin/python benchmarks/export.py                          # 100,000 and 1,000,000 labels
    .venv/bin/python benchmarks/export.py --sizes 100000 --db /tmp/export-bench.sqlite3

A SQLite database (a throwaway one in a temporary folder, or --db, kept and reused: a campaign of the
wanted size already in it is not built again), migrated with ``manage.py migrate``. For each size, one
binary campaign (k = 5, --workers workers) whose labels are written in bulk as label_submit would leave
them (``build``: SQL from a counter). Each format of each size is then streamed in a new
process, so that its memory is its own: ``export_chunks`` drained to the end, the chunks counted as
the bytes a download sends (text encoded as UTF-8). Measured:

- ``time``: wall clock of the whole stream (``time.perf_counter``): the query, the rows, the encoding;
- ``rows/s``: exported rows over that time;
- ``size``: the file's bytes;
- ``RSS, first use``: the growth of the process's peak RSS (``ru_maxrss``) over an export of the
  campaign's first label alone, in the same format, run first: what using the libraries costs once
  (for Parquet, pyarrow's compute and Parquet code and buffers), whatever the size;
- ``peak RSS growth``: the peak RSS after the full stream minus after that first export: what the
  export itself held at its peak. Constant in the number of labels means the export streams.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FORMATS = ("csv", "jsonl", "parquet")


def campaign_of_size(n_labels: int, *, n_workers: int) -> int:
    """The id of a campaign holding exactly ``n_labels`` labels: one already in the database, or a new one."""
    from django.contrib.auth import get_user_model
    from django.db.models import Count

    from annotation.models import Campaign

    found = Campaign.objects.annotate(n=Count("labels")).filter(n=n_labels).values_list("pk", flat=True).first()
    if found is not None:
        return found
    owner, _ = get_user_model().objects.get_or_create(username="bench-owner")
    started = time.perf_counter()
    campaign_id = build(n_labels, n_workers=n_workers, owner=owner)
    print(f"built {n_labels:,} labels in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return campaign_id


# The rows a full campaign leaves (prompts, k slots each, a submitted lease and a label per slot,
# participations), written by SQLite itself from a counter: a million labels through model instances
# would take longer than the exports they are here to measure. Parameters: see ``build``.
BUILD_SQL = (
    """WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < %(more_prompts)s)
    INSERT INTO annotation_prompt (external_id, text, options, gold, "group", n_labels, batch_id, campaign_id,
                                   is_control)
    SELECT 'p' || i, 'Prompt ' || i || ': is this statement true?', '[]', NULL, '', %(k)s, %(batch)s,
           %(campaign)s, 0 FROM seq""",
    """WITH RECURSIVE idx(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM idx WHERE j < %(k)s - 1)
    INSERT INTO annotation_slot ("index", rand, priority, filled, campaign_id, prompt_id)
    SELECT j, abs(random()) / 9223372036854775807.0, 0, 0, %(campaign)s, p.id
    FROM annotation_prompt p, idx WHERE p.campaign_id = %(campaign)s AND p.external_id != 'p0'""",
    # k consecutive workers (modulo their number) per prompt: never one twice on a prompt.
    """INSERT INTO annotation_lease (status, created_at, expires_at, campaign_id, prompt_id, worker_id, slot_id)
    SELECT 'submitted', datetime('2026-01-01', '+' || s.id || ' seconds'),
           datetime('2026-01-02', '+' || s.id || ' seconds'), %(campaign)s, s.prompt_id,
           %(first_worker)s + (s.prompt_id * %(k)s + s."index") %% %(workers)s, s.id
    FROM annotation_slot s WHERE s.campaign_id = %(campaign)s""",
    """INSERT INTO annotation_label (value, client_token, leased_at, created_at, campaign_id, lease_id, prompt_id,
                                  slot_id, worker_id, void_reason, is_control)
    SELECT abs(random()) %% 2, 'b' || l.id, l.created_at, datetime(l.created_at, '+' || (1 + l.id %% 60) || ' seconds'),
           %(campaign)s, l.id, l.prompt_id, l.slot_id, l.worker_id, '', 0
    FROM annotation_lease l WHERE l.campaign_id = %(campaign)s""",
    """UPDATE annotation_slot SET filled = 1,
    lease_id = (SELECT l.id FROM annotation_lease l WHERE l.slot_id = annotation_slot.id)
    WHERE campaign_id = %(campaign)s""",
    # p0, imported through the service, came with empty slots.
    """UPDATE annotation_prompt SET n_labels = %(k)s WHERE campaign_id = %(campaign)s AND external_id = 'p0'""",
    """INSERT INTO annotation_participation (n_labels, joined_at, campaign_id, worker_id)
    SELECT count(*), min(leased_at), %(campaign)s, worker_id FROM annotation_label
    WHERE campaign_id = %(campaign)s GROUP BY worker_id""",
)


def build(n_labels: int, *, n_workers: int, owner, k: int = 5) -> int:
    """A launched binary campaign of ``n_labels`` labels (``n_labels / k`` prompts, each labeled by k of
    ``n_workers`` workers): the campaign and its first prompt through the services, the rest in bulk."""
    from django.db import connection, transaction

    from annotation import services
    from annotation.models import Prompt, Worker

    campaign = services.campaign_create(owner=owner, title=f"Export benchmark {n_labels}", k=k)
    services.prompts_import(campaign=campaign, data=b'{"id": "p0", "text": "Prompt 0"}\n', filename="bench.jsonl")
    campaign = services.campaign_transition(campaign=campaign, action="launch")
    workers = Worker.objects.bulk_create(
        Worker(channel="bench", external_id=f"{campaign.pk}-{i}") for i in range(n_workers)
    )
    first_worker = min(w.pk for w in workers)
    assert max(w.pk for w in workers) - first_worker == n_workers - 1, "worker ids are not consecutive"
    params = {
        "campaign": campaign.pk,
        "batch": Prompt.objects.get(campaign=campaign).batch_id,
        "more_prompts": n_labels // k - 1,
        "k": k,
        "first_worker": first_worker,
        "workers": n_workers,
    }
    with transaction.atomic(), connection.cursor() as cursor:
        for statement in BUILD_SQL:
            cursor.execute(statement, params)
    return campaign.pk


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def exported_bytes(chunks) -> int:
    """Drain an export; the bytes a download of it sends."""
    return sum(len(chunk.encode() if isinstance(chunk, str) else chunk) for chunk in chunks)


def measure(campaign_id: int, fmt: str) -> dict:
    """Stream one export to its end in this process; its time, size and peak RSS growth, after the
    growth of a one-label export of the same format (the libraries' first use, the same for any N)."""
    from annotation.exporting import export_chunks
    from annotation.models import Campaign, Label

    campaign = Campaign.objects.get(pk=campaign_id)
    rows = campaign.labels.count()
    before = peak_rss_mib()
    one = Label.objects.filter(pk=campaign.labels.order_by("pk").values("pk")[:1])
    exported_bytes(export_chunks(campaign=campaign, fmt=fmt, labels=one))
    warm = peak_rss_mib()
    started = time.perf_counter()
    size = exported_bytes(export_chunks(campaign=campaign, fmt=fmt))
    seconds = time.perf_counter() - started
    return {
        "rows": rows,
        "seconds": seconds,
        "bytes": size,
        "first_use_mib": warm - before,
        "rss_growth_mib": peak_rss_mib() - warm,
    }


def django_setup() -> None:
    import django

    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    django.setup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000], help="labels per campaign")
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--formats", nargs="+", default=list(FORMATS), choices=FORMATS)
    parser.add_argument("--db", type=Path, help="SQLite file to build in and reuse (default: a throwaway one)")
    parser.add_argument("--measure", nargs=2, metavar=("CAMPAIGN_ID", "FORMAT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:  # a child process: one export, its figures as JSON
        django_setup()
        print(json.dumps(measure(int(args.measure[0]), args.measure[1])))
        return
    with tempfile.TemporaryDirectory(prefix="chorus-export-bench-") as tmp:
        os.environ.update(CHORUS_VAR_DIR=tmp, CHORUS_SQLITE_PATH=str(args.db or Path(tmp) / "bench.sqlite3"))
        for name in ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL"):
            os.environ.pop(name, None)
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=REPO, env=os.environ, check=True)
        run(args)


def run(args) -> None:
    django_setup()
    campaigns = {n: campaign_of_size(n, n_workers=args.workers) for n in args.sizes}
    print("| labels | format | time (s) | rows/s | size (MB) | RSS, first use (MiB) | peak RSS growth (MiB) |")
    print("|---|---|---|---|---|---|---|", flush=True)
    for campaign_id in campaigns.values():
        for fmt in args.formats:
            child = [sys.executable, __file__, "--measure", str(campaign_id), fmt]
            out = json.loads(subprocess.run(child, cwd=REPO, capture_output=True, text=True, check=True).stdout)
            print(
                f"| {out['rows']:,} | {fmt} | {out['seconds']:.1f} | {out['rows'] / out['seconds']:,.0f} "
                f"| {out['bytes'] / 1e6:.1f} | {out['first_use_mib']:.0f} | {out['rss_growth_mib']:.0f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
