"""Assignment benchmark: claim + submit cycles over HTTP on PostgreSQL, at several campaign sizes.

One command::

    .venv/bin/python benchmarks/assignment.py                                   # 10k and 1M prompts
    .venv/bin/python benchmarks/assignment.py --prompts 10000 --clients 32 --seconds 15
    .venv/bin/python benchmarks/assignment.py --prompts 10000 100000 1000000 --against HEAD~3   # A/B

It creates its own PostgreSQL database (--database on the server at --postgres, dropped at the end),
migrates it, creates the client accounts with DRF tokens, and starts gunicorn (--web-workers sync
workers) with its own redis-server (cache and Celery broker) on free ports. No Celery worker runs:
each submit still updates the audit statistics in its transaction and schedules a recomputation,
which stays queued. Then, for each size in --prompts:

* seeds one campaign (k=--k, --policy) with COPY straight into the prompt and slot tables;
* runs --clients threads (``requests``, one account each) looping next-task → submit for --seconds
  after a --warmup, and measures cycles/s and the latency of each call as the client sees it;
* re-checks the guarantees on the stored rows (``annotation.selectors.invariant_violations``: exactly-k,
  never-twice, the counters, every acknowledged label stored), every acknowledged label stored with its
  value, every stored label acknowledged;
* prints EXPLAIN ANALYZE of the query that picks the slot (captured from a real lease_acquire), to
  show that finding work does not scan or sort the table;
* measures the SQL floor on the same campaign: pgbench with as many clients, each a worker of its own,
  running the same cycle as bare SQL (``FLOOR_SCRIPT``: lock the worker's participation, claim a free
  slot with SKIP LOCKED, insert the lease and hold the slot; then lock the lease, count the label on
  the participation and the prompt, fill the slot, insert the label, mark the lease submitted), and
  prints Chorus's HTTP cycles/s as a share of it. The floor has no audit statistics, no random start
  and no per-request authentication, and its statements are prepared: it is what PostgreSQL alone
  needs for the guarantees, with every commit durable as Chorus's are.

Everything runs on this machine: the clients, gunicorn, PostgreSQL and whatever else is running.
The table reports the CPU each of them used, and the whole machine's, so a noisy run shows.

--submit-next: each client asks for its next prompt with its submit (``"next": true``), so a cycle is
one request (next-task only at the start, or on a tree without it); the submit column is then the
whole cycle's latency.

--against REV: an A/B in one run. REV is checked out with ``git worktree`` in a temporary folder, and
each size's load runs --rounds times on each tree's web server in turn (REV first), on the same
database and campaign, migrated by this tree (REV's code must run on it: migrations add columns with
database defaults for that reason, as a rolling deploy needs). The engine probe and the SQL floor
run once per size, with this tree.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import requests
from stack import BIN, REPO, chorus_env, free_port, redis_server_argv, wait_for_port

if TYPE_CHECKING:  # Django is set up in main(), after the environment names the benchmark database
    from annotation.models import Campaign

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PLAN_KEY_LINES = ("Limit", "LockRows", "Scan", "Index Cond", "Filter", "SubPlan", "Sort", "Execution Time")


# --- CPU accounting -------------------------------------------------------------------------------


def _process_cpu(pid: int) -> float:
    """User + system seconds of one process (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


def _postgres_backends(database: str) -> list[int]:
    """Server processes connected to ``database`` (their command line names it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if cmdline.startswith(b"postgres: ") and f" {database} ".encode() in cmdline:
                found.append(int(entry.name))
    return found


def _machine_busy() -> float:
    """Busy CPU seconds of the whole machine, all cores (every process, not only ours)."""
    user, nice, system, idle, iowait, irq, softirq, steal = map(int, Path("/proc/stat").read_text().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS


class CpuMeter:
    """CPU seconds used between start() and stop(), per second of wall time: by this process (the
    clients), the web server's processes, the benchmark database's PostgreSQL backends, and the whole
    machine. Processes are sampled every quarter second, because backends come and go (Django
    reconnects every CONN_MAX_AGE): one that exits within the window loses at most its last quarter
    second."""

    def __init__(self, web_pid: int, database: str):
        self.web_pid, self.database = web_pid, database
        self.seen = {"web": {}, "postgres": {}}  # group -> pid -> (CPU at start or 0, CPU last seen)
        self.stopped = threading.Event()
        self.used: dict = {}

    def _sample(self, *, at_start: bool = False) -> None:
        groups = {"web": [self.web_pid, *_children(self.web_pid)], "postgres": _postgres_backends(self.database)}
        for name, pids in groups.items():
            for pid in pids:
                cpu = _process_cpu(pid)
                first = self.seen[name].get(pid, (cpu if at_start else 0.0,))[0]
                self.seen[name][pid] = (first, cpu)

    def _clients_and_machine(self) -> tuple[float, float]:
        own = resource.getrusage(resource.RUSAGE_SELF)
        return own.ru_utime + own.ru_stime, _machine_busy()

    def start(self) -> None:
        self._sample(at_start=True)
        self.before = self._clients_and_machine()
        self.sampler = threading.Thread(target=self._keep_sampling, daemon=True)
        self.sampler.start()

    def _keep_sampling(self) -> None:
        while not self.stopped.wait(0.25):
            self._sample()

    def stop(self, seconds: float) -> None:
        self.stopped.set()
        self.sampler.join()
        self._sample()
        clients, machine = (after - before for after, before in zip(self._clients_and_machine(), self.before))
        self.used = {
            "clients": clients / seconds,
            **{name: sum(last - first for first, last in pids.values()) / seconds for name, pids in self.seen.items()},
            "machine": machine / seconds,
        }


# --- The stack ------------------------------------------------------------------------------------


class Stack:
    """redis-server and gunicorn on free ports, each in its own process group."""

    def __init__(self, env: dict, workdir: Path, *, redis_port: int, web_workers: int):
        self.env, self.workdir, self.web_workers = env, workdir, web_workers
        self.redis_port = redis_port
        self.procs: list[subprocess.Popen] = []

    def _start(self, name: str, argv: list[str], port: int, cwd: Path = REPO) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "ab")
        proc = subprocess.Popen(
            argv, cwd=cwd, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs.append(proc)
        wait_for_port(port, 30)
        return proc

    def start(self) -> None:
        self._start("redis", redis_server_argv(self.redis_port, self.workdir), self.redis_port)

    def start_web(self, tree: Path) -> None:
        """gunicorn serving the Chorus tree at ``tree`` (this one, or the A/B's other revision)."""
        self.web_port = free_port()
        argv = [str(BIN / "gunicorn"), "config.wsgi:application", "--bind", f"127.0.0.1:{self.web_port}"]
        argv += ["--workers", str(self.web_workers), "--timeout", "60", "--backlog", "2048", "--no-control-socket"]
        self.web = self._start("web", argv, self.web_port, cwd=tree)

    def stop_web(self) -> None:
        os.killpg(self.web.pid, 15)
        self.web.wait(timeout=30)
        self.procs.remove(self.web)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, 15)
                proc.wait(timeout=30)


# --- Seeding --------------------------------------------------------------------------------------


def copy_rows(cursor, table: str, columns: str, lines, chunk: int = 50_000) -> None:
    """COPY text-format rows into ``table``, streamed in chunks."""
    with cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
        batch = []
        for line in lines:
            batch.append(line)
            if len(batch) == chunk:
                copy.write("".join(batch))
                batch.clear()
        if batch:
            copy.write("".join(batch))


@contextmanager
def _indexes_rebuilt_after(cursor, table: str):
    """Drop ``table``'s plain indexes (not those of its constraints) and build them again afterwards,
    from their own definitions: one sorted build beats millions of inserts at random places."""
    cursor.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s AND indexname NOT IN "
        "(SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass)",
        [table, table],
    )
    indexes = cursor.fetchall()
    for name, _ in indexes:
        cursor.execute(f'DROP INDEX "{name}"')
    yield
    cursor.execute("SET LOCAL maintenance_work_mem = '256MB'")
    for _, definition in indexes:
        cursor.execute(definition)


