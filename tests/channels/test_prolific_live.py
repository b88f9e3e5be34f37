"""Prolific end to end with real processes: gunicorn serves Chorus and a Celery worker (with its beat)
does the background work, both on the production settings (``config.settings``) pointed by the
environment at the test database, at a Redis broker and at the Prolific stand-in (``fake_prolific``),
which runs in this process on a real port and delivers its signed hooks to gunicorn.

The researcher publishes through the API; participants arrive through the study URL and label on
Chorus's pages over HTTP; a quality rule blocks a spammer, one participant returns after one label,
newcomers take the places left. Only Chorus's processes (never this test) then approve the honest,
hold the spammer and put them in the exclusion group (the hooks do it), and stop the study (beat's
reconciliation does it); a bonus whose pay answer is lost is paid once, by the bonus task's retry or
by the reconciliation, whichever checks it first.

Small on purpose (12 prompts, k = 2): the point is the processes, not the numbers
(``test_prolific_end_to_end`` runs the larger scenario with Celery eager).
"""

import os
import re
import shutil
import subprocess
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
import requests

from annotation import services
from annotation.channels.models import ProlificBonus, ProlificStudy, ProlificSubmission, Publication
from annotation.models import Label, Participation, Prompt, Slot
from annotation.selectors import invariant_violations
from annotation.services.rules import rule_create
from benchmarks.stack import BIN, free_port
from tests.audits.live.live import BASE_DIR, WORKER_ENV, CeleryWorker, RedisServer, _stop, process_env, wait_for
from tests.channels.fake_prolific import FakeProlific

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

N_PROMPTS, K, LPP = 12, 2, 4
SPAMMER, RETURNER = "SPAM01", "RETURN1"
# Beat's reconciliation, the safety net under hooks: short, so that it runs often here (the bonus
# check below waits for one). Hooks alone settle the rest: approvals, the hold, the group, the stop.
RECONCILE_SECONDS = 2
SETTLE = 45  # seconds the hooks and the worker get to reach each expected state


@pytest.fixture
def fake():
    fake = FakeProlific(allow_insecure_targets=True).start()
    yield fake
    fake.stop()


