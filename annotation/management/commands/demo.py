"""``manage.py demo``: Chorus on the embedded default with a live demo campaign and a simulated crowd.

Sets up the database, a researcher account and a launched demo campaign (60 everyday statements,
k = 5), then runs the web server, a Celery worker and a crowd of simulated workers (annotation/crowd.py)
that label through the real worker pages. Ctrl-C stops everything.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from annotation import selectors, services
from annotation.crowd import Crowd
from annotation.models import Campaign

DEMO_USERNAME = "admin"
DEMO_PASSWORD = "chorus-demo"
DEMO_TITLE = "Everyday plausibility (demo)"
DEMO_K = 5
DEMO_INSTRUCTIONS = """\
Read each statement and decide whether it describes something that could **plausibly** happen in
everyday life.

- **Plausible** (key `p`): it makes sense in the ordinary world.
- **Implausible** (key `i`): it could not happen, or makes no sense.

Go with your first reading; there is no need to look anything up. You can stop whenever you like.
"""
# (statement, gold): 1 = plausible, 0 = implausible. Written for this demo.
DEMO_PROMPTS = [
    ("You can boil water in a kettle to make tea.", 1),
    ("A goldfish can climb a tree to escape a cat.", 0),
    ("A wet towel dries faster in the sun than in a closed drawer.", 1),
    ("You can fold a bicycle small enough to fit in your wallet.", 0),
    ("People often carry an umbrella when rain is forecast.", 1),
    ("Ice stays frozen longer in a hot oven than in a freezer.", 0),
    ("Ice cream melts if you leave it on a hot pavement.", 1),
    ("Most people brush their teeth with a fork.", 0),
    ("A bicycle rides badly when its tyres are flat.", 1),
    ("You can charge a phone by leaving it in a bowl of soup.", 0),
    ("Bread goes stale if you leave it uncovered for a few days.", 1),
    ("An adult elephant fits comfortably in a shoebox.", 0),
    ("It is wise to look both ways before crossing a busy street.", 1),
    ("A posted letter can arrive before it was written.", 0),
    ("A candle gets shorter as it burns.", 1),
    ("A sandwich is made mostly of concrete.", 0),
    ("Cats often sleep for much of the day.", 1),
    ("Most people take a boat to get from their bedroom to their kitchen.", 0),
    ("A packed suitcase is heavier than an empty one.", 1),
    ("Sunglasses help you see better in a dark cave.", 0),
    ("A houseplant kept in a dark cupboard for weeks tends to wilt.", 1),
    ("Pouring a bucket of water on a campfire makes it burn hotter.", 0),
    ("Shoes wear out faster if you walk a lot.", 1),
    ("A newborn baby can usually drive a car.", 0),
    ("A phone battery runs down faster when the screen stays on.", 1),
    ("Slicing bread with a spoon is quicker than with a bread knife.", 0),
    ("Children often lose their first baby tooth around the age of six.", 1),
    ("Trees grow their roots up into the sky.", 0),
    ("Putting a lid on a pot helps the water come to a boil sooner.", 1),
    ("Milk stays fresh for a year on a sunny windowsill.", 0),
    ("In Canada, snow is more common in winter than in summer.", 1),
    ("In Norway, a snowman lasts longer outdoors in July than in January.", 0),
    ("A library lets you borrow books and bring them back later.", 1),
    ("Shouting at a seedling makes it grow a metre overnight.", 0),
    ("Paper catches fire more easily than a stone does.", 1),
    ("Wearing thick mittens makes it easier to thread a needle.", 0),
    ("Dogs often bark when a stranger knocks at the door.", 1),
    ("Most people sleep more comfortably on a pile of bricks than on a mattress.", 0),
    ("Fish left out of the fridge for a week starts to smell bad.", 1),
    ("Fish have to leave the water every hour to breathe.", 0),
    ("You usually need a key or a code to open a locked door.", 1),
    ("A bathtub holds less water than a teacup.", 0),
    ("A glass dropped on a tiled floor may shatter.", 1),
    ("Dogs usually meow when they are hungry.", 0),
    ("People tend to wear coats when it is cold outside.", 1),
    ("Reading in complete darkness is easier than reading in daylight.", 0),
    ("Adding salt to a soup changes how it tastes.", 1),
    ("A paper boat can carry a family across the ocean.", 0),
    ("A train timetable tells you when trains leave.", 1),
    ("Chopsticks are the quickest way to finish a bowl of thin soup.", 0),
    ("The leaves of many trees change colour in autumn.", 1),
    ("People open umbrellas indoors to stay dry while watching television.", 0),
    ("Brushing your teeth helps prevent cavities.", 1),
    ("Bees make milk from flowers.", 0),
    ("Running a marathon usually leaves people tired.", 1),
    ("Keeping shoes in the freezer makes them fit bigger feet.", 0),
    ("A wool jumper can shrink when washed in very hot water.", 1),
    ("A cup of coffee gets hotter the longer it sits on the table.", 0),
    ("A full moon is easier to see on a clear night than on a cloudy one.", 1),
    ("Most people can hold their breath underwater for a whole day.", 0),
]

# The Celery worker of the embedded default (filesystem broker: no server needed), with its beat (-B:
# the audit sweep that heals lost recomputations) and two pool processes (a full audit does not hold
# up the live numbers: -O fair gives tasks to idle pool processes only).
CELERY_WORKER_ARGS = ["-m", "celery", "-A", "config", "worker", "-B", "--concurrency", "2", "-O", "fair", "-l", "info"]
PROGRESS_EVERY = 10  # seconds between progress lines
# Slows the crowd's personalities down so the 300 labels arrive over a few minutes, not one.
CROWD_PAUSE_SCALE = 2.0


def demo_account() -> tuple:
    """The demo's researcher (a superuser, so the admin works too), with the demo password."""
    user, created = get_user_model().objects.get_or_create(
        username=DEMO_USERNAME, defaults={"is_staff": True, "is_superuser": True}
    )
    user.is_staff = user.is_superuser = True
    user.set_password(DEMO_PASSWORD)
    user.save()
    return user, created


