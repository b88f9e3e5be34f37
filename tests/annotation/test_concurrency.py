"""The assignment guarantees under concurrency (issue 2), on SQLite and on PostgreSQL.

Many clients hammer the engine at once: threads in this process and threads in spawned processes,
each with its own database connection, as web threads and web processes would. They do what a real
crowd does: label, let leases expire, skip, double-click (one client token sent twice at once from
two threads), retry after a lost response, heartbeat, open a second tab as the same worker, and
submit on someone else's lease; and a channel voids labels meanwhile (MTurk reconciliation taking a
returned assignment's label back), which gives slots back to the pool. Afterwards the stored rows are
checked against the guarantees, and a drain must bring every prompt to exactly k labels.

Leases last LEASE_SECONDS, under the 10-second minimum of the campaign form: that minimum is for
people, and is bypassed here with update(). The engine only compares timestamps, so expiry is real
wall-clock expiry, racing real submits and heartbeats.
"""

import multiprocessing
import random
import threading
import time
import traceback
import uuid
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import timedelta
from unittest import mock

import django
import pytest
from django.db import OperationalError, connection
from django.db.models import Max
from django.utils import timezone

from annotation import services
from annotation.models import Campaign, Label, Lease, Worker
from annotation.selectors import invariant_violations
from tests.helpers import prompts_jsonl

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_dbs]

LEASE_SECONDS = 2
PROCESSES = 2
THREADS_PER_PROCESS = 5
THREADS_HERE = 6
CYCLES_PER_CLIENT = 100
WORKERS_PER_CLIENT = 2
SECOND_TAB = 0.05  # share of cycles a client acts as a worker that another client also drives

# What a client does with a lease it was given, and how often.
ACTIONS = {
    "submit": 56,
    "abandon": 8,  # never submitted: the lease must expire and free its slot
    "release": 8,  # skip: the slot is free at once, the worker never sees the prompt again
    "double": 8,  # the same client token from two threads at once
    "lost": 8,  # the acknowledgment is lost; the client retries with the same token
    "foreign": 4,  # submit on someone else's lease first (must be refused), then on its own
    "heartbeat": 4,
    "late": 4,  # submit around the expiry time: accepted or refused, never both
    "void": 4,  # submit, then a channel voids one of the newest labels (its slot goes back to the pool)
}
# Free-text answers, as stored (label_submit normalises them; the acks are compared with the rows).
ANSWERS = ["drink coffee", "brush my teeth", "café au lait", "walk the dog", "🚲 ride"]


def a_value(campaign: Campaign, rng: random.Random):
    """A label the campaign's schema takes: 0 or 1, or (free text) an answer."""
    return rng.choice(ANSWERS) if campaign.schema == Campaign.Schema.FREE_TEXT else rng.randint(0, 1)


def campaign_of(make_campaign, schema: str, n_prompts: int, **fields) -> Campaign:
    """A launched campaign of ``schema``: the conftest's for binary, the same prompts without gold for free text."""
    if schema == Campaign.Schema.BINARY:
        return make_campaign(n_prompts, **fields)
    campaign = make_campaign(0, launch=False, schema=schema, **fields)
    services.prompts_import(campaign=campaign, data=prompts_jsonl(n_prompts, gold=False), filename="p.jsonl")
    return services.campaign_transition(campaign=campaign, action="launch")


# --- Clients ----------------------------------------------------------------------------------------


