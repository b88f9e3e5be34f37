"""Claim + submit cost benchmark: SQL queries per request and web CPU per cycle, per worker path, with
an optional A/B against another git revision in the same run.

One command::

    .venv/bin/python benchmarks/cycle_cost.py                        # this tree, SQLite
    .venv/bin/python benchmarks/cycle_cost.py --against HEAD~1       # A/B: HEAD~1 then this tree, alternating
    .venv/bin/python benchmarks/cycle_cost.py --db postgres --profile

In one process (Django's test client: no HTTP, no concurrency, no server), with production settings
(``stack.chorus_env``), on a fresh database: a SQLite file in a temporary folder with the embedded
broker, or --db postgres: a database created on --postgres and dropped at the end, with Redis for the
cache and the broker as in production (--redis, a database it empties). No Celery worker: the audit run
each submit schedules stays queued. One launched campaign (--prompts binary prompts, k =
--k) and, for each path, a new worker doing next-task + submit cycles:

* ``api``: the REST API with a token (POST next-task, POST submit);
* ``api-next``: the same client asking for its next prompt with each submit (``"next": true``): a cycle is
  one POST, next-task only where the answer brings no prompt (the first cycle, or a tree without it);
* ``html``: a signed-in user's task pages (GET /w/<slug>/next/ -> 302, GET the task page, POST the label
  -> 302, form-encoded), following the redirects as a browser does: where the POST redirects to the
  next task page, the next cycle starts there, without the GET of next;
* ``panel``: a panel participant's (the study link once, then the same requests under /channels/panel/).

Queries are counted over --count-cycles cycles (``CaptureQueriesContext``), then the CPU of --cycles
cycles is measured without counting (``time.process_time``: this process's CPU, which here is the web
side plus SQLite's own work; on PostgreSQL the server's CPU is not included). --profile adds a cProfile
breakdown of the timed cycles' CPU, by where it is spent (self time, grouped by package).

--against REV checks REV out with ``git worktree`` in a temporary folder and runs this same script on
both trees, each in a fresh process, alternating --rounds times (REV first), then prints both side by
side. The machine is shared: compare runs made together, not across days.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlencode

HERE = Path(__file__).resolve().parent
FORM = "application/x-www-form-urlencoded"
CLIENT_TOKEN = re.compile(r'name="client_token" value="([^"]+)"')
PATHS = ("api", "api-next", "html", "panel")

# Where self time goes, by the file a function is defined in: first match wins.
CATEGORIES = (
    ("DRF (parsing, negotiation, serializers, views)", ("rest_framework",)),
    ("templates", ("django/template", "django/templatetags", "django/forms")),
    ("sessions, auth, messages", ("django/contrib/sessions", "django/contrib/auth", "django/contrib/messages")),
    ("ORM: SQL compilation", ("django/db/models/sql",)),
    ("ORM: querysets, model objects", ("django/db/models",)),
    ("database driver and backend", ("django/db/backends", "sqlite3", "psycopg")),
    ("transactions", ("django/db/transaction",)),
    ("audit statistics hook (audits/)", ("/audits/",)),
    ("Celery/kombu (scheduling the audit)", ("celery", "kombu")),
    (
        "middleware, handlers, URL routing, test client",
        ("django/core", "django/middleware", "django/urls", "django/test", "django/http"),
    ),
    ("Chorus annotation code", ("/annotation/",)),
    ("other Django", ("django/",)),
)


def measure(args) -> dict:
    """Run the cycles in this process against the Chorus tree at args.repo; returns the figures."""
    sys.path.insert(0, str(HERE))
    from stack import chorus_env

    workdir = Path(tempfile.mkdtemp(prefix="chorus-cycle-"))
    settings = {}
    database = None
    if args.db == "postgres":
        import psycopg

        database = f"chorus_cycle_{uuid.uuid4().hex[:8]}"
        settings["DATABASE_URL"] = args.postgres.rsplit("/", 1)[0] + "/" + database
        # Production's stack: the audit's debounce is one Redis command, its run a Redis message.
        settings["REDIS_URL"] = settings["CELERY_BROKER_URL"] = args.redis
        _redis_flush(args.redis)
        with psycopg.connect(args.postgres, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{database}"')
    os.environ.update(chorus_env(workdir, **settings))
    os.chdir(args.repo)
    sys.path.insert(0, str(args.repo))
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections

    try:
        call_command("migrate", verbosity=0)
        return _cycles(args)
    finally:
        connections.close_all()
        shutil.rmtree(workdir, ignore_errors=True)
        if database:
            import psycopg

            with psycopg.connect(args.postgres, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            _redis_flush(args.redis)


def _redis_flush(url: str) -> None:
    """Empty the benchmark's own Redis database (--redis): no debounce key or queued audit run of an
    earlier run is left to change this one's work."""
    import redis

    redis.Redis.from_url(url).flushdb()


