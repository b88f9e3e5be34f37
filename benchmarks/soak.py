"""Fault-injection soak test: many simulated workers label a campaign over HTTP while the stack is
being broken underneath them; afterwards nothing may be lost, doubled or left unaudited.

One command, bounded in time, loopback only::

    .venv/bin/python benchmarks/soak.py                    # 60 s of faults
    .venv/bin/python benchmarks/soak.py --seconds 20 --threads 12 --prompts 150
    .venv/bin/python benchmarks/soak.py --embedded         # the embedded default (SQLite, no Redis)

It starts its own stack on free ports: a fresh PostgreSQL database (on the server at --postgres,
dropped at the end), its own ``redis-server`` (no persistence; never the machine's Redis), gunicorn
(3 sync workers) and a Celery worker with beat (the audit sweep every 2 s). With ``--embedded`` the
stack is the embedded default instead, in a temporary folder: SQLite, the SQLite broker, the database
cache, no Redis. Simulated workers (one thread each, drawing worker identities from a pool) ask for a
task, sometimes heartbeat, and submit, replaying any request whose answer was lost. Meanwhile the
injector, every 1.5-4 s, SIGKILLs a gunicorn worker, restarts gunicorn, restarts the Celery worker
(SIGKILL) or restarts Redis (SIGKILL, so the queued tasks and the cache are lost with it); the workers
themselves abandon leases, release them, double-submit and replay old submissions. The load ends
after --seconds, or earlier when every prompt has its k labels.

Checks, after the faults stop and the stack is whole again:

* no process of the stack exited by itself (only the injector kills them);

* the stored rows keep every guarantee (``annotation.selectors.invariant_violations``: at most k counted
  labels per prompt, from distinct workers, never twice, the counters match), and every acknowledged
  label is stored;
* every acknowledged label is stored as sent (same worker, prompt, value) and, unless void, in the JSONL
  export;
* every replayed or repeated submission was answered with the first acknowledgment;
* the audit caught up: the statistics count every label and the latest snapshot's watermark is the
  label count (waits at most --catch-up seconds).

Prints the counts (labels acknowledged, faults injected, violations found); exit status 1 if any
violation was found.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import requests
from stack import BIN, REPO, chorus_env, free_port, redis_server_argv, wait_for_port

LEASE_SECONDS = 20


class Stack:
    """Redis (unless embedded), gunicorn and a Celery worker (with beat), each in its own process group."""

    def __init__(self, env: dict, workdir: Path, redis_port: int | None, web_port: int):
        self.env, self.workdir = env, workdir
        self.redis_port, self.web_port = redis_port, web_port
        self.procs: dict[str, subprocess.Popen] = {}

    @property
    def names(self) -> tuple[str, ...]:
        return ("web", "celery") if self.redis_port is None else ("redis", "web", "celery")

    def start_process(self, name: str) -> None:
        {"redis": self.start_redis, "web": self.start_web, "celery": self.start_celery}[name]()

    def exited(self) -> dict[str, int]:
        """The processes that have exited, with their exit codes."""
        return {name: proc.returncode for name, proc in self.procs.items() if proc.poll() is not None}

    def _start(self, name: str, argv: list[str]) -> None:
        log = open(self.workdir / f"{name}.log", "ab")
        self.procs[name] = subprocess.Popen(
            argv, cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def _kill(self, name: str, sig=signal.SIGKILL) -> None:
        proc = self.procs.pop(name, None)
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            proc.wait(timeout=30)

    def start_redis(self) -> None:
        self._start(
            "redis",
            redis_server_argv(self.redis_port, self.workdir),
        )
        wait_for_port(self.redis_port, 10)

    def start_web(self) -> None:
        self._start(
            "web",
            [
                str(BIN / "gunicorn"),
                "config.wsgi:application",
                "--bind",
                f"127.0.0.1:{self.web_port}",
                "--workers",
                "3",
                "--timeout",
                "30",
                "--graceful-timeout",
                "2",
                "--no-control-socket",
            ],
        )
        wait_for_port(self.web_port, 30)

    def start_celery(self) -> None:
        self._start(
            "celery",
            [
                str(BIN / "celery"),
                "-A",
                "config",
                "worker",
                "--beat",
                "--concurrency",
                "1",
                "--loglevel",
                "WARNING",
                "--schedule",
                str(self.workdir / "beat-schedule"),
                "--hostname",
                f"soak-{uuid.uuid4().hex[:6]}@%h",
            ],
        )

    def start(self) -> None:
        for name in self.names:
            self.start_process(name)

    def stop(self) -> None:
        for name in reversed(self.names):
            self._kill(name)

    # --- faults -------------------------------------------------------------------------------
    def kill_web_worker(self) -> bool:
        """SIGKILL one gunicorn worker process; the master starts a new one."""
        master = self.procs["web"].pid
        try:
            children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        except FileNotFoundError:
            return False
        if not children:
            return False
        os.kill(int(random.choice(children)), signal.SIGKILL)
        return True

    def restart_web(self) -> None:
        self._kill("web")
        self.start_web()

    def restart_celery(self) -> None:
        self._kill("celery")
        time.sleep(random.uniform(0.5, 2))
        self.start_celery()

    def restart_redis(self) -> None:
        self._kill("redis")
        time.sleep(random.uniform(0.5, 2))
        self.start_redis()


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts: Counter = Counter()
        self.acks: dict[int, tuple] = {}  # label id → (user id, prompt external id, value, client token, lease id)
        self.violations: list[str] = []
        self.latencies: dict[str, list[float]] = {}

    def add(self, name: str, n: int = 1) -> None:
        with self.lock:
            self.counts[name] += n

    def latency(self, endpoint: str, seconds: float) -> None:
        with self.lock:
            self.latencies.setdefault(endpoint, []).append(seconds)

    def violation(self, message: str) -> None:
        with self.lock:
            self.violations.append(message)


class Api:
    """HTTP calls that survive the stack's faults: a lost answer (connection error, timeout, 5xx) is
    replayed with the same request until an answer arrives, as a real client would."""

    def __init__(self, base: str, token: str, tally: Tally, deadline: float):
        self.base, self.tally, self.deadline = base, tally, deadline
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Token {token}"

    def post(self, path: str, body: dict | None = None) -> requests.Response | None:
        while time.monotonic() < self.deadline:
            sent = time.monotonic()
            try:
                response = self.session.post(self.base + path, json=body, timeout=15)
                self.tally.latency(path.rstrip("/").rsplit("/", 1)[-1], time.monotonic() - sent)
            except requests.RequestException:
                self.tally.add("replays after a lost answer")
                time.sleep(random.uniform(0.1, 0.5))
                continue
            if response.status_code >= 500:
                self.tally.add(f"server errors ({response.status_code})")
                self.tally.violation(f"{response.status_code} on POST {path}: {response.text[:200]}")
                time.sleep(random.uniform(0.1, 0.5))
                continue
            return response
        return None


def simulated_worker(
    base: str,
    slug: str,
    pool: list,
    pool_lock: threading.Lock,
    tally: Tally,
    stop: threading.Event,
    hard_deadline: float,
    seed: int,
) -> None:
    rng = random.Random(seed)
    while not stop.is_set():
        with pool_lock:
            now = time.monotonic()
            ready = [ident for ident in pool if ident["free_at"] <= now and not ident["busy"]]
            ident = rng.choice(ready) if ready else None
            if ident:
                ident["busy"] = True
        if ident is None:
            time.sleep(0.2)
            continue
        try:
            _one_task(base, slug, ident, tally, rng, hard_deadline)
        finally:
            with pool_lock:
                ident["busy"] = False


def _one_task(base, slug, ident, tally: Tally, rng: random.Random, hard_deadline: float) -> None:
    api = Api(base, ident["token"], tally, hard_deadline)
    response = api.post(f"/api/v1/campaigns/{slug}/next-task/")
    if response is None:
        return
    body = response.json()
    if body.get("lease") is None:
        if body.get("code") == "nothing_left":
            # Slots held by other workers' abandoned leases may free up: ask again a little later.
            ident["free_at"] = time.monotonic() + LEASE_SECONDS / 4
        else:
            tally.violation(f"unexpected answer to next-task: {body}")
        return
    lease_id = body["lease"]["id"]
    roll = rng.random()
    if roll < 0.06:  # the worker closes the tab: the lease runs out
        tally.add("leases abandoned")
        ident["free_at"] = time.monotonic() + LEASE_SECONDS + 1
        return
    if roll < 0.10:
        response = api.post(f"/api/v1/leases/{lease_id}/release/")
        if response is not None:
            if response.status_code == 204:
                tally.add("leases released")
            else:
                tally.violation(f"release answered {response.status_code}: {response.text[:200]}")
        return
    if roll < 0.35:
        response = api.post(f"/api/v1/leases/{lease_id}/heartbeat/")
        if response is not None and response.status_code != 200:
            tally.violation(f"heartbeat of a live lease answered {response.status_code}: {response.text[:200]}")
    value, token = rng.randint(0, 1), uuid.uuid4().hex
    response = api.post(f"/api/v1/leases/{lease_id}/submit/", {"value": value, "client_token": token})
    if response is None:
        return
    if response.status_code not in (200, 201):
        # A lease can only end under a worker this slow if the stack stalled for LEASE_SECONDS.
        tally.add(f"submissions refused ({response.json()['error']['code']})")
        return
    ack = response.json()
    tally.add("labels acknowledged")
    with tally.lock:
        tally.acks[ack["label_id"]] = (ident["user_id"], body["lease"]["prompt"]["id"], value, token, lease_id)
    if response.status_code == 200:
        tally.add("first submissions answered as duplicates (an earlier attempt had landed)")
    if rng.random() < 0.2:  # a double click
        _expect_same_ack(api, lease_id, value, token, ack, tally, "double submissions")
    if rng.random() < 0.05 and ident["history"]:  # a client replaying an old request
        old_lease, old_value, old_token, old_ack = rng.choice(ident["history"])
        _expect_same_ack(api, old_lease, old_value, old_token, old_ack, tally, "replays of old submissions")
    ident["history"].append((lease_id, value, token, ack))


def _expect_same_ack(api: Api, lease_id, value, token, ack, tally: Tally, what: str) -> None:
    response = api.post(f"/api/v1/leases/{lease_id}/submit/", {"value": value, "client_token": token})
    if response is None:
        return
    tally.add(what)
    again = response.json()
    if response.status_code != 200 or again.get("duplicate") is not True or again.get("label_id") != ack["label_id"]:
        tally.violation(f"{what}: expected the first acknowledgment {ack}, got {response.status_code} {again}")


def inject_faults(stack: Stack, tally: Tally, stop: threading.Event, rng: random.Random) -> None:
    """Rounds of faults, each round every kind in a shuffled order (worker kills twice), 1.5-4 s apart,
    so even a short run sees each kind."""
    kinds = [
        ("web worker killed", stack.kill_web_worker),
        ("web worker killed", stack.kill_web_worker),
        ("web server restarted", stack.restart_web),
        ("Celery worker restarted", stack.restart_celery),
    ]
    if "redis" in stack.names:
        kinds.append(("Redis restarted", stack.restart_redis))
    while True:
        for name, fault in rng.sample(kinds, len(kinds)):
            if stop.wait(rng.uniform(1.5, 4)):
                return
            if fault() is not False:
                tally.add(name)
                tally.add("faults injected")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60, help="how long the load (and the faults) lasts")
    parser.add_argument("--threads", type=int, default=24, help="simulated workers labeling at once")
    parser.add_argument("--identities", type=int, default=60, help="worker accounts the threads draw from")
    parser.add_argument("--prompts", type=int, default=400)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--catch-up", type=float, default=90, help="seconds the audit may take to catch up")
    parser.add_argument(
        "--postgres", default=os.environ.get("CHORUS_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-faults", action="store_true", help="a baseline: the same load, no injected faults")
    parser.add_argument(
        "--embedded",
        action="store_true",
        help="the embedded default: SQLite and its SQLite broker in a temporary folder, no Redis",
    )
    args = parser.parse_args(argv)

    import psycopg

    rng = random.Random(args.seed)
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="chorus-soak-"))
    web_port = free_port()
    env = chorus_env(workdir, CHORUS_AUDIT_SWEEP_SECONDS="2", PYTHONUNBUFFERED="1")
    db_name = redis_port = None
    if not args.embedded:  # else no DATABASE_URL or REDIS_URL: the embedded default, in workdir/var
        db_name, redis_port = f"chorus_soak_{uuid.uuid4().hex[:8]}", free_port()
        with psycopg.connect(args.postgres, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{db_name}"')
        redis_url = f"redis://127.0.0.1:{redis_port}/0"
        env.update(
            {
                "DATABASE_URL": args.postgres.rsplit("/", 1)[0] + "/" + db_name,
                "REDIS_URL": redis_url,
                "CELERY_BROKER_URL": redis_url,
            }
        )
    os.environ.update(env)
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections

    stack = Stack(env, workdir, redis_port, web_port)
    try:
        call_command("migrate", verbosity=0)
        slug, owner_token, pool = _set_up(args)
        stack.start()
        base = f"http://127.0.0.1:{web_port}"
        tally = Tally()
        pool_lock, stop_work, stop_faults = threading.Lock(), threading.Event(), threading.Event()
        hard_deadline = time.monotonic() + args.seconds + 120
        threads = [
            threading.Thread(
                target=simulated_worker,
                daemon=True,
                args=(base, slug, pool, pool_lock, tally, stop_work, hard_deadline, args.seed * 1000 + n),
            )
            for n in range(args.threads)
        ]
        injector = threading.Thread(target=inject_faults, args=(stack, tally, stop_faults, rng), daemon=True)
        for thread in threads + ([] if args.no_faults else [injector]):
            thread.start()
        fault_end = time.monotonic() + args.seconds
        wanted = args.prompts * args.k
        while time.monotonic() < fault_end and _labels_stored(slug) < wanted:
            for name, code in stack.exited().items():  # the injector restarts what it kills at once
                tally.violation(f"the {name} process exited by itself (code {code}); see {workdir}/{name}.log")
                stack.start_process(name)
            time.sleep(0.5)
        stop_faults.set()
        if injector.is_alive():
            injector.join()
        # The stack is whole again: every process up, whatever the last fault was.
        for name in stack.names:
            if name not in stack.procs or stack.procs[name].poll() is not None:
                stack.start_process(name)
        stop_work.set()
        for thread in threads:
            thread.join(timeout=60)
        faults_over = time.monotonic()
        checks = _verify(args, base, slug, owner_token, tally, catch_up=args.catch_up)
        _report(args, tally, checks, time.monotonic() - started, time.monotonic() - faults_over, workdir)
        return 1 if tally.violations else 0
    finally:
        stack.stop()
        connections.close_all()
        if db_name is not None:
            with psycopg.connect(args.postgres, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')


def _labels_stored(slug: str) -> int:
    from annotation.models import Label

    return Label.objects.filter(campaign__slug=slug).count()


def _set_up(args):
    """The campaign (through the services, as the app does it) and the accounts with API tokens."""
    import json

    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from annotation import services

    User = get_user_model()
    owner = User.objects.create(username="soak-owner")
    campaign = services.campaign_create(owner=owner, title="Soak", k=args.k, lease_seconds=LEASE_SECONDS)
    rows = "".join(
        json.dumps({"id": f"p{n}", "text": f"Statement {n}.", "gold": n % 2}) + "\n" for n in range(args.prompts)
    )
    services.prompts_import(campaign=campaign, data=rows.encode(), filename="soak.jsonl")
    services.campaign_transition(campaign=campaign, action="launch")
    pool = []
    for n in range(args.identities):
        user = User.objects.create(username=f"soak-worker-{n}")
        pool.append(
            {
                "user_id": user.pk,
                "token": Token.objects.create(user=user).key,
                "free_at": 0.0,
                "busy": False,
                "history": [],
            }
        )
    return campaign.slug, Token.objects.create(user=owner).key, pool


def _verify(args, base, slug, owner_token, tally: Tally, *, catch_up: float) -> dict:
    from annotation.models import Campaign, Label
    from annotation.selectors import invariant_violations
    from audits.selectors import audit_status, latest_snapshot

    campaign = Campaign.objects.get(slug=slug)
    checks = {}
    violations = invariant_violations(campaign=campaign, acknowledged=tally.acks)
    for message in violations:
        tally.violation(message)
    checks["invariant violations"] = len(violations)

    stored = {
        label.pk: (label.worker.user_id, label.prompt.external_id, label.value, label.client_token, label.lease_id)
        for label in Label.objects.filter(campaign=campaign).select_related("worker", "prompt")
    }
    counted = set(Label.objects.counted().filter(campaign=campaign).values_list("pk", flat=True))
    altered = [label_id for label_id, ack in tally.acks.items() if label_id in stored and stored[label_id] != ack]
    for label_id in altered:
        tally.violation(f"acknowledged label {label_id} {tally.acks[label_id]} is stored as {stored[label_id]}")
    checks["labels stored"] = len(stored)
    checks["counted labels"] = len(counted)
    checks["acknowledged labels altered"] = len(altered)

    response = requests.get(
        f"{base}/api/v1/campaigns/{slug}/labels.jsonl", headers={"Authorization": f"Token {owner_token}"}, timeout=120
    )
    import json

    exported = {json.loads(line)["label_id"] for line in response.text.splitlines()}
    unexported = (set(tally.acks) & counted) - exported
    if response.status_code != 200 or unexported or exported != counted:
        tally.violation(
            f"export: status {response.status_code}, {len(exported)} rows for {len(counted)} counted "
            f"labels, {len(unexported)} acknowledged labels missing"
        )
    checks["labels exported"] = len(exported)

    total = len(counted)
    deadline = time.monotonic() + catch_up
    while True:
        status = audit_status(campaign=campaign)
        latest = latest_snapshot(campaign=campaign)
        caught_up = (
            status["labels"] == total and status["behind"] == 0 and latest is not None and latest.watermark == total
        )
        if caught_up or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    checks["audit watermark"] = latest.watermark if latest else None
    checks["audit statistics labels"] = status["labels"]
    if not caught_up:
        tally.violation(
            f"the audit did not catch up within {catch_up} s: {total} labels, statistics {status['labels']}, "
            f"audited {status['audited_labels']}, latest snapshot watermark {latest.watermark if latest else None}"
        )
    return checks


def _report(args, tally: Tally, checks: dict, elapsed: float, catch_up: float, workdir: Path) -> None:
    faults = "no faults (baseline)" if args.no_faults else "faults"
    stack = "the embedded default (SQLite, SQLite broker, no Redis)" if args.embedded else "PostgreSQL and Redis"
    print(
        f"soak: {elapsed:.1f} s in all, up to {args.seconds:g} s of load with {faults} on {stack}; {args.threads} "
        f"simulated workers over {args.identities} accounts; {args.prompts} prompts x k={args.k}; logs in {workdir}"
    )
    print("counts:")
    for name, n in sorted(tally.counts.items()):
        print(f"  {name}: {n}")
    print("latency of answered requests (s): endpoint n p50 p95 max")
    for name, values in sorted(tally.latencies.items()):
        values = sorted(values)
        print(
            f"  {name}: {len(values)} {values[len(values) // 2]:.3f} "
            f"{values[int(len(values) * 0.95)]:.3f} {values[-1]:.3f}"
        )
    print("checks:")
    for name, value in checks.items():
        print(f"  {name}: {value}")
    print(f"  seconds from the end of the load to a caught-up audit: {catch_up:.1f}")
    print(f"violations found: {len(tally.violations)}")
    for message in tally.violations[:50]:
        print(f"  - {message}")


if __name__ == "__main__":
    sys.exit(main())
