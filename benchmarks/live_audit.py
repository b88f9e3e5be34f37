"""Live-audit benchmark: freshness of the audit under a sustained label stream, at two campaign sizes.

One command::

    .venv/bin/python benchmarks/live_audit.py                         # 10k and 1M labels, 200 labels/s, 60 s
    .venv/bin/python benchmarks/live_audit.py --sizes 10000 --seconds 20

Production configuration: PostgreSQL (its own database --database on --postgres, dropped at the end)
and its own redis-server (cache and Celery broker) on a free port; the Celery worker is the
production command ``celery -A config worker -B --concurrency 2 -O fair``. For each size in --sizes:

* seeds one campaign (k = --k, binary labels, --workers crowd workers with their own error rates)
  holding that many labels, straight into the tables (COPY / INSERT … SELECT), then builds its audit
  statistics with ``audits.services.stats_rebuild``, runs the first quick and full audits, vacuums
  the database and checkpoints (as autovacuum and PostgreSQL would have, long before a real campaign
  reached that size);
* starts the Celery worker and streams --rate labels/s for --seconds from --processes processes
  (one database connection each, like web processes): --batches-per-second transactions a second
  in all, each inserting the next labels on open prompts and marking each for the quick run's fold
  with the real ``label_stats_add`` (whose on-commit hook schedules the real debounced recomputation);
* measures, for every label, the *freshness*: from its commit to the ``computed_at`` of the first
  quick snapshot whose watermark includes it; and the Celery CPU per refresh (the task's own
  process CPU, stored on each snapshot, and the worker processes' CPU from /proc over the stream).

The stream skips lease_acquire/label_submit's validation and assignment bookkeeping and commits a
few labels per transaction: on this 2-core machine their ORM work alone (~10 ms of CPU per label,
shared with PostgreSQL, the worker and whatever else runs) cannot sustain 200 labels/s. What the live
audit sees is the same: committed labels, each marked for the fold in its transaction, a scheduling
trigger per commit. ``--submit-path`` instead drives the real lease_acquire + label_submit from --processes
processes as fast as they go (the rate is reported). The machine's busy cores during the stream are
reported too: a run on a loaded machine shows it.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC
from pathlib import Path

from assignment import copy_rows
from stack import REPO, celery_worker_argv, free_port, redis_server_argv

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
sys.path.insert(0, str(REPO))


def process_tree_cpu(pid: int) -> float:
    """User + system CPU seconds of a process and its descendants that are still alive (plus the
    children it has waited for)."""
    total = 0.0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15]) / CLOCK_TICKS  # utime stime cutime cstime
            todo += [int(c) for c in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def machine_busy() -> float:
    """Busy CPU seconds of the whole machine, all cores, every process (ours and anybody else's)."""
    user, nice, system, idle, iowait, irq, softirq, steal = map(int, Path("/proc/stat").read_text().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS


LOAD_BEFORE: list[float] = []


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))]


# --- processes ------------------------------------------------------------------------------------
class Services:
    def __init__(self, workdir: Path, env: dict):
        self.workdir, self.env = workdir, env
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str, argv: list[str]) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "ab")
        proc = subprocess.Popen(
            argv, cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs[name] = proc
        return proc

    def stop(self, name: str) -> None:
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)  # our own process group only
            proc.wait(timeout=5)

    def stop_all(self) -> None:
        for name in list(self.procs)[::-1]:
            self.stop(name)

    def start_worker(self) -> subprocess.Popen:
        proc = self.start("celery", celery_worker_argv(self.workdir, f"bench-{uuid.uuid4().hex[:6]}"))
        deadline = time.monotonic() + 90
        log = self.workdir / "celery.log"
        while time.monotonic() < deadline:
            if " ready." in log.read_text(errors="replace"):
                return proc
            if proc.poll() is not None:
                raise RuntimeError("the celery worker exited:\n" + log.read_text(errors="replace")[-3000:])
            time.sleep(0.2)
        raise RuntimeError("the celery worker did not start")


# --- seeding --------------------------------------------------------------------------------------