@pytest.fixture
def redis_url(tmp_path):
    """A redis-server of our own on a free port (never shared with another test run, whose worker would
    take our tasks); without the binary, the test Redis (CHORUS_TEST_REDIS_URL), emptied."""
    if shutil.which("redis-server"):
        server = RedisServer(tmp_path)
        try:
            server.start()
            yield server.url
        finally:
            server.stop()
        return
    import redis

    url = os.environ.get("CHORUS_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    redis.Redis.from_url(url).flushdb()
    yield url


class Stack:
    """gunicorn (as benchmarks/soak.py starts it) and ``celery worker -B`` on the production settings."""

    def __init__(self, redis_url: str, workdir: Path, env: dict, web_port: int):
        self.redis_url, self.workdir, self.env, self.port = redis_url, workdir, env, web_port
        self.url = f"http://127.0.0.1:{web_port}"
        self.web_log = workdir / "gunicorn.log"
        self.web: subprocess.Popen | None = None
        self.worker = CeleryWorker(redis_url, workdir, **env)

    def start(self) -> None:
        with open(self.web_log, "wb") as log:
            self.web = subprocess.Popen(
                [
                    str(BIN / "gunicorn"),
                    "config.wsgi:application",
                    "--bind",
                    f"127.0.0.1:{self.port}",
                    "--workers",
                    "2",
                    "--timeout",
                    "30",
                    "--graceful-timeout",
                    "2",
                    "--no-control-socket",
                    "--access-logfile",
                    "-",
                ],
                cwd=BASE_DIR,
                env=process_env(self.redis_url, **self.env),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.worker.start()
        wait_for(self._web_up, timeout=30, what="gunicorn to answer")

    def _web_up(self) -> bool:
        if self.web.poll() is not None:
            raise RuntimeError(f"gunicorn exited ({self.web.returncode}):\n{self.web_output()}")
        try:
            # The first request imports the API (lazily, per gunicorn worker): slow on a busy machine.
            return requests.get(self.url + "/api/v1/", timeout=10).status_code < 500
        except requests.RequestException:
            return False

    def web_output(self) -> str:
        return self.web_log.read_text(errors="replace") if self.web_log.exists() else ""

    def stop(self) -> None:
        try:
            self.worker.stop()
        finally:
            if self.web is not None:
                _stop(self.web)
                self.web = None


@pytest.fixture
def stack(request, fake, redis_url, tmp_path, researcher):
    web_port = free_port()
    env = {
        **WORKER_ENV,
        # Production: DEBUG off (the secret key is set); plain HTTP on loopback, no TLS proxy in front.
        "DJANGO_SECRET_KEY": "live-" + uuid.uuid4().hex * 2,
        "DJANGO_SECURE_SSL_REDIRECT": "0",
        "CHORUS_PUBLIC_URL": f"http://127.0.0.1:{web_port}",
        "CHORUS_PROLIFIC_API_URL": fake.url,
        "CHORUS_PROLIFIC_TOKEN": "test-token",
        "CHORUS_PROLIFIC_COMPLETION_URL": fake.root + "submissions/complete",
        "CHORUS_PROLIFIC_RECONCILE_SECONDS": RECONCILE_SECONDS,
    }
    stack = Stack(redis_url, tmp_path, env, web_port)
    failed, ok = request.session.testsfailed, False
    try:
        stack.start()
        yield stack
        ok = request.session.testsfailed == failed
    finally:
        stack.stop()
        if not ok:  # a failed start or a failed test: what the processes said, past pytest's capture
            with request.config.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
                print(f"\n===== celery worker log =====\n{stack.worker.output()[-20000:]}")
                print(f"\n===== gunicorn log =====\n{stack.web_output()[-20000:]}")


class Browser:
    """A participant's browser. Production cookies are ``Secure``; here Chorus is reached over plain
    HTTP on loopback (where a TLS proxy would sit in front), and a cookie jar would keep them to
    https, so this one sends every cookie it was given. No redirect is followed by itself."""

    def __init__(self):
        self.cookies: dict[str, str] = {}

    def request(self, method: str, url: str, **kwargs) -> requests.Response:
        headers = {"Cookie": "; ".join(f"{name}={value}" for name, value in self.cookies.items())}
        response = requests.request(method, url, headers=headers, allow_redirects=False, timeout=20, **kwargs)
        self.cookies.update(response.cookies.get_dict())
        return response


class Api:
    """The researcher's program: token authentication against the web process."""

    def __init__(self, base: str, token: str):
        self.base = base
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"Token {token}"

    def get(self, path: str):
        response = self.http.get(self.base + path, timeout=20)
        assert response.status_code == 200, (path, response.status_code, response.text[:500])
        return response.json()

    def post(self, path: str, body: dict | None = None, **headers) -> requests.Response:
        return self.http.post(self.base + path, json=body or {}, headers=headers, timeout=20)


def participant(fake, base: str, study_id: str, pid: str, answers, *, stop_after: int | None = None) -> dict:
    """Arrive through the study URL and label on Chorus's pages over HTTP (answers: a function of the
    label's index) until the completion redirect, then land on Prolific's completion page. A
    participant shown the no-work page returns the study, as it asks; ``stop_after`` labels, one
    returns it of their own accord."""
    submission_id, url = fake.arrive(study_id, pid)
    assert url.startswith(base), url
    http = Browser()
    response = http.request("GET", url)
    n = 0
    while True:
        while response.status_code == 302 and response.headers["Location"].startswith("/"):
            response = http.request("GET", base + response.headers["Location"])
        if response.status_code == 302:  # off to Prolific: the completion redirect
            location = response.headers["Location"]
            assert location.startswith(fake.root + "submissions/complete"), location
            code = re.search(r"cc=([A-Z0-9]+)", location).group(1)
            fake.complete(submission_id, code)
            return {"submission_id": submission_id, "labels": n, "end": "completed"}
        assert response.status_code == 200, (response.status_code, response.text[:500])
        page = response.text
        if 'class="label-form"' not in page:
            assert "no work" in page.lower(), page[:500]
            fake.return_(submission_id)
            return {"submission_id": submission_id, "labels": n, "end": "no work"}
        if stop_after is not None and n == stop_after:
            fake.return_(submission_id)
            return {"submission_id": submission_id, "labels": n, "end": "returned"}
        action = re.search(r'<form method="post" action="([^"]+)" class="label-form"', page).group(1)
        token = re.search(r'name="client_token" value="([^"]+)"', page).group(1)
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
        response = http.request(
            "POST", base + action, data={"value": str(answers(n)), "client_token": token, "csrfmiddlewaretoken": csrf}
        )
        assert response.status_code == 302, (response.status_code, response.text[:500])
        n += 1


def test_a_study_run_by_real_processes(make_campaign, researcher, fake, stack):
    started = time.monotonic()
    campaign = make_campaign(N_PROMPTS, k=K, lease_seconds=600)
    rule_create(campaign=campaign, by=researcher, metric="straight_lining", threshold=0.9, min_labels=4, action="block")
    api = Api(stack.url, services.api_token_get_or_create(user=researcher).key)

    # --- publish through the web process, at once
    response = api.post(
        f"/api/v1/campaigns/{campaign.slug}/publications/",
        {
            "channel": "prolific",
            "title": "Is this statement true?",
            "description": "Read short statements and say whether each is true.",
            "reward": "0.80",
            "labels_per_participant": LPP,
            "estimated_minutes": 3,
            "publish": True,
        },
    )
    assert response.status_code == 201, response.text
    publication_id = response.json()["id"]
    detail = wait_for(
        lambda: (d := api.get(f"/api/v1/publications/{publication_id}/"))["status"] == "published" and d,
        timeout=SETTLE,
        what="the publication to be published",
    )
    study_id = detail["external_id"]
    study = fake.studies[study_id]
    assert study["status"] == "ACTIVE" and study["total_available_places"] == N_PROMPTS * K // LPP
    group_id = study["filters"][-1]["selected_values"][0]
    assert study["filters"][-1]["filter_id"] == "participant_group_blocklist"

    # --- participants: the honest (0, 1, 0, 1 …), a spammer (always 1), one who returns after 1 label
    given, places = {}, []  # places: the study's total after each participant
    for pid in ("HONEST0", SPAMMER, "HONEST1", RETURNER):
        stop = 1 if pid == RETURNER else None
        answers = (lambda n: 1) if pid == SPAMMER else (lambda n: n % 2)
        given[pid] = participant(fake, stack.url, study_id, pid, answers, stop_after=stop)
        places.append(fake.studies[study_id]["total_available_places"])
    assert given[RETURNER]["end"] == "returned" and given[RETURNER]["labels"] == 1
    # The return reaches Chorus by its hook alone: the returner's lease ends, their slot goes to others.
    wait_for(
        lambda: ProlificSubmission.objects.filter(participant_id=RETURNER, status="RETURNED", leases_ended=True),
        timeout=SETTLE,
        what="the returner's hook to end their leases",
    )
    # Newcomers take the places left, as Prolific offers them, until the campaign needs nobody more.
    newcomers = 0
    deadline = time.monotonic() + SETTLE
    while Slot.objects.filter(campaign=campaign, filled=False).exists():
        remote = fake.studies[study_id]
        free = remote["status"] == "ACTIVE" and remote["places_taken"] < remote["total_available_places"]
        if free:
            newcomers += 1
            assert newcomers <= 6, f"places kept opening: {given}"
            pid = f"NEW{newcomers}"
            given[pid] = participant(fake, stack.url, study_id, pid, lambda n: n % 2)
            places.append(fake.studies[study_id]["total_available_places"])
        else:
            assert time.monotonic() < deadline, f"work is left and no place for it: {remote}, {given}"
            time.sleep(0.2)
    assert newcomers >= 1
    # Places grew only as the slots needed: one more for the returner's.
    assert max(places) <= N_PROMPTS * K // LPP + 1, places

    # --- every prompt has exactly k labels from distinct workers
    assert invariant_violations(campaign=campaign, complete=True) == []
    counts = list(Label.objects.counted().filter(campaign=campaign).values_list("prompt_id", flat=True))
    prompts = Prompt.objects.filter(campaign=campaign).values_list("pk", flat=True)
    assert sorted(set(counts)) == sorted(prompts) and all(counts.count(p) == K for p in prompts)

    # --- then Chorus's processes alone: the honest approved, the spammer held, blocked and in the
    # exclusion group, the study stopped
    honest = {pid for pid, run in given.items() if pid not in (SPAMMER, RETURNER) and run["end"] == "completed"}

    seen = {}

    def settled():
        rows = {row["participant_id"]: row for row in api.get(f"/api/v1/publications/{publication_id}/submissions/")}
        seen.update(
            verdicts={pid: (row["status"], row["verdict"]) for pid, row in rows.items()},
            group=fake.group_members(group_id),
            study={key: fake.studies[study_id][key] for key in ("status", "places_taken", "total_available_places")},
        )
        approved = {pid for pid, row in rows.items() if row["verdict"] == "approved"}
        return (
            approved == honest
            and rows.get(SPAMMER, {}).get("verdict") == "held"
            and SPAMMER in seen["group"]
            and seen["study"]["status"] in ("AWAITING REVIEW", "COMPLETED")
            and rows
        )

    try:
        rows = wait_for(settled, timeout=SETTLE, interval=0.5, what="approvals, the hold, the group and the stop")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last seen: {seen}") from None
    for pid in honest:
        assert fake.submissions[rows[pid]["submission_id"]]["status"] == "APPROVED", pid
    assert fake.submissions[rows[SPAMMER]["submission_id"]]["status"] == "AWAITING REVIEW"
    assert rows[SPAMMER]["evidence"]["standing"] == "blocked" and rows[SPAMMER]["evidence"]["actions"][0]["rule"]
    assert Participation.objects.get(campaign=campaign, worker__external_id=SPAMMER).blocked_at is not None
    assert rows[RETURNER]["status"] == "RETURNED" and rows[RETURNER]["verdict"] in ("", None)
    assert fake.studies[study_id]["status"] == "AWAITING REVIEW"  # the spammer's submission waits

    # --- a bonus whose pay answer is lost; the same request again; paid once, by the worker
    fake.inject("POST", r"/bulk-bonus-payments/.+/pay/$", "lost")
    target = sorted(honest)[0]
    body = {"worker": f"prolific:{target}", "amount": "0.50", "reason": "Careful work"}
    first = api.post(f"/api/v1/publications/{publication_id}/bonuses/", body, **{"Idempotency-Key": "bonus-1"})
    assert first.status_code == 201, first.text
    again = api.post(f"/api/v1/publications/{publication_id}/bonuses/", body, **{"Idempotency-Key": "bonus-1"})
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"], again.text
    wait_for(
        lambda: api.get(f"/api/v1/publications/{publication_id}/bonuses/")[0]["status"] == "paid",
        timeout=SETTLE,
        interval=0.5,
        what="the bonus to be paid",
    )
    assert not any(fault[3] for fault in fake.faults), "the lost pay was never sent"
    # A reconciliation that started after the pay (each checks the open bonuses): nothing is paid again.
    paid_at = ProlificBonus.objects.get().paid_at
    wait_for(
        lambda: ProlificStudy.objects.filter(
            publication_id=publication_id, synced_at__gt=paid_at + timedelta(seconds=RECONCILE_SECONDS + 0.5)
        ).exists(),
        timeout=SETTLE,
        what="a reconciliation after the pay",
    )
    assert fake.submissions[rows[target]["submission_id"]]["bonus_payments"] == [50]
    bonuses = api.get(f"/api/v1/publications/{publication_id}/bonuses/")
    assert [(b["status"], b["amount"]) for b in bonuses] == [("paid", "0.50")]
    assert invariant_violations(campaign=campaign) == []
    assert Publication.objects.get(pk=publication_id).status == "published"
    print(f"\nscenario took {time.monotonic() - started:.1f} s; places: {places}; participants: {given}")
