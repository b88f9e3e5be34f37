"""The throwaway service processes that the benchmarks (and the live tests) start beside Chorus: free
ports, waiting for a port to listen, and a private ``redis-server``. No Django here: the benchmarks
import it before they configure Django, and the tests import it as ``benchmarks.stack``."""

from __future__ import annotations

import socket
import sys
import time
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