def _cycles(args) -> dict:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from annotation import services
    from annotation.channels import services as channels

    users = get_user_model().objects
    owner = users.create(username="cycle-researcher")
    campaign = services.campaign_create(owner=owner, title="Cycle cost", k=args.k)
    rows = "".join(json.dumps({"id": f"p{i}", "text": f"Statement {i}."}) + "\n" for i in range(args.prompts))
    services.prompts_import(campaign=campaign, data=rows.encode(), filename="cycle.jsonl")
    campaign = services.campaign_transition(campaign=campaign, action="launch")
    panel = channels.publication_create_panel(campaign=campaign, user=owner, completion_code="C0DECYCLE").panel

    def api_worker():
        user = users.create(username=f"api-{uuid.uuid4().hex[:8]}")
        token = services.api_token_get_or_create(user=user).key
        client = Client(HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION=f"Token {token}")

        def cycle(step):
            lease = step("next-task", client.post, f"/api/v1/campaigns/{campaign.slug}/next-task/").json()["lease"]
            body = json.dumps({"value": 1, "client_token": uuid.uuid4().hex})
            response = step("submit", client.post, f"/api/v1/leases/{lease['id']}/submit/", body, "application/json")
            assert response.status_code == 201, response.content

        return cycle

    def api_next_worker():
        user = users.create(username=f"api-next-{uuid.uuid4().hex[:8]}")
        token = services.api_token_get_or_create(user=user).key
        client = Client(HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION=f"Token {token}")
        held = {"lease": None}

        def cycle(step):
            lease = (
                held["lease"]
                or step("next-task", client.post, f"/api/v1/campaigns/{campaign.slug}/next-task/").json()["lease"]
            )
            body = json.dumps({"value": 1, "client_token": uuid.uuid4().hex, "next": True})
            response = step("submit", client.post, f"/api/v1/leases/{lease['id']}/submit/", body, "application/json")
            assert response.status_code == 201, response.content
            held["lease"] = (response.json().get("next_task") or {}).get("lease")

        return cycle

    def page_worker(client, next_url):
        # As a browser: the label's POST redirects to the next task page, or to next, which redirects to it.
        followed = {"task": None}

        def cycle(step):
            task = followed["task"] or step("next: GET -> 302", client.get, next_url)["Location"]
            page = step("task page: GET", client.get, task).content.decode()
            # Form-encoded, as a browser sends the label form (the test client's default is multipart).
            body = urlencode({"value": "1", "client_token": CLIENT_TOKEN.search(page).group(1)})
            response = step("submit: POST -> 302", client.post, task, body, FORM)
            assert response.status_code == 302, response.content[:500]
            followed["task"] = response["Location"] if "/task/" in response["Location"] else None

        return cycle

    def html_worker():
        client = Client(HTTP_HOST="127.0.0.1")
        client.force_login(users.create(username=f"html-{uuid.uuid4().hex[:8]}"))
        return page_worker(client, f"/w/{campaign.slug}/next/")

    def panel_worker():
        client = Client(HTTP_HOST="127.0.0.1")
        arrival = client.get(f"/channels/panel/{panel.slug}/", {"PROLIFIC_PID": uuid.uuid4().hex[:24]})
        return page_worker(client, arrival["Location"])

    makers = {"api": api_worker, "api-next": api_next_worker, "html": html_worker, "panel": panel_worker}
    results = {}
    for name in args.paths:
        cycle = makers[name]()
        for _ in range(args.warmup):
            cycle(lambda _name, method, *a: method(*a))
        queries: dict[str, list[int]] = {}

        def counted(step_name, method, *a, queries=queries, name=name):
            with CaptureQueriesContext(connection) as captured:
                response = method(*a)
            queries.setdefault(step_name, []).append(len(captured))
            if args.show_queries and len(queries[step_name]) == 1:
                print(f"--- {name} {step_name}", *(q["sql"][:300] for q in captured), sep="\n", file=sys.stderr)
            return response

        for _ in range(args.count_cycles):
            cycle(counted)
        # CPU time, not the wall clock: on PostgreSQL the wall clock would count the waits for the
        # server as the driver's time.
        profiler = cProfile.Profile(time.process_time) if args.profile else None
        started = time.process_time()
        if profiler:
            profiler.enable()
        for _ in range(args.cycles):
            cycle(lambda _name, method, *a: method(*a))
        if profiler:
            profiler.disable()
        cpu_ms = (time.process_time() - started) * 1000 / args.cycles
        results[name] = {
            "queries": {step: sum(n) / args.count_cycles for step, n in queries.items()},
            "cpu_ms_per_cycle": cpu_ms,
            "profile": _breakdown(profiler, args.cycles) if profiler else None,
        }
    return results