def demo_prompts_file() -> bytes:
    rows = [{"id": f"s{number:02d}", "text": text, "gold": gold} for number, (text, gold) in enumerate(DEMO_PROMPTS, 1)]
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def demo_campaign(owner) -> tuple[Campaign, bool]:
    """The live demo campaign: the latest one while it still wants labels, else a new one."""
    campaign = Campaign.objects.filter(owner=owner, title=DEMO_TITLE).exclude(status=Campaign.Status.CLOSED).first()
    if campaign is not None and campaign.prompts.exists():
        progress = selectors.campaign_progress(campaign=campaign)
        if progress.labels < progress.labels_wanted:
            if campaign.status != Campaign.Status.LIVE:
                action = "launch" if campaign.status == Campaign.Status.DRAFT else "resume"
                campaign = services.campaign_transition(campaign=campaign, action=action)
            return campaign, False
    campaign = services.campaign_create(
        owner=owner, title=DEMO_TITLE, instructions=DEMO_INSTRUCTIONS, schema=Campaign.Schema.BINARY,
        positive_text="Plausible", negative_text="Implausible", k=DEMO_K, lease_seconds=120,
    )
    services.prompts_import(campaign=campaign, data=demo_prompts_file(), filename="demo-prompts.jsonl", user=owner)
    return services.campaign_transition(campaign=campaign, action="launch"), True


def demo_truth() -> dict[str, int]:
    """What the simulated crowd's careful workers answer, keyed by the text they see."""
    return dict(DEMO_PROMPTS)


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
        with socket.socket() as probe:  # else the crowd might label on whatever server holds the port
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                raise CommandError(f"Port {port} is in use; choose another with --port.")
        self.stdout.write("Preparing the database …")
        call_command("migrate", interactive=False, verbosity=0)
        call_command("createcachetable", verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        user, _ = demo_account()
        campaign, created = demo_campaign(user)
        base = f"http://127.0.0.1:{port}"
        logs = Path(settings.VAR_DIR) / "demo-logs"
        logs.mkdir(exist_ok=True)

        # Ctrl-C raises KeyboardInterrupt even when a launcher started us with SIGINT ignored; SIGTERM too.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, _interrupt)
        children: dict[str, subprocess.Popen] = {}
        simulated = None
        try:
            children["web"] = self._spawn(
                "web", [sys.executable, "-m", "gunicorn", "config.wsgi:application", "--bind", f"127.0.0.1:{port}",
                        "--workers", "2", "--graceful-timeout", "5", "--no-control-socket"], logs,
            )
            children["celery"] = self._spawn("celery", [sys.executable, *CELERY_WORKER_ARGS], logs)
            self._wait_for(base, children["web"])
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
            self._stop_children(children)
        self.stdout.write("Stopped.")

    def _spawn(self, name: str, argv: list[str], logs: Path) -> subprocess.Popen:
        # A session of its own: the terminal's Ctrl-C reaches only this command, which then stops the
        # children in order (crowd first, then web and worker).
        with (logs / f"{name}.log").open("ab") as log:
            return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def _wait_for(self, base: str, web: subprocess.Popen, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if web.poll() is not None:
                raise CommandError(f"The web server exited (code {web.returncode}); see its log in demo-logs/web.log.")
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

    def _watch(self, campaign: Campaign, children: dict, simulated: Crowd | None) -> None:
        crowd_done, last = False, None
        while True:
            for name, child in children.items():
                if child.poll() is not None:
                    raise CommandError(f"The {name} process exited (code {child.returncode}); see demo-logs/{name}.log.")
            progress = selectors.campaign_progress(campaign=campaign)
            active = simulated.active if simulated else 0
            if (progress, active) != last:
                last = (progress, active)
                self.stdout.write(
                    f"{time.strftime('%H:%M:%S')}  labels {progress.labels}/{progress.labels_wanted}  "
                    f"prompts complete {progress.prompts_complete}/{progress.n_prompts}"
                    + (f"  simulated workers active {active}" if simulated else "")
                )
            if simulated and not active and not crowd_done:
                crowd_done = True
                total = sum(result.labels for result in simulated.results)
                self.stdout.write(f"The simulated crowd is done ({total} labels); the server keeps running.")
            time.sleep(PROGRESS_EVERY)

    def _stop_children(self, children: dict) -> None:
        for child in children.values():
            if child.poll() is None:
                child.terminate()
        for name, child in children.items():
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.stderr.write(f"The {name} process did not stop in 10 s; killing it.")
                os.killpg(child.pid, signal.SIGKILL)  # its own session: the Celery pool and beat go too
                child.wait()
