"""``manage.py demo``: Chorus on the embedded default with a live demo campaign and a simulated crowd.

Sets up the database, a researcher account and a launched demo campaign (annotation/demo.py), then
runs the web server, a Celery worker and a crowd of simulated workers (annotation/crowd.py) that label
through the real worker pages. It keeps all of it going for as long as it runs: new prompts are
imported before the campaign runs out, a simulated worker who leaves is replaced by a newcomer, and a
web server or Celery worker that exits is restarted (and the restart said). Ctrl-C stops everything.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from annotation import selectors
from annotation.crowd import Crowd
from annotation.demo import DEMO_K, DEMO_PASSWORD, DEMO_USERNAME, demo_account, demo_campaign, demo_refill, demo_truth
from annotation.models import Campaign

# The Celery worker of the embedded default (its broker is a SQLite file: no server needed), with its
# beat (-B: the audit sweep that heals lost recomputations) and two pool processes (a full audit does
# not hold up the live numbers: -O fair gives tasks to idle pool processes only).
CELERY_WORKER_ARGS = ["-m", "celery", "-A", "config", "worker", "-B", "--concurrency", "2", "-O", "fair", "-l", "info"]
PROGRESS_EVERY = 10  # seconds between progress lines
TICK = 1.0  # seconds between looks at the children, the crowd and the campaign
# Slows the crowd's personalities down so the first 300 labels arrive over a few minutes, not one.
CROWD_PAUSE_SCALE = 2.0
# A child that exits within this many seconds of its start is restarted only after a growing pause
# (2, 4, … 30 s), so a child that cannot start does not spin.
QUICK_EXIT = 10.0
MAX_RESTART_PAUSE = 30.0
# Why a simulated worker left (Crowd's stopped_by), in words.
LEAVING = {
    "volume": "as many as they meant to give",
    "nothing_left": "nothing left for them",
    "error": "gave up after errors",
    "stop": "stopped",
}


def port_is_free(port: int) -> bool:
    """Whether a server could listen on 127.0.0.1:``port`` now.

    SO_REUSEADDR, as gunicorn sets it: without it, the connections of a demo that just stopped (in
    TIME_WAIT for about a minute) would make a free port look taken.
    """
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass
class Child:
    """One supervised process: its command line, the running process, and its restarts."""

    name: str
    argv: list[str]
    log: Path
    proc: subprocess.Popen | None = None
    started: float = 0.0
    restarts: int = 0
    quick_exits: int = 0
    restart_at: float | None = None
    exits: list[int] = field(default_factory=list)

    def start(self) -> None:
        # A session of its own: the terminal's Ctrl-C reaches only the demo, which then stops the
        # children in order (crowd first, then web and worker).
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.started = time.monotonic()
        self.restart_at = None

    def check(self, say) -> None:
        """Restart the process if it has exited, saying so; wait first if it keeps exiting at once."""
        now = time.monotonic()
        if self.restart_at is not None:
            if now >= self.restart_at:
                self.restarts += 1
                self.start()
                say(f"The {self.name} process is running again (restart {self.restarts}).")
            return
        code = self.proc.poll()
        if code is None:
            return
        self.exits.append(code)
        try:  # leftovers of its session (a dead worker's pool processes and beat) must not run on beside the new one
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.quick_exits = self.quick_exits + 1 if now - self.started < QUICK_EXIT else 0
        pause = min(MAX_RESTART_PAUSE, 2.0**self.quick_exits) if self.quick_exits else 0.0
        say(
            f"The {self.name} process exited (code {code}); restarting it"
            + (f" in {pause:.0f} s" if pause else "")
            + f". Its log: {self.log}"
        )
        self.restart_at = now + pause
        if not pause:
            self.check(say)

    def stop(self, warn) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            warn(f"The {self.name} process did not stop in 10 s; killing it.")
            os.killpg(self.proc.pid, signal.SIGKILL)  # its own session: the Celery pool and beat go too
            self.proc.wait()


def _interrupt(signum, frame):
    """SIGTERM (a supervisor, a test) stops the demo the way Ctrl-C does."""
    raise KeyboardInterrupt


class Command(BaseCommand):
    help = "Run Chorus with a demo campaign, a Celery worker and a simulated crowd (Ctrl-C stops it all)."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--crowd", type=int, default=12, metavar="N", help="simulated workers (default 12)")
        parser.add_argument("--no-crowd", action="store_true", help="run without simulated workers")

    def handle(self, *args, port: int, crowd: int, no_crowd: bool, **options):
        if not port_is_free(port):  # else the crowd might label on whatever server holds the port
            raise CommandError(f"Port {port} is in use; choose another with --port.")
        self.stdout.write("Preparing the database …")
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        user, _ = demo_account()
        campaign, created = demo_campaign(user)
        base = f"http://127.0.0.1:{port}"
        logs = Path(settings.VAR_DIR) / "demo-logs"
        logs.mkdir(exist_ok=True)

        # Ctrl-C raises KeyboardInterrupt even when a launcher started us with SIGINT ignored; SIGTERM too.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, _interrupt)
        children = [
            Child(
                "web",
                [
                    sys.executable,
                    "-m",
                    "gunicorn",
                    "config.wsgi:application",
                    "--bind",
                    f"127.0.0.1:{port}",
                    "--workers",
                    "2",
                    "--graceful-timeout",
                    "5",
                    "--no-control-socket",
                ],
                logs / "web.log",
            ),
            Child("celery", [sys.executable, *CELERY_WORKER_ARGS], logs / "celery.log"),
        ]
        simulated = None
        try:
            for child in children:
                child.start()
            self._wait_for(base, children[0])
            self._banner(base, campaign, created, logs)
            if not no_crowd and crowd > 0:
                simulated = Crowd(
                    base_url=base, slug=campaign.slug, size=crowd, truth=demo_truth(), pause_scale=CROWD_PAUSE_SCALE
                )
                simulated.start(stagger=0.5)
                self.stdout.write(f"A crowd of {crowd} simulated workers is labeling. Press Ctrl-C to stop.")
            else:
                self.stdout.write("No simulated crowd. Press Ctrl-C to stop.")
            self._watch(campaign, children, simulated)
        except KeyboardInterrupt:
            self.stdout.write("\nStopping …")
        finally:
            if simulated is not None:
                simulated.stop(timeout=10)
            for child in children:
                child.stop(self.stderr.write)
        self.stdout.write("Stopped.")

    def _wait_for(self, base: str, web: Child, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if web.proc.poll() is not None:
                raise CommandError(f"The web server exited (code {web.proc.returncode}); see its log in {web.log}.")
            try:
                requests.get(base + "/", timeout=5)
                return
            except requests.RequestException:  # not listening yet, or a worker still booting
                time.sleep(0.3)
        raise CommandError(f"The web server did not answer on {base} within {timeout:.0f} s.")

    def _banner(self, base: str, campaign: Campaign, created: bool, logs: Path) -> None:
        lines = [
            "",
            f"Chorus is running at {base}/",
            f"  Home:            {base}/",
            f"  Demo campaign:   {base}/campaigns/{campaign.slug}/   ({'new' if created else 'continued'})",
            f"  Noise dashboard: {base}/audits/{campaign.slug}/",
            f"  Workers' link:   {base}/w/{campaign.slug}/",
            f"  Admin:           {base}/admin/",
            f"  Sign in as:      {DEMO_USERNAME} / {DEMO_PASSWORD}",
            f"  Logs:            {logs}/web.log, {logs}/celery.log",
            "",
        ]
        self.stdout.write("\n".join(lines))

    def _say(self, message: str) -> None:
        self.stdout.write(f"{time.strftime('%H:%M:%S')}  {message}")

    def _watch(self, campaign: Campaign, children: list[Child], simulated: Crowd | None) -> None:
        """Supervise until Ctrl-C: children restarted, prompts refilled, the crowd replenished, progress said."""
        last, next_progress, supply_said = None, 0.0, False
        # Refill while every simulated worker can still find two prompts' worth of open slots.
        refill_below = 2 * DEMO_K * max(1, simulated.size if simulated else 1)
        while True:
            for child in children:
                child.check(self._say)
            imported = demo_refill(campaign, below=refill_below)
            if imported:
                self._say(f"Imported {imported} new prompts into the demo campaign.")
            elif imported is None and not supply_said:
                supply_said = True
                self._say(
                    "Every demo prompt is imported; the crowd labels what is left. Restart the demo "
                    "after it finishes for a new demo campaign."
                )
            if simulated is not None:
                for leaving, joining in simulated.replenish():
                    why = LEAVING.get(leaving.stopped_by.split(":")[0], leaving.stopped_by)
                    self._say(
                        f"Simulated worker {leaving.username} left after {leaving.labels} labels ({why}); "
                        f"{joining} joins."
                    )
            if time.monotonic() >= next_progress:
                next_progress = time.monotonic() + PROGRESS_EVERY
                progress = selectors.campaign_progress(campaign=campaign)
                if progress != last:
                    last = progress
                    self._say(
                        f"labels {progress.labels}/{progress.labels_wanted}  "
                        f"prompts complete {progress.prompts_complete}/{progress.n_prompts}"
                    )
            time.sleep(TICK)