class Client:
    """One simulated browser: a few workers of its own, sometimes one shared with another client."""

    def __init__(self, *, campaign_ids, own_worker_ids, all_worker_ids, seed):
        self.rng = random.Random(seed)
        self.campaigns = list(Campaign.objects.filter(pk__in=campaign_ids))
        self.workers = {w.pk: w for w in Worker.objects.filter(pk__in=all_worker_ids)}
        self.own, self.everyone = own_worker_ids, all_worker_ids
        self.acks: list[tuple] = []
        self.errors: list[str] = []
        self.counts: Counter = Counter()

    def run(self, cycles: int) -> dict:
        try:
            for _ in range(cycles):
                pool = self.everyone if self.rng.random() < SECOND_TAB else self.own
                worker = self.workers[self.rng.choice(pool)]
                try:
                    self.cycle(self.rng.choice(self.campaigns), worker)
                except services.ServiceError as exc:
                    self.counts[f"refused:{exc.code}"] += 1
                except Exception as exc:
                    self.failed(exc)
        finally:
            connection.close()
        return {"acks": self.acks, "errors": self.errors, "counts": self.counts}

    def cycle(self, campaign: Campaign, worker: Worker) -> None:
        lease = services.lease_acquire(campaign=campaign, worker=worker)
        if isinstance(lease, services.NothingLeft):
            self.counts[f"nothing:{lease.code}"] += 1
            return
        action = self.rng.choices(list(ACTIONS), weights=list(ACTIONS.values()))[0]
        self.counts[action] += 1
        value, token = a_value(campaign, self.rng), uuid.uuid4().hex
        if action == "abandon":
            return
        if action == "release":
            services.lease_release(lease_id=lease.pk, worker=worker)
            return
        if action == "double":
            self.double_submit(lease, worker, value, token)
            return
        if action == "foreign":
            self.foreign_submit(campaign, worker)
        if action == "heartbeat":
            services.lease_heartbeat(lease_id=lease.pk, worker=worker)
        if action == "late":
            time.sleep(LEASE_SECONDS * self.rng.uniform(0.8, 1.2))
        first = self.submit(lease, worker, value, token)
        if action == "void":
            newest = list(
                Label.objects.counted().filter(campaign=campaign).order_by("-pk").values_list("pk", flat=True)[:5]
            )
            services.label_void(label_id=self.rng.choice(newest), reason="test")
        if action == "lost":
            retry = self.submit(lease, worker, value, token)
            if (retry.label_id, retry.created_at, retry.duplicate) != (first.label_id, first.created_at, True):
                self.errors.append(f"retry after a lost response got {retry}, the first ack was {first}")

    def failed(self, exc: Exception) -> None:
        if sqlite_gave_up_waiting(exc):
            self.counts["sqlite gave up waiting"] += 1
        else:
            self.errors.append(describe(exc))

    def submit(self, lease: Lease, worker: Worker, value: int, token: str) -> services.LabelAck:
        ack = services.label_submit(lease_id=lease.pk, worker=worker, value=value, client_token=token)
        self.acks.append((worker.pk, token, ack.label_id, ack.lease_id, ack.prompt_id, value, ack.duplicate))
        return ack

    def double_submit(self, lease: Lease, worker: Worker, value: int, token: str) -> None:
        both = threading.Barrier(2)
        results: list = []

        def click():
            try:
                both.wait()
                results.append(self.submit(lease, worker, value, token))
            except services.ServiceError as exc:
                results.append(exc.code)
            except Exception as exc:
                self.failed(exc)
            finally:
                connection.close()

        clicks = [threading.Thread(target=click) for _ in range(2)]
        for t in clicks:
            t.start()
        for t in clicks:
            t.join()
        acks = [r for r in results if isinstance(r, services.LabelAck)]
        if len({a.label_id for a in acks}) > 1 or sum(not a.duplicate for a in acks) > 1:
            self.errors.append(f"a double click stored two labels: {acks}")
        self.counts.update(f"refused:{r}" for r in results if isinstance(r, str))

    def foreign_submit(self, campaign: Campaign, worker: Worker) -> None:
        other = (
            Lease.objects.filter(campaign=campaign)
            .exclude(worker=worker)
            .order_by("-pk")
            .values_list("pk", flat=True)
            .first()
        )
        if other is None:
            return
        try:
            ack = services.label_submit(lease_id=other, worker=worker, value=1, client_token=uuid.uuid4().hex)
        except services.LabelRefused as exc:
            if exc.code != "not_leased":
                self.errors.append(f"a label on someone else's lease was refused with {exc.code!r}, not 'not_leased'")
        else:
            self.errors.append(f"a label on someone else's lease was acknowledged: {ack}")


def sqlite_gave_up_waiting(exc: Exception) -> bool:
    """SQLite's busy handler polls for the write lock; it is no queue, so on a saturated machine an
    unlucky transaction can wait out the whole timeout (settings) and fail before it starts. That
    costs availability, not correctness (nothing was written; the client retries), so it is counted
    and bounded instead of being an error. PostgreSQL has no such failure."""
    return isinstance(exc, OperationalError) and connection.vendor == "sqlite" and "database is locked" in str(exc)