def seed_campaign(*, n_prompts: int, k: int, policy: str, owner) -> Campaign:
    """A launched campaign of ``n_prompts`` prompts and their k slots each, as prompts_import would
    leave them (the random draw per slot included), written with COPY instead of the ORM."""
    from django.db import connection, transaction

    from annotation import services
    from annotation.models import ImportBatch, Prompt, Slot

    campaign = services.campaign_create(owner=owner, title=f"Benchmark {n_prompts}", k=k, policy=policy)
    batch = ImportBatch.objects.create(
        campaign=campaign, filename="benchmark.jsonl", sha256=uuid.uuid4().hex * 2, n_prompts=n_prompts
    )
    c, b = campaign.pk, batch.pk
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        raw = cursor.cursor  # psycopg's own cursor, for COPY
        # The rows are consistent by construction: skip the foreign-key triggers, which would check
        # each of the 6M rows at commit.
        raw.execute("SET LOCAL session_replication_role = replica")
        columns = 'campaign_id, batch_id, external_id, text, options, gold, "group", is_control, n_labels'
        copy_rows(
            raw,
            Prompt._meta.db_table,
            columns,
            (
                f"{c}\t{b}\tp{i}\tStatement number {i} about everyday life.\t[]\t{i % 2}\t\tf\t0\n"
                for i in range(n_prompts)
            ),
        )
        raw.execute(f"SELECT id FROM {Prompt._meta.db_table} WHERE campaign_id = %s ORDER BY id", [c])
        prompt_ids = [row[0] for row in raw.fetchall()]
        rand = random.random
        with _indexes_rebuilt_after(raw, Slot._meta.db_table):
            copy_rows(
                raw,
                Slot._meta.db_table,
                "campaign_id, prompt_id, index, rand, priority, filled",
                (f"{c}\t{prompt}\t{index}\t{rand()!r}\t0\tf\n" for prompt in prompt_ids for index in range(k)),
            )
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Prompt._meta.db_table}, {Slot._meta.db_table}")
    return services.campaign_transition(campaign=campaign, action="launch")


