"""``manage.py demo`` keeps its processes going: a Celery worker or web server that dies is restarted,
the restart is said, and the web server keeps answering meanwhile (never taken down by the worker)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from benchmarks.stack import free_port

BASE_DIR = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.services


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def _session_members(sid: int) -> list[int]:
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # exited meanwhile
            continue
        if int(fields[3]) == sid and fields[0] != "Z":  # field 6 of stat, the session id; zombies are gone
            members.append(int(stat.parent.name))
    return members


def _wait_for_line(proc, lines: list[str], text: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"the demo exited ({proc.poll()}); it said:\n{''.join(lines)}")
        lines.append(line)
        if text in line:
            return line
    raise AssertionError(f"no line with {text!r} within {timeout} s; the demo said:\n{''.join(lines)}")


def test_the_demo_restarts_a_dead_celery_worker_and_keeps_the_web_server(tmp_path):
    port = free_port()
    env = {**os.environ, "CHORUS_VAR_DIR": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    for name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "CHORUS_SQLITE_PATH", "DJANGO_SETTINGS_MODULE"):
        env.pop(name, None)
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "demo", "--no-crowd", "--port", str(port)],
        cwd=BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    try:
        _wait_for_line(proc, lines, "Press Ctrl-C to stop", timeout=120)
        [celery] = [pid for pid in _children(proc.pid) if "celery" in _cmdline(pid)]
        os.kill(celery, signal.SIGKILL)  # however it dies (it used to on a half-written message)
        _wait_for_line(proc, lines, "The celery process exited (code -9); restarting it", timeout=30)
        _wait_for_line(proc, lines, "The celery process is running again (restart 1)", timeout=30)
        assert requests.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=10).status_code == 200
        [again] = [pid for pid in _children(proc.pid) if "celery" in _cmdline(pid)]
        assert again != celery and proc.poll() is None
        # The dead worker's pool processes and beat (its session) went with it: one beat, not two.
        assert not _session_members(celery), _session_members(celery)

        [web] = [pid for pid in _children(proc.pid) if "gunicorn" in _cmdline(pid)]
        os.killpg(web, signal.SIGKILL)  # the whole web server, master and workers
        _wait_for_line(proc, lines, "The web process is running again (restart 1)", timeout=30)
        deadline = time.monotonic() + 30
        while True:
            try:
                assert requests.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=10).status_code == 200
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline, "the restarted web server never answered"
                time.sleep(0.3)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGINT)
            out, _ = proc.communicate(timeout=60)
            lines.append(out)
    assert "Stopped." in "".join(lines) and proc.returncode == 0, "".join(lines)