def describe(exc: Exception) -> str:
    """The exception and where in the project it was raised (the framework frames below it are noise)."""
    ours = [f for f in traceback.extract_tb(exc.__traceback__) if "/site-packages/" not in f.filename]
    where = " <- ".join(f"{f.name}:{f.lineno}" for f in reversed(ours))
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} at {where}"


def run_clients(specs: list[dict], *, cycles: int) -> list[dict]:
    """Each spec is one Client; each runs in its own thread with its own connection."""
    with ThreadPoolExecutor(len(specs)) as pool:
        return list(pool.map(lambda spec: Client(**spec).run(cycles), specs))


def run_clients_in_process(db_name: str, specs: list[dict], cycles: int) -> list[dict]:
    """Entry point of a spawned process (the pool's initializer ran django.setup()): point the
    connection at the test database, then run the clients."""
    connection.settings_dict["NAME"] = db_name
    return run_clients(specs, cycles=cycles)


def merge(outcomes: list[dict]) -> tuple[list[tuple], list[str], Counter]:
    acks, errors, counts = [], [], Counter()
    for outcome in outcomes:
        acks += outcome["acks"]
        errors += outcome["errors"]
        counts.update(outcome["counts"])
    return acks, errors, counts


# --- Checks -----------------------------------------------------------------------------------------


def drain(campaign: Campaign, workers: list[Worker]) -> list[tuple]:
    """Once the hammer's leases have expired, label everything left with the same workers (with
    leases long enough for a slow machine)."""
    last = Lease.objects.filter(campaign=campaign, status=Lease.Status.ACTIVE).aggregate(t=Max("expires_at"))["t"]
    if last is not None:
        time.sleep(max(0.0, (last - timezone.now()).total_seconds()) + 0.05)
    Campaign.objects.filter(pk=campaign.pk).update(lease_seconds=600)
    acks, progress, rng = [], True, random.Random(campaign.pk)
    while progress:
        progress = False
        for worker in workers:
            lease = services.lease_acquire(campaign=campaign, worker=worker)
            if isinstance(lease, Lease):
                token, value = f"drain-{lease.pk}", a_value(campaign, rng)
                ack = services.label_submit(lease_id=lease.pk, worker=worker, value=value, client_token=token)
                acks.append((worker.pk, token, ack.label_id, ack.lease_id, ack.prompt_id, value, ack.duplicate))
                progress = True
    return acks


def assert_guarantees(campaign: Campaign, *, complete: bool) -> None:
    """The stored rows keep every guarantee (``invariant_violations``), and no slot had two holders at once."""
    assert invariant_violations(campaign=campaign, complete=complete) == []

    # One holder per slot at a time: a lease starts after the slot's previous lease ended. A submitted
    # lease's slot is taken again only once its label is void. (When a released lease ended, or a label
    # was voided, is not comparable with a lease's created_at, so those are not timed.) Leases are taken
    # in id order: an id is drawn while the slot's row is held, but created_at is read before any wait
    # for it. A control's leases hold no slot (annotation.services.controls): nothing to time.
    voided = set(Label.objects.filter(campaign=campaign, voided_at__isnull=False).values_list("lease_id", flat=True))
    by_slot = defaultdict(list)
    for lease in Lease.objects.filter(campaign=campaign, slot__isnull=False).order_by("pk"):
        by_slot[lease.slot_id].append(lease)
    for leases in by_slot.values():
        for before, after in zip(leases, leases[1:]):
            if before.status == Lease.Status.SUBMITTED:
                assert before.pk in voided, (before, after)
            if before.status == Lease.Status.ACTIVE:
                assert after.created_at >= before.expires_at, (before.pk, after.pk)