def make_accounts(n: int) -> list[str]:
    """``n`` worker accounts (no password: API tokens only), and their tokens."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    User = get_user_model()
    users = User.objects.bulk_create([User(username=f"bench-worker-{i}") for i in range(n)])
    tokens = Token.objects.bulk_create([Token(user=user, key=Token.generate_key()) for user in users])
    return [token.key for token in tokens]


def empty_campaigns() -> None:
    """Remove the previous size's campaign and everything hanging off it."""
    from django.db import connection

    from annotation.models import Campaign

    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {Campaign._meta.db_table} CASCADE")


# --- Clients --------------------------------------------------------------------------------------


@dataclass
class Tally:
    lock: threading.Lock = field(default_factory=threading.Lock)
    samples: list = field(default_factory=list)  # (endpoint, started, seconds, HTTP status)
    acks: dict = field(default_factory=dict)  # label id -> (token key, client token, value)
    outcomes: dict = field(default_factory=dict)

    def count(self, what: str) -> None:
        with self.lock:
            self.outcomes[what] = self.outcomes.get(what, 0) + 1


def client(
    base: str, slug: str, key: str, tally: Tally, stop: threading.Event, seed: int, submit_next: bool = False
) -> None:
    """One API client's loop: next-task, then submit; with ``submit_next``, each submit also asks for the
    next prompt (``"next": true``) and the client asks next-task only when the answer brings none (at
    the start, or from a tree without it)."""
    rng = random.Random(seed)
    session = requests.Session()
    session.headers["Authorization"] = f"Token {key}"
    lease = None

    def post(endpoint: str, path: str, body=None):
        started = time.perf_counter()
        response = session.post(base + path, json=body, timeout=60)
        with tally.lock:
            tally.samples.append((endpoint, started, time.perf_counter() - started, response.status_code))
        return response

    while not stop.is_set():
        try:
            if lease is None:
                response = post("next-task", f"/api/v1/campaigns/{slug}/next-task/")
                lease = response.json()["lease"] if response.status_code == 200 else None
                if lease is None:
                    tally.count(f"next-task {response.status_code} {_code(response)}")
                    time.sleep(0.5)
                    continue
            value, token = rng.randint(0, 1), uuid.uuid4().hex
            body = {"value": value, "client_token": token} | ({"next": True} if submit_next else {})
            response = post("submit", f"/api/v1/leases/{lease['id']}/submit/", body)
            lease = None
            if response.status_code == 201:
                answer = response.json()
                with tally.lock:
                    tally.acks[answer["label_id"]] = (key, token, value)
                lease = (answer.get("next_task") or {}).get("lease")
            tally.count(f"submit {response.status_code} {_code(response)}")
        except requests.RequestException as exc:
            tally.count(f"connection error {type(exc).__name__}")
            lease = None  # whether a lost submit landed or not, next-task says what the worker holds


