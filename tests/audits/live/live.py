"""Real processes for the ``services`` tests: redis-server, a Celery worker, a web-side submitter.

Every process is started here, in its own session, and stopped here by its own id. Each gets the
environment production would give it (``REDIS_URL``) plus the test database, so the settings path
is the production one (settings read ``REDIS_URL`` at import).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.db import connection

from audits.models import AuditSnapshot
from benchmarks.stack import celery_worker_argv, free_port, redis_server_argv

BASE_DIR = Path(settings.BASE_DIR)
# The worker's audit settings in these tests: a 1 s beat sweep, and every snapshot kept.
WORKER_ENV = {"CHORUS_AUDIT_SWEEP_SECONDS": 1, "CHORUS_AUDIT_HISTORY_RESOLUTION": 0}
# Without the beat sweep's help: snapshots can only come from the labels' own on-commit triggers.
NO_SWEEP = {**WORKER_ENV, "CHORUS_AUDIT_SWEEP_SECONDS": 3600}


def db_env() -> dict:
    """Environment that points another process at this test run's database."""
    sd = connection.settings_dict
    if connection.vendor == "sqlite":
        return {"CHORUS_SQLITE_PATH": str(sd["NAME"]), "DATABASE_URL": None}
    password = f":{sd['PASSWORD']}" if sd.get("PASSWORD") else ""
    return {
        "DATABASE_URL": (
            f"postgres://{sd['USER']}{password}@{sd['HOST'] or '127.0.0.1'}:{sd['PORT'] or 5432}/{sd['NAME']}"
        )
    }


def process_env(redis_url: str, **extra) -> dict:
    env = dict(os.environ)
    for name in ("CELERY_BROKER_URL", "DATABASE_URL", "CHORUS_SQLITE_PATH"):
        env.pop(name, None)
    env.update({"REDIS_URL": redis_url, "DJANGO_SETTINGS_MODULE": "config.settings", "PYTHONUNBUFFERED": "1"})
    for name, value in {**db_env(), **extra}.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = str(value)
    return env


def _stop(proc: subprocess.Popen, timeout: float = 15) -> None:
    if proc.poll() is not None:
        return
    try:
        proc.terminate()  # the main process shuts its own children down (a worker's pool, its beat)
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the process group we created, nothing else
        proc.wait(timeout=5)
    except ProcessLookupError:
        pass
    try:  # leftovers of our group (pool children of a main process that died): none may outlive the test
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class RedisServer:
    """Our own redis-server on a free port (never the machine's main one), stoppable and restartable."""

    def __init__(self, workdir: Path):
        self.port = free_port()
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            redis_server_argv(self.port, self.workdir),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)
            self.proc = None


class CeleryWorker:
    """``celery -A config worker -B`` (the production command, with its beat) as a subprocess."""

    def __init__(self, redis_url: str, workdir: Path, **env):
        self.redis_url = redis_url
        self.workdir = workdir
        self.log_path = workdir / f"celery-{free_port()}.log"
        self.env = env
        self.proc: subprocess.Popen | None = None

    def command(self) -> list[str]:
        return celery_worker_argv(self.workdir, f"live-{os.getpid()}-{free_port()}")

    def start(self, timeout: float = 60) -> None:
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            self.command(),
            cwd=BASE_DIR,
            env=process_env(self.redis_url, **self.env),
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"celery worker exited ({self.proc.returncode}):\n{self.output()}")
            if " ready." in self.output():
                return
            time.sleep(0.1)
        raise RuntimeError(f"celery worker not ready after {timeout} s:\n{self.output()}")

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)
            self.proc = None
            self.log.close()


class Submitter:
    """The web side (``submitter.py``): label_submit with production settings, in its own process."""

    def __init__(self, redis_url: str, **env):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.audits.live.submitter"],
            cwd=BASE_DIR,
            env=process_env(redis_url, **env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        ready = self._read(60)
        assert ready.get("ready"), ready

    def _read(self, timeout: float) -> dict:
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not r:
            raise TimeoutError("the submitter did not answer")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the submitter exited ({self.proc.poll()})")
        return json.loads(line)

    def ask(self, timeout: float = 120, **command) -> dict:
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        answer = self._read(timeout)
        assert answer.get("ok"), answer
        return answer

    def stop(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        _stop(self.proc)


def wait_for(predicate, *, timeout: float, interval: float = 0.1, what: str = "condition"):
    """Poll ``predicate`` until it returns something truthy; return it, or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def snapshot_covering(campaign, watermark: int, kind: str = "quick"):
    """The newest snapshot of ``kind`` computed on at least ``watermark`` labels, or None."""
    return (
        AuditSnapshot.objects.filter(campaign=campaign, kind=kind, watermark__gte=watermark)
        .order_by("-watermark")
        .first()
    )