def assert_acks_match_labels(acks: list[tuple]) -> None:
    """Every acknowledgment is a stored label with the value sent; every stored label was acknowledged
    as new exactly once; repeated acknowledgments of one client token carry the same label."""
    assert invariant_violations(acknowledged=[ack[2] for ack in acks]) == []
    stored = {
        pk: (worker, token, lease, prompt, value)
        for pk, worker, token, lease, prompt, value in Label.objects.values_list(
            "pk", "worker_id", "client_token", "lease_id", "prompt_id", "value"
        )
    }
    for worker, token, label_id, lease, prompt, value, _ in acks:
        assert stored.get(label_id) == (worker, token, lease, prompt, value)
    assert sorted(a[2] for a in acks if not a[6]) == sorted(stored)
    per_token = defaultdict(set)
    for worker, token, label_id, *_ in acks:
        per_token[worker, token].add(label_id)
    assert all(len(ids) == 1 for ids in per_token.values())


# --- Tests ------------------------------------------------------------------------------------------


def crowd(n: int) -> list[Worker]:
    """Workers known by a channel id only, as from MTurk (no user account to create)."""
    return [services.worker_get_or_create(channel="crowd", external_id=f"w{i}") for i in range(n)]


def test_many_threads_and_processes_keep_every_guarantee(make_campaign):
    campaigns = [
        make_campaign(250, k=3, title="Random"),
        make_campaign(120, k=3, title="Fill", policy="fill_first"),
        campaign_of(make_campaign, Campaign.Schema.FREE_TEXT, 120, k=3, title="Free text"),
    ]
    Campaign.objects.filter(pk__in=[c.pk for c in campaigns]).update(lease_seconds=LEASE_SECONDS)
    n_clients = THREADS_HERE + PROCESSES * THREADS_PER_PROCESS
    workers = crowd(n_clients * WORKERS_PER_CLIENT)
    everyone = [w.pk for w in workers]
    specs = [
        dict(
            campaign_ids=[c.pk for c in campaigns],
            own_worker_ids=everyone[i * WORKERS_PER_CLIENT : (i + 1) * WORKERS_PER_CLIENT],
            all_worker_ids=everyone,
            seed=i,
        )
        for i in range(n_clients)
    ]
    here, elsewhere = specs[:THREADS_HERE], specs[THREADS_HERE:]
    chunks = [elsewhere[i::PROCESSES] for i in range(PROCESSES)]

    with multiprocessing.get_context("spawn").Pool(PROCESSES, initializer=django.setup) as pool:
        in_processes = pool.starmap_async(
            run_clients_in_process, [(connection.settings_dict["NAME"], chunk, CYCLES_PER_CLIENT) for chunk in chunks]
        )
        outcomes = run_clients(here, cycles=CYCLES_PER_CLIENT)
        outcomes += [o for process in in_processes.get(timeout=300) for o in process]
    acks, errors, counts = merge(outcomes)
    print(f"\n{sum(counts[a] for a in ACTIONS)} leases, {len(acks)} acks: {dict(sorted(counts.items()))}")

    assert errors == []
    assert counts["sqlite gave up waiting"] <= 0.01 * n_clients * CYCLES_PER_CLIENT
    for action in ACTIONS:
        assert counts[action] > 0, f"no client did {action!r}: the run exercised less than it claims"
    for campaign in campaigns:
        assert_guarantees(campaign, complete=False)
        acks += drain(campaign, workers)
        assert_guarantees(campaign, complete=True)
    assert_acks_match_labels(acks)


@pytest.mark.parametrize("schema", [Campaign.Schema.BINARY, Campaign.Schema.FREE_TEXT])
def test_concurrent_submits_on_one_prompt_all_succeed(make_campaign, schema):
    """k workers submit on the same prompt at the same moment: each label is accepted. (PostgreSQL
    used to abort some of them as deadlocked: each submit raises the priority of the others' slots.)"""
    workers = crowd(8)
    for _ in range(4):
        campaign = campaign_of(make_campaign, schema, 1, k=len(workers))
        leases = [services.lease_acquire(campaign=campaign, worker=w) for w in workers]
        together = threading.Barrier(len(workers))

        def submit(lease, together=together):
            try:
                together.wait()
                value = f" answer  {lease.pk} " if schema == Campaign.Schema.FREE_TEXT else 1
                return services.label_submit(
                    lease_id=lease.pk, worker=lease.worker, value=value, client_token=f"t{lease.pk}"
                )
            except Exception as exc:
                return describe(exc)
            finally:
                connection.close()

        with ThreadPoolExecutor(len(workers)) as pool:
            results = list(pool.map(submit, leases))
        assert [r for r in results if not isinstance(r, services.LabelAck)] == []
        assert_guarantees(campaign, complete=True)
        if schema == Campaign.Schema.FREE_TEXT:  # stored trimmed and collapsed, each its own worker's
            assert sorted(campaign.labels.values_list("value", flat=True)) == sorted(
                f"answer {lease.pk}" for lease in leases
            )