def _code(response: requests.Response) -> str:
    """The answer's code (nothing_left, lease_expired, ...), if it is JSON and has one."""
    try:
        body = response.json()
    except ValueError:
        return "(not JSON)"
    return body.get("code") or body.get("error", {}).get("code", "") if isinstance(body, dict) else ""


def warm_up(base: str, key: str, n: int) -> None:
    """Send each gunicorn worker its first requests (Django imports the API lazily on the first one),
    so the first size is not measured against cold workers."""

    def ask(_):
        requests.post(
            f"{base}/api/v1/campaigns/no-such-campaign/next-task/",
            headers={"Authorization": f"Token {key}"},
            timeout=120,
        )

    with ThreadPoolExecutor(n) as pool:
        for _ in range(3):
            list(pool.map(ask, range(n)))


def probe_engine(campaign: Campaign, cycles: int) -> dict:
    """The engine alone: lease_acquire then label_submit, called in this process by one caller at a
    time (eight worker identities in turn), so no HTTP, no Django request and no queueing behind other
    clients. Milliseconds p50/p95/p99 of each service."""
    from annotation import services

    workers = [services.worker_get_or_create(channel="bench-probe", external_id=str(i)) for i in range(8)]
    seconds = {"lease_acquire": [], "label_submit": []}
    for i in range(cycles):
        worker = workers[i % len(workers)]
        started = time.perf_counter()
        lease = services.lease_acquire(campaign=campaign, worker=worker)
        seconds["lease_acquire"].append(time.perf_counter() - started)
        started = time.perf_counter()
        services.label_submit(lease_id=lease.pk, worker=worker, value=1, client_token=uuid.uuid4().hex)
        seconds["label_submit"].append(time.perf_counter() - started)
    return {name: percentiles(values) for name, values in seconds.items()}


def percentiles(seconds: list[float]) -> tuple[float, float, float]:
    if len(seconds) < 2:
        return (float("nan"),) * 3
    cuts = statistics.quantiles(seconds, n=100, method="inclusive")
    return cuts[49] * 1000, cuts[94] * 1000, cuts[98] * 1000


# --- Checks ---------------------------------------------------------------------------------------