# Inclusive time of the steps of a cycle, by function name (file suffix, function): where the queries
# above are issued and what each costs with its ORM work included. They nest (label_submit includes the
# statistics hook), so they do not add up.
STEPS = (
    ("annotation/services/assignment.py", "lease_acquire"),
    ("annotation/services/assignment.py", "label_submit"),
    ("audits/services/stats.py", "label_stats_add"),
    ("audits/services/quality_stats.py", "quality_stats_add"),
    ("annotation/services/workers.py", "worker_get_or_create"),
    ("annotation/selectors/campaigns.py", "campaign_for_workers"),
    ("annotation/selectors/assignment.py", "lease_for_worker"),
    ("annotation/selectors/workers.py", "worker_progress"),
    ("django/shortcuts.py", "render"),
    ("rest_framework/authentication.py", "authenticate_credentials"),
    ("django/contrib/sessions/backends/db.py", "load"),
    ("django/contrib/auth/__init__.py", "get_user"),
    ("django/contrib/sessions/middleware.py", "process_response"),
    ("django/contrib/messages/middleware.py", "process_response"),
    ("rest_framework/views.py", "finalize_response"),
    ("rest_framework/serializers.py", "data"),
    ("django/db/transaction.py", "__exit__"),
)


def _breakdown(profiler: cProfile.Profile, cycles: int) -> dict[str, dict[str, float]]:
    """Self time per category (CATEGORIES) and inclusive time per step (STEPS), in ms per cycle. A C
    function's self time (the database driver's execute, a dict lookup) counts in its callers'
    categories, shared as it was spent under each."""
    stats = pstats.Stats(profiler).stats

    def category(filename: str) -> str:
        path = filename.replace("\\", "/")
        return next((label for label, parts in CATEGORIES if any(p in path for p in parts)), "other (Python, stdlib)")

    totals: dict[str, float] = {}
    steps: dict[str, float] = {}
    for (filename, _line, name), (_cc, _nc, tottime, cumtime, callers) in stats.items():
        for suffix, function in STEPS:
            if filename.endswith(suffix) and name == function:
                steps[f"{function} ({suffix.rsplit('/', 1)[-1]})"] = cumtime * 1000 / cycles
        if filename == "~" and callers:
            spent = sum(entry[2] for entry in callers.values()) or 1.0
            for (caller_file, _l, _n), entry in callers.items():
                share = category(caller_file)
                totals[share] = totals.get(share, 0.0) + tottime * entry[2] / spent * 1000 / cycles
            continue
        totals[category(filename)] = totals.get(category(filename), 0.0) + tottime * 1000 / cycles
    by_size = lambda figures: dict(sorted(figures.items(), key=lambda item: -item[1]))  # noqa: E731
    return {"self": by_size(totals), "steps": by_size(steps)}


