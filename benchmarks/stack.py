"""The throwaway service processes that the benchmarks (and the live tests) start beside Chorus: free
ports, waiting for a port to listen, and a private ``redis-server``. No Django here: the benchmarks
import it before they configure Django, and the tests import it as ``benchmarks.stack``."""

from __future__ import annotations

import os
import socket
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # gunicorn and celery sit beside the interpreter that runs us


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def redis_server_argv(port: int, folder: Path) -> list[str]:
    """A redis-server on loopback that keeps nothing on disk (a restart starts it empty, like the
    machine's own Redis here), never the machine's Redis."""
    return [
        "redis-server",
        "--bind",
        "127.0.0.1",
        "--port",
        str(port),
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(folder),
    ]


def celery_worker_argv(folder: Path, name: str) -> list[str]:
    """The demo's Celery worker (with its embedded beat; README "Live audits"), its beat schedule in
    ``folder``, named ``name``@host so that two on one machine never answer for each other."""
    return [
        str(BIN / "celery"),
        "-A",
        "config",
        "worker",
        "-B",
        "--concurrency",
        "2",
        "-O",
        "fair",
        "--loglevel",
        "INFO",
        "--schedule",
        str(folder / "celerybeat-schedule"),
        "-n",
        f"{name}@%h",
    ]


def chorus_env(workdir: Path, **settings: str) -> dict[str, str]:
    """The environment of the Chorus processes a benchmark starts (and of the benchmark itself, which
    configures Django with it): this process's, less any Django, Chorus, Celery, Redis or database
    setting it has, in production mode (a random secret key) over plain HTTP on loopback, its files in
    ``workdir``/var; plus ``settings`` (DATABASE_URL, REDIS_URL, ...). Without DATABASE_URL and
    REDIS_URL it is the embedded default: SQLite and its broker in ``workdir``/var."""
    return {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("DJANGO_", "CHORUS_", "CELERY_", "REDIS_", "DATABASE_"))
        },
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DJANGO_SECRET_KEY": "bench-" + uuid.uuid4().hex * 2,
        "DJANGO_SECURE_SSL_REDIRECT": "0",  # plain HTTP on loopback
        "CHORUS_VAR_DIR": str(workdir / "var"),
        **settings,
    }