def check_guarantees(campaign: Campaign, tally: Tally) -> list[str]:
    """The guarantees on the stored rows (``invariant_violations``: exactly-k, never-twice, the counters,
    every acknowledged label stored), and the clients' labels stored as sent and acknowledged; returns the
    violations found."""
    from django.db import connection
    from rest_framework.authtoken.models import Token

    from annotation.models import Label, Worker
    from annotation.selectors import invariant_violations

    violations = invariant_violations(campaign=campaign, acknowledged=tally.acks)
    label, worker, token = Label._meta.db_table, Worker._meta.db_table, Token._meta.db_table
    with connection.cursor() as cursor:
        # Every label, with its worker's API token: the clients have one, the engine probe's workers none.
        cursor.execute(
            f"SELECT l.id, t.key, l.client_token, l.value FROM {label} l JOIN {worker} w ON w.id = l.worker_id "
            f"LEFT JOIN {token} t ON t.user_id = w.user_id WHERE l.campaign_id = %s",
            [campaign.pk],
        )
        stored = {pk: (key, client_token, json.loads(value)) for pk, key, client_token, value in cursor.fetchall()}
    altered = [pk for pk, ack in tally.acks.items() if pk in stored and stored[pk] != ack]
    unacknowledged = {pk for pk, (key, _, _) in stored.items() if key is not None} - set(tally.acks)
    if altered:
        violations.append(f"{len(altered)} acknowledged labels not stored as acknowledged")
    if unacknowledged:
        violations.append(f"{len(unacknowledged)} stored labels nobody was acknowledged for")
    return violations


def explain_candidate_query(campaign: Campaign, key: str) -> list[str]:
    """EXPLAIN ANALYZE of the slot-picking query of a real lease_acquire (a worker who has labeled
    during the run, so their exclusions are real too), run in a transaction that is rolled back."""
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext
    from rest_framework.authtoken.models import Token

    from annotation import services
    from annotation.models import Slot

    worker = services.worker_for_user(user=Token.objects.get(key=key).user)
    picks = []
    for _ in range(2):  # twice where the client still held a lease (--submit-next): the first answer is that one
        with CaptureQueriesContext(connection) as queries:
            lease = services.lease_acquire(campaign=campaign, worker=worker)
        if not isinstance(lease, services.NothingLeft):
            services.lease_release(lease_id=lease.pk, worker=worker)
        picks += [q["sql"] for q in queries if "SKIP LOCKED" in q["sql"] and f'"{Slot._meta.db_table}"' in q["sql"]]
        if picks:
            break
    sql = picks[0]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
        plan = [row[0] for row in cursor.fetchall()]
        transaction.set_rollback(True)
    return plan


# --- The SQL floor (pgbench) -----------------------------------------------------------------------

# One pgbench transaction = one claim + submit cycle, as two database transactions, for the worker
# :w0 + :client_id in campaign :c. Table names are the models' (filled in by floor_script).
FLOOR_SCRIPT = """\\set w :w0 + :client_id
BEGIN;
SELECT n_labels FROM {participation} WHERE campaign_id = :c AND worker_id = :w FOR UPDATE;
SELECT s.id AS slot, s.prompt_id AS prompt FROM {slot} s WHERE s.campaign_id = :c AND NOT s.filled
  AND (s.lease_expires_at IS NULL OR s.lease_expires_at <= now())
  AND s.prompt_id NOT IN (SELECT prompt_id FROM {lease} WHERE campaign_id = :c AND worker_id = :w)
  ORDER BY s.rand LIMIT 1 FOR UPDATE OF s SKIP LOCKED \\gset
INSERT INTO {lease} (campaign_id, prompt_id, worker_id, slot_id, status, created_at, expires_at)
  VALUES (:c, :prompt, :w, :slot, 'active', now(), now() + interval '10 minutes') RETURNING id AS lease \\gset
UPDATE {slot} SET lease_id = :lease, lease_expires_at = now() + interval '10 minutes' WHERE id = :slot;
COMMIT;
BEGIN;
SELECT status FROM {lease} WHERE id = :lease AND worker_id = :w FOR UPDATE;
UPDATE {participation} SET n_labels = n_labels + 1 WHERE campaign_id = :c AND worker_id = :w RETURNING n_labels;
UPDATE {prompt} SET n_labels = n_labels + 1 WHERE id = :prompt AND retired_at IS NULL;
UPDATE {slot} SET filled = true WHERE id = :slot AND lease_id = :lease AND NOT filled;
INSERT INTO {label} (campaign_id, prompt_id, worker_id, lease_id, slot_id, is_control, value, client_token,
  leased_at, created_at, void_reason) VALUES (:c, :prompt, :w, :lease, :slot, false, '1', :lease, now(), now(), '');
UPDATE {lease} SET status = 'submitted' WHERE id = :lease;
COMMIT;
"""