@contextmanager
def submit_paused_before_commit(lease: Lease):
    """label_submit for ``lease`` in another thread, held just before it commits, with all its row
    locks (PostgreSQL) or the database write lock (SQLite) taken. Yields a function that lets it go."""
    from annotation.services import assignment

    reached, go = threading.Event(), threading.Event()
    real_ack = assignment._ack

    def ack_then_wait(*args, **kwargs):
        ack = real_ack(*args, **kwargs)
        if threading.current_thread() is submitter:
            reached.set()
            go.wait(10)
        return ack

    def run():
        try:
            services.label_submit(lease_id=lease.pk, worker=lease.worker, value=1, client_token="held")
        finally:
            connection.close()

    submitter = threading.Thread(target=run)
    with mock.patch.object(assignment, "_ack", ack_then_wait):
        submitter.start()
        assert reached.wait(10)
        try:
            yield go.set
        finally:
            go.set()
            submitter.join()


def acquire_while_held(campaign: Campaign, worker: Worker, resume) -> Lease | services.NothingLeft:
    """Ask for work while a submit holds its locks; let the submit commit once the request has either
    answered or is waiting (it must not answer "nothing left" just because rows are locked)."""

    def acquire():
        try:
            return services.lease_acquire(campaign=campaign, worker=worker)
        finally:
            connection.close()

    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(acquire)
        time.sleep(0.5)
        resume()
        return answer.result(timeout=30)


def test_fill_first_is_not_stopped_by_a_submit_on_the_fullest_prompt(make_campaign):
    """While a submit on the most-labeled prompt holds its open slots, fill-first must still find work
    (it used to look among the most-labeled prompts only, and answer "nothing left")."""
    campaign = make_campaign(4, k=3, policy="fill_first")
    first, second, third = crowd(3)
    lease = services.lease_acquire(campaign=campaign, worker=first)
    services.label_submit(lease_id=lease.pk, worker=first, value=1, client_token="t")
    on_fullest = services.lease_acquire(campaign=campaign, worker=second)
    assert on_fullest.prompt_id == lease.prompt_id
    with submit_paused_before_commit(on_fullest) as resume:
        answer = acquire_while_held(campaign, third, resume)
    assert isinstance(answer, Lease), answer


def test_the_last_open_slots_are_not_hidden_by_a_submit_on_their_prompt(make_campaign):
    """At the end of a campaign, a submit on the last open prompt holds its open slots until it commits;
    a worker asking meanwhile gets one of them, not "nothing left"."""
    campaign = make_campaign(1, k=3)
    holder, other = crowd(2)
    lease = services.lease_acquire(campaign=campaign, worker=holder)
    with submit_paused_before_commit(lease) as resume:
        answer = acquire_while_held(campaign, other, resume)
    assert isinstance(answer, Lease), answer
    assert answer.prompt_id == lease.prompt_id


def test_a_heartbeat_that_lost_the_race_with_expiry_is_refused(make_campaign):
    """A heartbeat whose clock read comes just before expiry, but whose write lands after another worker
    took the slot (PostgreSQL runs them side by side), must not revive the lease."""
    campaign = make_campaign(1, k=1, lease_seconds=60)
    slow, fast = crowd(2)
    lease = services.lease_acquire(campaign=campaign, worker=slow)
    start = timezone.now()
    with mock.patch("django.utils.timezone.now", return_value=start + timedelta(seconds=61)):
        taken = services.lease_acquire(campaign=campaign, worker=fast)
    assert isinstance(taken, Lease)
    with mock.patch("django.utils.timezone.now", return_value=start + timedelta(seconds=59)):
        with pytest.raises(services.LeaseRefused) as refused:
            services.lease_heartbeat(lease_id=lease.pk, worker=slow)
        assert refused.value.code == "lease_ended"
    assert Lease.objects.get(pk=lease.pk).expires_at == lease.expires_at
    assert_guarantees(campaign, complete=False)