def run_tree(args, repo: Path) -> dict:
    """This script, measuring the tree at ``repo``, in a fresh process."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--measure", "--repo", str(repo), "--json"]
    argv += ["--db", args.db, "--postgres", args.postgres, "--redis", args.redis]
    argv += ["--prompts", str(args.prompts), "--k", str(args.k)]
    argv += ["--cycles", str(args.cycles), "--count-cycles", str(args.count_cycles), "--warmup", str(args.warmup)]
    argv += ["--paths", ",".join(args.paths)] + (["--profile"] if args.profile else [])
    done = subprocess.run(argv, check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


def report(named: list[tuple[str, dict]]) -> None:
    names = [name for name, _ in named]
    header = "  " + " " * 29 + "  ".join(f"{name:>12}" for name in names)
    print("queries per cycle, by request (mean over the counted cycles; a request a cycle does not make: 0)")
    print(header)
    first = named[0][1]
    for path in first:
        steps = dict.fromkeys(step for _, runs in named for step in runs[path]["queries"])
        for step in [*steps, "all"]:
            counts = [runs[path]["queries"] for _, runs in named]
            figures = "  ".join(
                f"{sum(count.values()) if step == 'all' else count.get(step, 0):>12.1f}" for count in counts
            )
            print(f"  {path:<8} {step:<20} {figures}")
    print("\nCPU ms per cycle (this process: the web side, plus SQLite itself on --db sqlite)")
    print(header)
    for path in first:
        figures = "  ".join(f"{runs[path]['cpu_ms_per_cycle']:>12.2f}" for _, runs in named)
        print(f"  {path:<28} {figures}")
    for name, runs in named:
        for path, result in runs.items():
            if result["profile"]:
                print(f"\nprofile {name} {path}: ms per cycle under cProfile (which inflates them)")
                print("  self time, by where it is spent:")
                for category, ms in result["profile"]["self"].items():
                    print(f"  {ms:7.2f}  {category}")
                print("  inclusive time of the steps (nested: they do not add up):")
                for step, ms in result["profile"]["steps"].items():
                    print(f"  {ms:7.2f}  {step}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument(
        "--redis", default="redis://127.0.0.1:6379/14", help="with --db postgres; a database it empties"
    )
    parser.add_argument("--prompts", type=int, default=2000)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--cycles", type=int, default=200, help="timed cycles per path")
    parser.add_argument("--count-cycles", type=int, default=5, help="cycles whose queries are counted")
    parser.add_argument("--warmup", type=int, default=20, help="cycles before counting and timing")
    parser.add_argument("--paths", type=lambda s: s.split(","), default=list(PATHS), help="api,api-next,html,panel")
    parser.add_argument("--profile", action="store_true", help="cProfile breakdown of the timed cycles")
    parser.add_argument("--show-queries", action="store_true", help="print one cycle's SQL per request (stderr)")
    parser.add_argument("--against", help="git revision to compare with (A/B in one run)")
    parser.add_argument("--rounds", type=int, default=2, help="A/B: runs of each tree, alternating")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--repo", type=Path, default=HERE.parent, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.show_queries:
        args.measure = True  # in this process, so that the SQL reaches the terminal
    if args.measure:
        results = measure(args)
        print(json.dumps(results))
        return 0
    if not args.against:
        named = [("this tree", run_tree(args, args.repo))]
    else:
        other = Path(tempfile.mkdtemp(prefix="chorus-ab-")) / "tree"
        git = ["git", "-C", str(args.repo)]
        subprocess.run([*git, "worktree", "add", "--detach", str(other), args.against], check=True, capture_output=True)
        try:
            named = []
            for round_ in range(args.rounds):
                named.append((f"{args.against} #{round_ + 1}", run_tree(args, other)))
                named.append((f"this #{round_ + 1}", run_tree(args, args.repo)))
        finally:
            subprocess.run([*git, "worktree", "remove", "--force", str(other)], check=True, capture_output=True)
            shutil.rmtree(other.parent, ignore_errors=True)
    if args.json:
        print(json.dumps(dict(named)))
    else:
        report(named)
    return 0


if __name__ == "__main__":
    sys.exit(main())