def floor_script() -> str:
    from annotation.models import Label, Lease, Participation, Prompt, Slot

    tables = {"participation": Participation, "slot": Slot, "lease": Lease, "prompt": Prompt, "label": Label}
    return FLOOR_SCRIPT.format(**{name: model._meta.db_table for name, model in tables.items()})


def measure_floor(args, campaign: Campaign, workdir: Path) -> float:
    """Cycles/s of the bare-SQL cycle (pgbench, --clients clients for --floor-seconds), on ``campaign``
    with workers of its own; their labels stay (the campaign is emptied before the next size)."""
    from annotation.models import Participation, Worker

    first = Worker.objects.bulk_create(
        Worker(channel="floor", external_id=f"{campaign.pk}-{i}") for i in range(args.clients)
    )
    ids = sorted(worker.pk for worker in first)
    assert ids == list(range(ids[0], ids[0] + len(ids))), "pgbench numbers its workers from :w0"
    Participation.objects.bulk_create(Participation(campaign=campaign, worker_id=pk) for pk in ids)
    script = workdir / "floor.sql"
    script.write_text(floor_script())
    url = args.postgres.rsplit("/", 1)[0] + "/" + args.database
    # Prepared statements (-M prepared): the floor at its fastest, which is what a share of it should be of.
    argv = [shutil.which("pgbench") or "pgbench", "-n", "-M", "prepared", "-c", str(args.clients)]
    argv += ["-j", str(os.cpu_count() or 1)]
    argv += ["-T", str(int(args.floor_seconds)), "-D", f"c={campaign.pk}", "-D", f"w0={ids[0]}"]
    done = subprocess.run([*argv, "-f", str(script), url], check=True, capture_output=True, text=True)
    tps = next(line for line in done.stdout.splitlines() if line.startswith("tps = "))
    failed = [line for line in done.stdout.splitlines() if "failed" in line or "aborted" in line]
    if any(not line.rstrip().endswith(" 0 (0.000%)") for line in failed if ":" in line):
        raise RuntimeError("pgbench: " + "; ".join(failed))
    return float(tps.split()[2])


# --- Main -----------------------------------------------------------------------------------------


@dataclass
class Window:
    """One tree's load on a size: cycles and latencies as the clients saw them, and the CPU used."""

    tree: str
    window: float
    cycles: int
    next_task: tuple
    submit: tuple
    cpu: dict
    outcomes: dict
    load: float


@dataclass
class Result:
    prompts: int
    seed_seconds: float
    windows: list
    violations: list
    plan: list
    engine: dict
    floor: float