VALUE_SQL = (
    "CASE WHEN ((l.prompt_id * 1103515245 + l.worker_id * 12345) % 100) < ((l.worker_id * 37) % 30) "
    "THEN 1 - (l.prompt_id % 2) ELSE l.prompt_id % 2 END"
)


def label_value(prompt_id: int, worker_id: int) -> int:
    """The crowd: prompt truth = id parity; worker w errs on (37 w mod 30) % of prompts (same as VALUE_SQL)."""
    wrong = ((prompt_id * 1103515245 + worker_id * 12345) % 100) < ((worker_id * 37) % 30)
    return 1 - prompt_id % 2 if wrong else prompt_id % 2


def seed(*, n_labels: int, k: int, n_workers: int, stream_labels: int, owner, n_controls: int = 0, rules: bool = True):
    """A launched campaign holding ``n_labels`` labels (k per prompt) and open prompts for the stream;
    with ``n_controls`` control prompts, every worker has answered the first half of them and holds a
    lease on each of the others (the stream answers them), and with ``rules`` two active quality rules
    (control accuracy below 0.8 after 10 controls, an answer's share above 95 % after 20 labels: flag)."""
    from django.db import connection, transaction

    from annotation import services
    from annotation.models import ImportBatch, Label, Lease, Participation, Prompt, QualityRule, Slot, Worker

    n_full = n_labels // k
    n_open = stream_labels // k + 1
    campaign = services.campaign_create(owner=owner, title=f"Live audit benchmark {n_labels}", k=k)
    batch = ImportBatch.objects.create(
        campaign=campaign, filename="bench.jsonl", sha256=uuid.uuid4().hex * 2, n_prompts=n_full + n_open + n_controls
    )
    c = campaign.pk
    now = time.strftime("%Y-%m-%d %H:%M:%S+00", time.gmtime())
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        raw = cursor.cursor
        raw.execute("SET LOCAL session_replication_role = replica")  # consistent by construction
        copy_rows(
            raw,
            Prompt._meta.db_table,
            'campaign_id, batch_id, external_id, text, options, gold, "group", is_control, n_labels',
            (
                f"{c}\t{batch.pk}\tb{i}\tStatement {i}.\t[]\t{i % 2}\t\tf\t{k if i < n_full else 0}\n"
                for i in range(n_full + n_open)
            ),
        )
        copy_rows(
            raw,
            Prompt._meta.db_table,
            'campaign_id, batch_id, external_id, text, options, gold, "group", is_control, n_labels',
            (f"{c}\t{batch.pk}\tc{i}\tControl {i}.\t[]\t{i % 2}\t\tt\t0\n" for i in range(n_controls)),
        )
        copy_rows(
            raw,
            Worker._meta.db_table,
            "channel, external_id, created_at",
            (f"bench\t{c}-{i}\t{now}\n" for i in range(n_workers)),
        )
        raw.execute(
            f"SELECT id FROM {Worker._meta.db_table} WHERE channel = 'bench' AND external_id LIKE %s ORDER BY id",
            [f"{c}-%"],
        )
        worker_ids = [r[0] for r in raw.fetchall()]
        raw.execute(
            f"SELECT id, n_labels FROM {Prompt._meta.db_table} WHERE campaign_id = %s AND NOT is_control ORDER BY id",
            [c],
        )
        prompts = raw.fetchall()
        rand = random.Random(c).random
        copy_rows(
            raw,
            Slot._meta.db_table,
            "campaign_id, prompt_id, index, rand, priority, filled",
            (f"{c}\t{p}\t{i}\t{rand()!r}\t{n}\t{'t' if n else 'f'}\n" for p, n in prompts for i in range(k)),
        )
        raw.execute(
            f"INSERT INTO {Lease._meta.db_table} "
            "(campaign_id, prompt_id, worker_id, slot_id, status, created_at, expires_at) "
            f"SELECT s.campaign_id, s.prompt_id, (%s::bigint[])[1 + ((s.prompt_id * 7 + s.index) %% %s)], s.id, "
            f"CASE WHEN s.filled THEN 'submitted' ELSE 'active' END, now(), now() + interval '1 day' "
            f"FROM {Slot._meta.db_table} s WHERE s.campaign_id = %s",
            [worker_ids, n_workers, c],
        )
        raw.execute(
            f"UPDATE {Slot._meta.db_table} s SET lease_id = l.id, lease_expires_at = l.expires_at "
            f"FROM {Lease._meta.db_table} l WHERE l.slot_id = s.id AND s.campaign_id = %s AND NOT s.filled",
            [c],
        )
        raw.execute(
            f"INSERT INTO {Label._meta.db_table} "
            "(campaign_id, prompt_id, worker_id, lease_id, slot_id, is_control, value, "
            "client_token, leased_at, created_at, void_reason) "
            "SELECT l.campaign_id, l.prompt_id, l.worker_id, l.id, l.slot_id, false, "
            f"to_jsonb({VALUE_SQL.replace('%', '%%')}), 'seed-' || l.id, l.created_at, l.created_at, '' "
            f"FROM {Lease._meta.db_table} l WHERE l.campaign_id = %s AND l.status = 'submitted'",
            [c],
        )
        if n_controls:  # every worker: the first half of the controls answered, a lease on the rest
            raw.execute(
                f"INSERT INTO {Lease._meta.db_table} "
                "(campaign_id, prompt_id, worker_id, slot_id, status, created_at, expires_at) "
                "SELECT %s, p.id, w, NULL, CASE WHEN p.n <= %s THEN 'submitted' ELSE 'active' END, now(), "
                "now() + interval '1 day' FROM unnest(%s::bigint[]) AS w CROSS JOIN (SELECT id, "
                f"row_number() OVER (ORDER BY id) AS n FROM {Prompt._meta.db_table} "
                "WHERE campaign_id = %s AND is_control) p",
                [c, n_controls // 2, worker_ids, c],
            )
            raw.execute(
                f"INSERT INTO {Label._meta.db_table} "
                "(campaign_id, prompt_id, worker_id, lease_id, slot_id, is_control, value, "
                "client_token, leased_at, created_at, void_reason) "
                "SELECT l.campaign_id, l.prompt_id, l.worker_id, l.id, NULL, true, "
                f"to_jsonb({VALUE_SQL.replace('%', '%%')}), 'seed-' || l.id, l.created_at, l.created_at, '' "
                f"FROM {Lease._meta.db_table} l WHERE l.campaign_id = %s AND l.status = 'submitted' "
                "AND l.slot_id IS NULL",
                [c],
            )
        raw.execute(
            f"INSERT INTO {Participation._meta.db_table} (campaign_id, worker_id, n_labels, joined_at) "
            f"SELECT %s, w, (SELECT count(*) FROM {Label._meta.db_table} "
            "WHERE campaign_id = %s AND worker_id = w), now() "
            f"FROM unnest(%s::bigint[]) AS w",
            [c, c, worker_ids],
        )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    if rules:
        for metric, threshold, min_labels in (("control_accuracy", 0.8, 10), ("straight_lining", 0.95, 20)):
            QualityRule.objects.create(
                campaign=campaign, metric=metric, threshold=threshold, min_labels=min_labels, action="flag"
            )
    return services.campaign_transition(campaign=campaign, action="launch")


# --- the stream -----------------------------------------------------------------------------------
def stream(campaign, *, rate: float, seconds: float, batches_per_second: float, processes: int = 3) -> list[float]:
    """Commit ``rate`` labels/s for ``seconds`` from ``processes`` forked processes (one connection
    each, like web processes); return the commit time of each label."""
    import multiprocessing

    from django.db import connection

    from annotation.models import Lease

    leases = list(
        Lease.objects.filter(campaign=campaign, status=Lease.Status.ACTIVE, slot__isnull=False)
        .order_by("prompt_id", "slot__index")
        .values_list("id", "prompt_id", "worker_id", "slot_id", "created_at")
    )
    # Control leases (no slot) spread evenly through the stream, about one label in ten.
    control_leases = list(
        Lease.objects.filter(campaign=campaign, status=Lease.Status.ACTIVE, slot__isnull=True)
        .order_by("worker_id", "prompt_id")
        .values_list("id", "prompt_id", "worker_id", "slot_id", "created_at")
    )
    random.Random(campaign.pk).shuffle(control_leases)
    control_leases = control_leases[: len(leases) // 9]
    if control_leases:
        step = len(leases) // len(control_leases)
        mixed = []
        for i, lease in enumerate(leases):
            mixed.append(lease)
            if i % step == step - 1 and control_leases:
                mixed.append(control_leases.pop())
        leases = mixed
    connection.close()
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    t0 = time.monotonic() + 1.0

    def run(n):
        import resource

        out: list = []
        try:
            # Each process labels its own prompts (as concurrent workers mostly do: the assignment
            # spreads them over the campaign), one prompt's slots after the other.
            mine = [lease for lease in leases if lease[1] % processes == n]
            _stream_thread(
                campaign,
                mine,
                rate / processes,
                seconds,
                batches_per_second / processes,
                out,
                t0 + n / batches_per_second,
            )
        except BaseException as exc:  # the parent must hear of it, not wait forever
            queue.put(exc.__class__.__name__ + ": " + str(exc))
            raise
        queue.put((out, BATCH_SECONDS, resource.getrusage(resource.RUSAGE_SELF)))

    procs = [ctx.Process(target=run, args=(n,)) for n in range(processes)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=seconds + 300) for _ in procs]
    for p in procs:
        p.join()
    failed = [r for r in results if isinstance(r, str)]
    if failed:
        raise RuntimeError(f"a stream process failed: {failed}")
    STREAM_CPU.append(sum(r[2].ru_utime + r[2].ru_stime for r in results))
    BATCH_SECONDS.extend(x for r in results for x in r[1])
    return sorted(x for r in results for x in r[0])


STREAM_CPU: list[float] = []


def _stream_thread(campaign, leases, rate, seconds, batches_per_second, out, start):
    from django.db import connection, transaction
    from django.db.models import F
    from django.utils import timezone

    from annotation.models import Label, Lease, Prompt, Slot
    from audits.services import label_stats_add

    interval = 1.0 / batches_per_second
    per_batch = rate / batches_per_second
    i = b = 0
    committed = []  # commit times, one per batch (appended by the batch's first on-commit callback)
    while time.monotonic() - start < seconds and i < len(leases):
        due = start + b * interval
        if due > time.monotonic():
            time.sleep(due - time.monotonic())
        n = round((b + 1) * per_batch) - round(b * per_batch)
        b += 1
        chunk = leases[i : i + n]
        i += n
        if not chunk:
            continue
        began = time.perf_counter()
        with transaction.atomic(durable=True):
            transaction.on_commit(lambda: committed.append(time.time()))  # first callback: the commit time
            now = timezone.now()
            labels = Label.objects.bulk_create(
                [
                    Label(
                        campaign=campaign,
                        prompt_id=p,
                        worker_id=w,
                        lease_id=lid,
                        slot_id=s,
                        is_control=s is None,
                        value=label_value(p, w),
                        client_token=f"stream-{lid}",
                        leased_at=at,
                        created_at=now,
                    )
                    for lid, p, w, s, at in chunk
                ]
            )
            Lease.objects.filter(pk__in=[x[0] for x in chunk]).update(status=Lease.Status.SUBMITTED)
            Slot.objects.filter(pk__in=[x[3] for x in chunk if x[3] is not None]).update(filled=True)
            for label in sorted(labels, key=lambda x: x.worker_id):  # row locks in one order (no deadlock)
                Prompt.objects.filter(pk=label.prompt_id).update(n_labels=F("n_labels") + 1)
                label_stats_add(label=label)
        out += [committed[-1]] * len(labels)
        BATCH_SECONDS.append(time.perf_counter() - began)
    connection.close()


BATCH_SECONDS: list[float] = []


def submit_path(campaign, *, processes: int, seconds: float) -> list[float]:
    """The real lease_acquire + label_submit, from ``processes`` forked processes, as fast as they go.
    A label's time is taken when label_submit returns (after its commit and its on-commit scheduling)."""
    import multiprocessing

    from django.db import connection

    connection.close()
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()

    def run(n):
        from annotation import services
        from annotation.models import Lease, Worker

        workers = list(Worker.objects.filter(channel="bench", external_id__startswith=f"{campaign.pk}-")[n::processes])
        rng = random.Random(n)
        out = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            w = rng.choice(workers)
            lease = services.lease_acquire(campaign=campaign, worker=w)
            if not isinstance(lease, Lease):
                continue
            services.label_submit(
                lease_id=lease.pk, worker=w, value=label_value(lease.prompt_id, w.pk), client_token=f"sp{lease.pk}"
            )
            out.append(time.time())
        queue.put(out)

    procs = [ctx.Process(target=run, args=(n,)) for n in range(processes)]
    for p in procs:
        p.start()
    results = [queue.get() for _ in procs]
    for p in procs:
        p.join()
    return sorted(x for r in results for x in r)


# --- one size -------------------------------------------------------------------------------------
def run_size(args, size: int, services: Services, owner) -> dict:
    from django.db import connection

    from audits import services as audit_services
    from audits.models import AuditSnapshot

    n_workers = args.workers or max(50, size // 1000)
    t = time.perf_counter()
    campaign = seed(
        n_labels=size,
        k=args.k,
        n_workers=n_workers,
        stream_labels=int(args.rate * args.seconds * 1.2) + 100,
        owner=owner,
        n_controls=args.controls,
        rules=not args.no_rules,
    )
    seeded = time.perf_counter() - t
    t = time.perf_counter()
    audit_services.stats_rebuild(campaign_id=campaign.pk)
    rebuilt = time.perf_counter() - t
    quick0 = audit_services.audit_refresh(campaign_id=campaign.pk)
    t = time.perf_counter()
    full0 = audit_services.audit_full(campaign_id=campaign.pk)
    full_seconds = time.perf_counter() - t
    print(
        f"  size {size}: seeded in {seeded:.0f} s, statistics rebuilt in {rebuilt:.1f} s, first quick audit "
        f"{quick0.duration_ms:.0f} ms, first full audit {full_seconds:.1f} s",
        flush=True,
    )
    if args.profile:
        profile_refreshes(campaign, args.profile)
    # A campaign that grew to this size over hours was vacuumed and checkpointed meanwhile: without
    # this, autovacuum passes over the freshly seeded million rows during the stream (seconds of both
    # cores), then a checkpoint writes them out, and the stream measures that, not the live audit.
    t = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
        cursor.execute("CHECKPOINT")
    print(f"  vacuumed and checkpointed in {time.perf_counter() - t:.0f} s", flush=True)
    connection.close()

    worker = services.start_worker()
    time.sleep(2)
    LOAD_BEFORE.append(os.getloadavg()[0])
    cpu0, wall0, busy0 = process_tree_cpu(worker.pid), time.time(), machine_busy()
    if args.submit_path:
        labels = submit_path(campaign, processes=args.processes, seconds=args.seconds)
    else:
        BATCH_SECONDS.clear()
        labels = stream(
            campaign,
            rate=args.rate,
            seconds=args.seconds,
            batches_per_second=args.batches_per_second,
            processes=args.processes,
        )
    wall1 = time.time()
    from audits.selectors import campaign_totals, labels_waiting

    def caught_up() -> bool:  # every label folded, and a snapshot of them all
        if labels_waiting(campaign_id=campaign.pk)[0]:
            return False
        final = campaign_totals(campaign_id=campaign.pk).n_labels
        return AuditSnapshot.objects.filter(campaign=campaign, kind="quick", watermark__gte=final).exists()

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not caught_up():
        time.sleep(0.05)
    final = campaign_totals(campaign_id=campaign.pk).n_labels
    cpu1, busy1, wall2 = process_tree_cpu(worker.pid), machine_busy(), time.time()
    services.stop("celery")

    # A snapshot includes every label committed before its read instant (read_at is taken just
    # before it): a label's freshness is the earliest computed_at among snapshots read after it.
    snaps = list(
        AuditSnapshot.objects.filter(campaign=campaign, kind="quick", computed_at__gte=_dt(wall0))
        .order_by("read_at")
        .values_list("read_at", "computed_at", "cpu_ms", "duration_ms", "watermark")
    )
    reads = [s[0].timestamp() for s in snaps]
    earliest = [s[1].timestamp() for s in snaps]
    for j in range(len(earliest) - 2, -1, -1):
        earliest[j] = min(earliest[j], earliest[j + 1])
    fresh, missing = [], 0
    for committed in labels:
        j = bisect.bisect_left(reads, committed)
        if j == len(reads):
            missing += 1
            continue
        fresh.append(earliest[j] - committed)
    fulls = list(
        AuditSnapshot.objects.filter(campaign=campaign, kind="full", computed_at__gte=_dt(wall0)).values_list(
            "cpu_ms", "duration_ms"
        )
    )
    rate = len(labels) / (labels[-1] - labels[0]) if len(labels) > 1 else 0.0
    refresh_cpu = [s[2] for s in snaps]
    result = {
        "size": size,
        "labels_after": final,
        "workers": n_workers,
        "stream_labels": len(labels),
        "rate": rate,
        "seconds": wall1 - wall0,
        "fresh_p50": percentile(fresh, 0.5),
        "fresh_p95": percentile(fresh, 0.95),
        "fresh_max": max(fresh, default=float("nan")),
        "not_audited": missing,
        "refreshes": len(snaps),
        "refresh_cpu_p50_ms": percentile(refresh_cpu, 0.5),
        "refresh_cpu_p95_ms": percentile(refresh_cpu, 0.95),
        "refresh_wall_p50_ms": percentile([s[3] for s in snaps], 0.5),
        "refresh_wall_p95_ms": percentile([s[3] for s in snaps], 0.95),
        "full_runs": len(fulls),
        "full_cpu_s": sum(f[0] for f in fulls) / 1000,
        "worker_cpu_s": cpu1 - cpu0,
        "machine_busy_cores": (busy1 - busy0) / (wall2 - wall0),
        "load_before": LOAD_BEFORE[-1] if LOAD_BEFORE else None,
        "worker_cpu_per_refresh_ms": (cpu1 - cpu0) * 1000 / max(1, len(snaps)),
        "stream_cpu_ms_per_label": (STREAM_CPU[-1] * 1000 / max(1, len(labels))) if STREAM_CPU else None,
        "commit_p50_ms": percentile(BATCH_SECONDS, 0.5) * 1000,
        "commit_p95_ms": percentile(BATCH_SECONDS, 0.95) * 1000,
        "first_full_s": full_seconds,
        "first_quick_ms": quick0.duration_ms,
        "full_report_kb": len(json.dumps(full0.data)) / 1024,
    }
    return result


def profile_refreshes(campaign, n: int) -> None:
    """cProfile over n quick runs in this process (no label comes meanwhile: each run still reads and
    computes everything, and saves its snapshot), the 25 costliest functions by their own time."""
    import cProfile
    import pstats

    from audits import services as audit_services

    profiler = cProfile.Profile()
    started, cpu = time.perf_counter(), time.process_time()
    profiler.enable()
    for _ in range(n):
        audit_services.audit_refresh(campaign_id=campaign.pk)
    profiler.disable()
    print(
        f"  {n} quick runs under the profiler: {(time.perf_counter() - started) * 1000 / n:.0f} ms each, "
        f"{(time.process_time() - cpu) * 1000 / n:.0f} ms of this process's CPU",
        flush=True,
    )
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    pstats.Stats(profiler).sort_stats("cumulative").print_stats("chorus|audits|annotation", 30)
    pstats.Stats(profiler).print_callers("decode|loads")


def _dt(ts: float):
    from datetime import datetime

    return datetime.fromtimestamp(ts, tz=UTC)


def report(args, results: list[dict]) -> None:
    path = "real lease_acquire + label_submit" if args.submit_path else f"{args.rate:g} labels/s stream"
    print(
        f"\nLive audit, {path}, {args.seconds:g} s per size; PostgreSQL + Redis; "
        f"celery -A config worker -B --concurrency 2 -O fair; {os.cpu_count()} cores\n"
    )
    head = [
        "labels in campaign",
        "workers",
        "labels/s achieved",
        "freshness p50",
        "freshness p95",
        "max",
        "refreshes",
        "CPU per refresh (task) p50 / p95",
        "worker CPU per refresh",
        "full runs (CPU)",
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in results:
        print(
            f"| {r['size']:,} | {r['workers']} | {r['rate']:.0f} | {r['fresh_p50']:.3f} s | {r['fresh_p95']:.3f} s | "
            f"{r['fresh_max']:.3f} s | {r['refreshes']} | "
            f"{r['refresh_cpu_p50_ms']:.0f} / {r['refresh_cpu_p95_ms']:.0f} ms | "
            f"{r['worker_cpu_per_refresh_ms']:.0f} ms | {r['full_runs']} ({r['full_cpu_s']:.1f} s) |"
        )
    print()
    for r in results:
        print(
            f"size {r['size']:,}: first full audit {r['first_full_s']:.1f} s (report {r['full_report_kb']:.0f} KiB), "
            f"first quick audit {r['first_quick_ms']:.0f} ms; refresh wall p50 {r['refresh_wall_p50_ms']:.0f} ms, "
            f"p95 {r['refresh_wall_p95_ms']:.0f} ms; {r['not_audited']} labels never audited; "
            f"worker CPU {r['worker_cpu_s']:.1f} s over {r['seconds']:.0f} s; label transaction p50 "
            f"{r['commit_p50_ms']:.1f} ms, p95 {r['commit_p95_ms']:.1f} ms; stream CPU per label "
            f"{r['stream_cpu_ms_per_label'] or float('nan'):.1f} ms; machine busy {r['machine_busy_cores']:.2f} of "
            f"{os.cpu_count()} cores during the stream (load average {r['load_before']:.1f} before it)"
        )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument("--rate", type=float, default=200.0, help="labels per second")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--batches-per-second", type=float, default=20.0, help="label transactions per second")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--workers", type=int, default=0, help="crowd workers (default max(50, labels/1000))")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="chorus_bench_live_audit")
    parser.add_argument("--submit-path", action="store_true", help="drive the real lease_acquire + label_submit")
    parser.add_argument("--processes", type=int, default=2, help="processes writing labels")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--controls", type=int, default=20, help="control prompts (0: none)")
    parser.add_argument("--no-rules", action="store_true", help="no active quality rules")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="profile N quick runs after seeding")
    args = parser.parse_args(argv)

    import psycopg

    with psycopg.connect(f"{args.postgres}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{args.database}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{args.database}"')
    workdir = Path(tempfile.mkdtemp(prefix="chorus-live-bench-"))
    redis_port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"CELERY_BROKER_URL", "CHORUS_SQLITE_PATH"}}
    env.update(
        {
            "DATABASE_URL": f"{args.postgres}/{args.database}",
            "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "CHORUS_VAR_DIR": str(workdir),
            "CHORUS_AUDIT_HISTORY_RESOLUTION": "0",  # keep every snapshot: freshness is measured from them
        }
    )
    os.environ.update(env)
    services = Services(workdir, env)
    try:
        services.start(
            "redis",
            redis_server_argv(redis_port, workdir),
        )
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=REPO, env=env, check=True)
        import django

        django.setup()
        from django.contrib.auth import get_user_model

        owner, _ = get_user_model().objects.get_or_create(username="bench-owner")
        results = []
        for size in args.sizes:
            results.append(run_size(args, size, services, owner))
        report(args, results)
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2))
    finally:
        services.stop_all()
        from django.db import connections

        connections.close_all()
        with psycopg.connect(f"{args.postgres}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{args.database}" WITH (FORCE)')
        print(f"logs: {workdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
