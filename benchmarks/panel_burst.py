"""Panel burst benchmark: a study goes live on a panel (Prolific) and N participants arrive within a
minute, then label at a human pace; next-task and submit latency, labels/s, and the largest N served.

One command::

    .venv/bin/python benchmarks/panel_burst.py                                  # N = 25, 50, 100, 200
    .venv/bin/python benchmarks/panel_burst.py --participants 10 --arrival-seconds 10 --seconds 30
    .venv/bin/python benchmarks/panel_burst.py --db sqlite --json

The stack is assignment.py's (gunicorn with --web-workers sync workers, its own redis-server as cache
and Celery broker) plus the production Celery worker (``celery -A config worker -B --concurrency 2
-O fair``), so every label's audit recomputation runs live, as in production. --db postgres (the
default) creates its own database on --postgres (dropped at the end); --db sqlite uses a SQLite file in
a temporary folder (WAL, the settings' defaults). One campaign (--prompts x k=--k, binary) and one
link-based panel publication on it (``publication_create_panel``, --quota labels per session): its
link is the page a Prolific study URL opens. Then, for each N in --participants, N new participants:

* arrive at seeded random times spread uniformly over the first --arrival-seconds, each a thread with
  its own cookie session (``requests``), through ``/channels/panel/<slug>/?PROLIFIC_PID=…&STUDY_ID=…
  &SESSION_ID=…`` (→ /next/ → /task/<lease>/);
* read the task page's label form, wait 3-6 s (seeded), POST "0" or "1" with the form's client token
  and CSRF token, follow the redirect to the next task, until the quota's done page or --seconds after
  the first arrival, when the run for this N ends (participants still labeling leave mid-task);
* latencies, as the client sees them (``time.perf_counter`` around the ``requests`` call, connection
  set-up included): *next-task* = the redirect a label's POST gives, followed until the task page's 200
  (/next/ → /task/<id>/; or /task/<id>/ at once, where the POST claimed the next prompt itself, as
  Chorus's does since issue 24's sixth session); *submit* = the label's POST until its 302 (with that
  claim, where it makes it); *label to next page* = both, from the click to the next task page's 200;
  *arrival* = the study link until the first task page. Labels/s = the
  label POSTs answered 302 during the run / --seconds, and over the part of the
  run when everybody has arrived (the offered rate then is about N / 4.5 s).

At the end: the guarantees on the stored rows (``annotation.selectors.invariant_violations``, must be
0), the labels stored against the POSTs answered 302, how far the live audit is behind, and the SQL
queries each step of the flow costs (one participant, in this process, Django's test client). The
largest N is the largest N tried whose next-task p95 is under --target-ms (the issue's measure), and the
same for label to next page. Since the label's POST claims the next prompt, next-task after a label is
the task page alone and the claim's time is in submit: label to next page is the measure that compares
with runs of trees before that (whose next-task was /next/ and the task page, after the POST).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin

import requests
from assignment import CpuMeter, Stack, percentiles, seed_campaign
from live_audit import process_tree_cpu
from stack import REPO, celery_worker_argv, chorus_env, free_port

FORM = re.compile(r'<form method="post" action="([^"]+)" class="label-form"')
CLIENT_TOKEN = re.compile(r'name="client_token" value="([^"]+)"')
CSRF_TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


# --- The stack ------------------------------------------------------------------------------------


class BurstStack(Stack):
    """assignment.py's redis-server and gunicorn, plus the production Celery worker; stop() ends every
    process group it started, SIGKILL for one that does not stop within 30 s."""

    def start(self) -> None:
        super().start()
        self.start_web(REPO)
        log = open(self.workdir / "celery.log", "ab")
        self.celery = subprocess.Popen(
            celery_worker_argv(self.workdir, f"burst-{uuid.uuid4().hex[:6]}"),
            cwd=REPO,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs.append(self.celery)

    def stop(self) -> None:
        while self.procs:
            proc = self.procs.pop()
            for sig in (signal.SIGTERM, signal.SIGKILL):
                if proc.poll() is not None:
                    break
                try:
                    os.killpg(proc.pid, sig)
                    proc.wait(timeout=30)
                except ProcessLookupError:
                    break
                except subprocess.TimeoutExpired:
                    continue


# --- Participants ---------------------------------------------------------------------------------


def get(session: requests.Session, url: str, **kwargs) -> requests.Response:
    """GET ``url`` and follow its redirects within Chorus, as a browser does. Chorus in production marks
    its session and CSRF cookies Secure (HTTPS only); here it is served over plain HTTP on loopback, as
    behind a TLS-terminating proxy, so the cookies are kept for HTTP too (``requests`` would drop them,
    also between the redirects it follows itself)."""
    while True:
        response = session.get(url, allow_redirects=False, timeout=60, **kwargs)
        keep_cookies_over_http(session)
        location = response.headers.get("Location", "")
        if not (response.is_redirect and location.startswith("/")):
            return response
        url, kwargs = urljoin(url, location), {}


def keep_cookies_over_http(session: requests.Session) -> None:
    for cookie in session.cookies:
        cookie.secure = False


@dataclass
class Tally:
    lock: threading.Lock = field(default_factory=threading.Lock)
    samples: list = field(default_factory=list)  # (step, seconds)
    outcomes: dict = field(default_factory=dict)
    labels_acked: int = 0  # label POSTs answered 302 before the run's end
    labels_acked_late: int = 0  # and after it (sent before it ended)

    def sample(self, step: str, seconds: float) -> None:
        with self.lock:
            self.samples.append((step, seconds))

    def count(self, what: str) -> None:
        with self.lock:
            self.outcomes[what] = self.outcomes.get(what, 0) + 1

    def seconds(self, step: str) -> list[float]:
        return [s for name, s in self.samples if name == step]


def participant(
    base: str,
    link: str,
    arrive_at: float,
    end_at: float,
    tally: Tally,
    stop: threading.Event,
    rng: random.Random,
    acked_times: list,
) -> None:
    """One participant of the panel, from the study link to the done page or the end of the run."""
    if stop.wait(max(0.0, arrive_at - time.perf_counter())):
        return
    session = requests.Session()
    params = {"PROLIFIC_PID": uuid.uuid4().hex[:24], "STUDY_ID": "BURSTSTUDY", "SESSION_ID": uuid.uuid4().hex[:24]}

    try:
        started = time.perf_counter()
        page = get(session, base + link, params=params)
        if started < end_at:
            tally.sample("arrival", time.perf_counter() - started)
        while not stop.is_set():
            form = FORM.search(page.text) if page.status_code == 200 else None
            if form is None:
                tally.count("done page (quota)" if "/done/" in page.url else f"no task page ({page.status_code})")
                return
            body = {
                "value": rng.choice("01"),
                "client_token": CLIENT_TOKEN.search(page.text).group(1),
                "csrfmiddlewaretoken": CSRF_TOKEN.search(page.text).group(1),
            }
            if stop.wait(rng.uniform(3, 6)):  # the human reads the prompt and decides
                return
            clicked = time.perf_counter()
            posted = session.post(urljoin(page.url, form.group(1)), data=body, allow_redirects=False, timeout=60)
            if clicked < end_at:
                tally.sample("submit", time.perf_counter() - clicked)
            keep_cookies_over_http(session)
            if posted.status_code != 302:
                tally.count(f"label POST answered {posted.status_code}")
                return
            answered = time.perf_counter()
            with tally.lock:
                if answered < end_at:
                    tally.labels_acked += 1
                    acked_times.append(answered)
                else:
                    tally.labels_acked_late += 1
            following = urljoin(posted.url, posted.headers["Location"])
            started = time.perf_counter()
            page = get(session, following)
            landed = time.perf_counter()
            if "/task/" not in page.url:
                if started < end_at:
                    tally.sample("to done page", landed - started)
                continue
            if started < end_at:
                tally.sample("next-task", landed - started)
            if clicked < end_at:  # as submit's sample: a cycle whose click came before the end
                tally.sample("label to next page", landed - clicked)
    except requests.RequestException as exc:
        tally.count(f"connection error {type(exc).__name__}")


# --- One N ----------------------------------------------------------------------------------------


@dataclass
class Result:
    participants: int
    seconds: float
    arrival_seconds: float
    labels: int
    labels_late: int
    labels_per_second: float
    labels_per_second_all_arrived: float
    next_task: tuple
    submit: tuple
    label_to_page: tuple
    arrival: tuple
    requests: dict
    outcomes: dict
    cpu: dict
    load: float


def run_n(args, n: int, base: str, link: str, stack: BurstStack, database: str, rng: random.Random) -> Result:
    print(
        f"[N={n}] arrivals over {args.arrival_seconds:g} s, run of {args.seconds:g} s, quota {args.quota}",
        file=sys.stderr,
        flush=True,
    )
    tally, stop, acked_times = Tally(), threading.Event(), []
    start = time.perf_counter() + 0.5
    end = start + args.seconds
    arrivals = sorted(rng.uniform(0, args.arrival_seconds) for _ in range(n))
    threads = [
        threading.Thread(
            target=participant,
            args=(base, link, start + at, end, tally, stop, random.Random(rng.random()), acked_times),
            daemon=True,
        )
        for at in arrivals
    ]
    for thread in threads:
        thread.start()
    meter = CpuMeter(stack.web.pid, database)
    celery_before = process_tree_cpu(stack.celery.pid)
    time.sleep(max(0.0, start - time.perf_counter()))
    meter.start()
    time.sleep(max(0.0, end - time.perf_counter()))
    meter.stop(args.seconds)
    meter.used["celery"] = (process_tree_cpu(stack.celery.pid) - celery_before) / args.seconds
    load = os.getloadavg()[0]
    stop.set()
    for thread in threads:
        thread.join(timeout=90)
    all_arrived = start + arrivals[-1]
    tail = end - all_arrived
    return Result(
        participants=n,
        seconds=args.seconds,
        arrival_seconds=args.arrival_seconds,
        labels=tally.labels_acked,
        labels_late=tally.labels_acked_late,
        labels_per_second=tally.labels_acked / args.seconds,
        labels_per_second_all_arrived=(sum(t >= all_arrived for t in acked_times) / tail if tail > 1 else float("nan")),
        next_task=percentiles(tally.seconds("next-task")),
        submit=percentiles(tally.seconds("submit")),
        label_to_page=percentiles(tally.seconds("label to next page")),
        arrival=percentiles(tally.seconds("arrival")),
        requests={step: len(tally.seconds(step)) for step in ("arrival", "next-task", "submit", "to done page")},
        outcomes=dict(sorted(tally.outcomes.items())),
        cpu=meter.used,
        load=load,
    )


# --- Set-up and checks (in this process, Django configured) ---------------------------------------


def set_up_campaign(args):
    """The campaign (postgres: assignment.py's COPY seeding; sqlite: the real import) and its panel."""
    from django.contrib.auth import get_user_model

    from annotation import services
    from annotation.channels import services as channels

    owner = get_user_model().objects.create(username="burst-researcher")
    started = time.monotonic()
    if args.db == "postgres":
        campaign = seed_campaign(n_prompts=args.prompts, k=args.k, policy="random", owner=owner)
    else:
        campaign = services.campaign_create(owner=owner, title="Panel burst", k=args.k)
        rows = "".join(
            json.dumps({"id": f"p{i}", "text": f"Statement number {i} about everyday life.", "gold": i % 2}) + "\n"
            for i in range(args.prompts)
        )
        services.prompts_import(campaign=campaign, data=rows.encode(), filename="burst.jsonl")
        campaign = services.campaign_transition(campaign=campaign, action="launch")
    print(f"seeded {args.prompts:,} prompts x k={args.k} in {time.monotonic() - started:.1f} s", file=sys.stderr)
    publication = channels.publication_create_panel(
        campaign=campaign, user=owner, completion_code="C0DEBURST", quota_per_session=args.quota
    )
    return campaign, publication.panel


def warm_up(base: str, link: str, n: int) -> None:
    """Each gunicorn worker's first requests import the views and compile the templates: a few rounds
    of the study link without a participant id (its error page) before measuring."""
    threads = [threading.Thread(target=requests.get, args=(base + link,), kwargs={"timeout": 60}) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def query_profile(panel) -> dict:
    """SQL queries and milliseconds of each step of one participant's flow, in this process with
    Django's test client (no HTTP, no concurrency): where a request's time goes, at rest."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    steps: dict = {}

    def step(name, method, *args):
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            response = method(*args)
            steps.setdefault(name, []).append((len(queries), (time.perf_counter() - started) * 1000))
        return response

    for _ in range(2):  # the first participant warms this process up; the second one is measured
        steps.clear()
        client = Client(HTTP_HOST="127.0.0.1")
        link = f"/channels/panel/{panel.slug}/"
        location = step("arrival: link -> 302", client.get, link, {"PROLIFIC_PID": uuid.uuid4().hex[:24]})["Location"]
        for _ in range(5):
            # As a browser: the label's POST leads to the next task page, or to /next/, which leads to it.
            task = location if "/task/" in location else step("next: /next/ -> 302", client.get, location)["Location"]
            page = step("task page: GET 200", client.get, task).content.decode()
            body = {"value": "1", "client_token": CLIENT_TOKEN.search(page).group(1)}
            location = step("submit: POST -> 302", client.post, task, body)["Location"]
    return {
        name: (sum(q for q, _ in runs) / len(runs), sorted(ms for _, ms in runs)[len(runs) // 2])
        for name, runs in steps.items()
    }


def audit_lag(campaign, wait: float) -> dict:
    """The live audit after the load: labels, labels audited; waits up to ``wait`` s for it to catch up."""
    from audits.selectors import audit_status

    deadline = time.monotonic() + wait
    while True:
        status = audit_status(campaign=campaign)
        if status["behind"] == 0 or time.monotonic() > deadline:
            return {"labels": status["labels"], "audited": status["audited_labels"], "behind": status["behind"]}
        time.sleep(1)


# --- Report ---------------------------------------------------------------------------------------


def largest_served(args, results: list[Result], measure: str = "next_task") -> int | None:
    """The largest N whose p95 of ``measure`` (a Result's field) is under --target-ms."""
    served = [r.participants for r in results if getattr(r, measure)[1] < args.target_ms]
    return max(served) if served else None


def report(args, results, checks) -> None:
    print()
    print(
        f"Panel burst: {args.db}, gunicorn {args.web_workers} sync workers, Celery worker (live audit), "
        f"{args.prompts:,} prompts x k={args.k}, quota {args.quota}/participant, one label every 3-6 s, "
        f"arrivals over {args.arrival_seconds:g} s, {args.seconds:g} s per N; {os.cpu_count()} cores shared"
    )
    header = (
        f"{'N':>5} {'labels/s':>8} {'all-in':>6} {'ideal':>5} {'next-task ms p50/p95/p99':>24} "
        f"{'submit ms p50/p95/p99':>21} {'label to page ms p50/p95/p99':>28} {'arrival ms p50/p95/p99':>22} "
        f"{'CPU cores web/pg/celery/clients/machine':>39} {'load':>4}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        cpu = "/".join(f"{r.cpu.get(name, 0):.2f}" for name in ("web", "postgres", "celery", "clients", "machine"))
        print(
            f"{r.participants:>5} {r.labels_per_second:>8.1f} {r.labels_per_second_all_arrived:>6.1f} "
            f"{r.participants / 4.5:>5.1f} {_ms(r.next_task):>24} {_ms(r.submit):>21} {_ms(r.label_to_page):>28} "
            f"{_ms(r.arrival):>22} "
            f"{cpu:>39} {r.load:>4.1f}"
        )
    print(
        "labels/s: over the whole run; all-in: once every participant has arrived; ideal: N / 4.5 s "
        "(the human pace, no server time)"
    )
    for r in results:
        print(f"[N={r.participants}] requests measured: {r.requests}; participants' ends: {r.outcomes}")
    print("\nSQL queries and ms per step, one participant at rest (Django test client, in process):")
    for name, (queries, ms) in checks["query_profile"].items():
        print(f"  {name:<24} {queries:>5.1f} queries {ms:>7.1f} ms")
    print(
        f"\nlabels stored {checks['labels_stored']}, label POSTs answered 302 {checks['labels_acked_total']} "
        "(a refused label is answered 302 too, with a message: stored < answered would show refusals)"
    )
    print(f"live audit after the load: {checks['audit']}")
    print(f"invariant violations: {len(checks['violations'])}")
    for violation in checks["violations"]:
        print(f"  VIOLATION: {violation}")
    print()
    tried = max(r.participants for r in results)
    for measure, what in (("next_task", "next-task"), ("label_to_page", "label to next page")):
        largest = largest_served(args, results, measure)
        if largest is None:
            verdict = f"none of the N tried (p95 >= {args.target_ms:g} ms for every N)"
        elif largest == tried:
            verdict = f"{largest} (the largest N tried: try larger ones)"
        else:
            verdict = str(largest)
        print(f"largest N served with p95 {what} under {args.target_ms:g} ms: {verdict}")
    print(
        "(next-task after a label is the task page; the POST before it claimed the prompt, in submit's time. "
        "Label to next page: from the label's click to the next task page, the POST and its redirect together.)"
    )


def _ms(values: tuple) -> str:
    return "/".join("-" if v != v else f"{v:.0f}" for v in values)


def as_json(args, results, checks) -> str:
    def finite(value):  # NaN (too few samples) is not JSON: null
        if isinstance(value, float) and value != value:
            return None
        if isinstance(value, (list, tuple)):
            return [finite(v) for v in value]
        if isinstance(value, dict):
            return {k: finite(v) for k, v in value.items()}
        return value

    return json.dumps(
        {
            "config": {k: v for k, v in vars(args).items() if k not in ("json", "postgres")},
            "results": [finite(r.__dict__) for r in results],
            "largest_n_served": largest_served(args, results),
            "largest_n_served_label_to_page": largest_served(args, results, "label_to_page"),
            "target_p95_next_task_ms": args.target_ms,
            "invariant_violations": checks["violations"],
            "labels_stored": checks["labels_stored"],
            "labels_answered_302": checks["labels_acked_total"],
            "audit": checks["audit"],
            "query_profile": checks["query_profile"],
        },
        indent=2,
    )


# --- Main -----------------------------------------------------------------------------------------


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--participants",
        type=lambda s: sorted({int(n) for n in s.split(",")}),
        default=[25, 50, 100, 200],
        help="values of N, comma-separated",
    )
    parser.add_argument("--seconds", type=float, default=90, help="length of the run for each N")
    parser.add_argument("--arrival-seconds", type=float, default=60, help="arrivals spread over this window")
    parser.add_argument("--quota", type=int, default=20, help="labels per participant session")
    parser.add_argument("--prompts", type=int, default=20_000)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--web-workers", type=int, default=5, help="gunicorn sync workers")
    parser.add_argument("--db", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--target-ms", type=float, default=300, help="p95 next-task latency that counts as served")
    parser.add_argument("--audit-wait", type=float, default=30, help="seconds to let the live audit catch up")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the clean-up below on kill too

    import psycopg

    workdir = Path(tempfile.mkdtemp(prefix="chorus-burst-"))
    redis_port = free_port()
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    settings = {"REDIS_URL": redis_url, "CELERY_BROKER_URL": redis_url}
    database = "(sqlite)"
    if args.db == "postgres":
        database = f"chorus_burst_{uuid.uuid4().hex[:8]}"
        settings["DATABASE_URL"] = args.postgres.rsplit("/", 1)[0] + "/" + database
        with psycopg.connect(args.postgres, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{database}"')
    env = chorus_env(workdir, **settings)
    os.environ.update(env)
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections

    from annotation.models import Label
    from annotation.selectors import invariant_violations

    stack = BurstStack(env, workdir, redis_port=redis_port, web_workers=args.web_workers)
    status = 1
    try:
        call_command("migrate", verbosity=0)
        campaign, panel = set_up_campaign(args)
        stack.start()
        base, link = f"http://127.0.0.1:{stack.web_port}", f"/channels/panel/{panel.slug}/"
        for _ in range(3):
            warm_up(base, link, 2 * args.web_workers)
        rng = random.Random(args.seed)
        results = [run_n(args, n, base, link, stack, database, rng) for n in args.participants]
        checks = {
            "audit": audit_lag(campaign, args.audit_wait),
            "labels_acked_total": sum(r.labels + r.labels_late for r in results),
            "labels_stored": Label.objects.filter(campaign=campaign).count(),
            "query_profile": query_profile(panel),
        }
        checks["violations"] = invariant_violations(campaign=campaign)
        if args.json:
            print(as_json(args, results, checks))
        else:
            report(args, results, checks)
        status = 1 if checks["violations"] else 0
        return status
    finally:
        stack.stop()
        connections.close_all()
        if args.db == "postgres":
            with psycopg.connect(args.postgres, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        if status == 0:
            shutil.rmtree(workdir)
        else:
            print(f"gunicorn, Celery and redis logs kept in {workdir}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