def run_window(args, tree: tuple[str, Path], slug: str, keys: list[str], stack: Stack, tally: Tally) -> Window:
    """--clients clients on the web server of ``tree`` for --warmup, then --seconds measured."""
    name, path = tree
    stack.start_web(path)
    base = f"http://127.0.0.1:{stack.web_port}"
    warm_up(base, keys[0], 2 * args.web_workers)
    seen, stop = len(tally.samples), threading.Event()
    outcomes_before = dict(tally.outcomes)
    threads = [
        threading.Thread(target=client, args=(base, slug, key, tally, stop, n, args.submit_next), daemon=True)
        for n, key in enumerate(keys)
    ]
    for thread in threads:
        thread.start()
    time.sleep(args.warmup)
    meter = CpuMeter(stack.web.pid, args.database)
    window_start = time.perf_counter()
    meter.start()
    time.sleep(args.seconds)
    window_end = time.perf_counter()
    meter.stop(window_end - window_start)
    load = os.getloadavg()[0]
    stop.set()
    for thread in threads:
        thread.join()
    stack.stop_web()
    samples = tally.samples[seen:]

    def window(endpoint):
        return [
            (s, status) for e, t, s, status in samples if e == endpoint and window_start <= t and t + s <= window_end
        ]

    submits = window("submit")
    return Window(
        tree=name,
        window=window_end - window_start,
        # A cycle is a label acknowledged: a tree that answers errors (say, a revision whose code does not
        # match the database's schema) serves no cycles, however fast it answers.
        cycles=sum(status in (200, 201) for _, status in submits),
        next_task=percentiles([s for s, _ in window("next-task")]),
        submit=percentiles([s for s, _ in submits]),
        cpu=meter.used,
        outcomes={k: v - outcomes_before.get(k, 0) for k, v in sorted(tally.outcomes.items())},
        load=load,
    )


def run_size(args, n_prompts: int, owner, keys: list[str], trees: list, stack: Stack) -> Result:
    empty_campaigns()
    started = time.monotonic()
    campaign = seed_campaign(n_prompts=n_prompts, k=args.k, policy=args.policy, owner=owner)
    seed_seconds = time.monotonic() - started
    print(
        f"[{n_prompts:,} prompts] seeded {n_prompts:,} prompts and {n_prompts * args.k:,} slots "
        f"in {seed_seconds:.1f} s; engine alone for {args.probe} cycles, then {len(keys)} clients for "
        f"{args.warmup:g} + {args.seconds:g} s on {' and '.join(name for name, _ in trees)}",
        flush=True,
    )
    engine = probe_engine(campaign, args.probe)
    tally = Tally()
    windows = [run_window(args, tree, campaign.slug, keys, stack, tally) for _ in range(args.rounds) for tree in trees]
    return Result(
        prompts=n_prompts,
        seed_seconds=seed_seconds,
        windows=windows,
        violations=check_guarantees(campaign, tally),
        plan=explain_candidate_query(campaign, keys[0]),
        engine=engine,
        floor=measure_floor(args, campaign, stack.workdir),
    )


def _ms(values: tuple) -> str:
    return "/".join(f"{v:.0f}" if v >= 10 else f"{v:.1f}" for v in values)


def report(args, results: list[Result]) -> None:
    print()
    print(
        f"HTTP: k={args.k}, {args.policy} policy, {args.clients} clients (threads, requests), "
        f"gunicorn {args.web_workers} sync workers, "
        f"PostgreSQL; {os.cpu_count()} cores shared by all of it and by whatever else runs. SQL floor: pgbench, "
        f"{args.clients} clients, {args.floor_seconds:g} s (the same cycle as bare SQL); share = cycles/s / floor."
    )
    header = (
        f"{'prompts':>9} {'tree':>12} {'cycles/s':>8} {'next-task ms p50/p95/p99':>24} {'submit ms p50/p95/p99':>21} "
        f"{'web CPU ms/cycle':>16} {'CPU cores clients/web/pg/machine':>32} {'load':>5} {'floor/s':>7} {'share':>6}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        for w in r.windows:
            rate = w.cycles / w.window
            cpu = "/".join(f"{w.cpu[name]:.2f}" for name in ("clients", "web", "postgres", "machine"))
            print(
                f"{r.prompts:>9,} {w.tree:>12} {rate:>8.1f} {_ms(w.next_task):>24} {_ms(w.submit):>21} "
                f"{w.cpu['web'] / rate * 1000 if rate else float('nan'):>16.1f} {cpu:>32} {w.load:>5.1f} "
                f"{r.floor:>7.0f} {rate / r.floor:>6.1%}"
            )
    print()
    print(f"Engine alone (this tree): one caller in this process, {args.probe} cycles, before the HTTP load")
    header = f"{'prompts':>9} {'lease_acquire ms p50/p95/p99':>28} {'label_submit ms p50/p95/p99':>28}"
    print(header)
    print("-" * len(header))
    for r in results:
        print(f"{r.prompts:>9,} {_ms(r.engine['lease_acquire']):>28} {_ms(r.engine['label_submit']):>28}")
    for r in results:
        print(f"\n[{r.prompts:,} prompts] violations of the guarantees: {len(r.violations)}")
        for w in r.windows:
            print(f"  {w.tree} answers: {w.outcomes}")
        for violation in r.violations:
            print(f"  VIOLATION: {violation}")
        print("  EXPLAIN (ANALYZE, BUFFERS) of the slot-picking query, key lines:")
        for line in r.plan:
            if any(word in line for word in PLAN_KEY_LINES):
                print("    " + line)


@contextmanager
def other_tree(rev: str | None):
    """The trees to load: (name, path) of REV's checkout (a temporary git worktree) first, then this one."""
    if rev is None:
        yield [("this tree", REPO)]
        return
    folder = Path(tempfile.mkdtemp(prefix="chorus-ab-"))
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(folder), rev], check=True)
    try:
        name = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "--short", "HEAD"], check=True, capture_output=True, text=True
        ).stdout.strip()
        yield [(name, folder), ("this tree", REPO)]
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(folder)], check=False)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=30, help="measured seconds per size")
    parser.add_argument("--warmup", type=float, default=5, help="seconds of load before measuring")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--policy", choices=["random", "fill_first"], default="random")
    parser.add_argument("--probe", type=int, default=200, help="engine-alone cycles per size")
    parser.add_argument("--web-workers", type=int, default=5, help="gunicorn sync workers")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--database", default="chorus_bench")
    parser.add_argument("--floor-seconds", type=float, default=10, help="pgbench's run per size (the SQL floor)")
    parser.add_argument("--against", help="git revision to compare with (A/B in one run, REV first)")
    parser.add_argument("--rounds", type=int, default=1, help="A/B: windows of each tree per size, alternating")
    parser.add_argument(
        "--submit-next",
        action="store_true",
        help='clients ask for the next prompt with each submit ("next": true): one request per cycle',
    )
    args = parser.parse_args(argv)

    import psycopg

    with psycopg.connect(args.postgres, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{args.database}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{args.database}"')
    workdir = Path(tempfile.mkdtemp(prefix="chorus-bench-"))
    redis_port = free_port()
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    env = chorus_env(
        workdir,
        DATABASE_URL=args.postgres.rsplit("/", 1)[0] + "/" + args.database,
        REDIS_URL=redis_url,
        CELERY_BROKER_URL=redis_url,
    )
    os.environ.update(env)
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connections

    stack = Stack(env, workdir, redis_port=redis_port, web_workers=args.web_workers)
    status = 1
    try:
        call_command("migrate", verbosity=0)
        owner = get_user_model().objects.create(username="bench-researcher")
        keys = make_accounts(args.clients)
        stack.start()
        with other_tree(args.against) as trees:
            results = [run_size(args, n, owner, keys, trees, stack) for n in args.prompts]
        report(args, results)
        status = 1 if any(r.violations for r in results) else 0
        return status
    finally:
        stack.stop()
        connections.close_all()
        with psycopg.connect(args.postgres, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{args.database}" WITH (FORCE)')
        if status == 0:
            shutil.rmtree(workdir)
        else:
            print(f"gunicorn and redis logs kept in {workdir}")


if __name__ == "__main__":
    sys.exit(main())
