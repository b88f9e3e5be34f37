"""Live audits with a real Celery worker process against a real Redis (not eager mode).

The web side is a separate process with production settings (``submitter.py``: ``REDIS_URL`` set, so
Redis is the cache and the broker); the worker is ``celery -A config worker -B``; both use this test
run's database. The test process only creates campaigns and reads what the worker wrote.
"""

import math

import pytest
from django.urls import reverse

from audits import noise_audit
from audits.engine.noise import NOISE_KEYS
from audits.models import AuditSnapshot, AuditStats
from audits.selectors import campaign_label_matrix, campaign_totals, labels_waiting
from tests.audits.live.live import (
    NO_SWEEP,
    WORKER_ENV,
    CeleryWorker,
    RedisServer,
    Submitter,
    snapshot_covering,
    wait_for,
)

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker(services_redis, workdir):
    # Per test: two workers on one database would heal each other's outages.
    w = CeleryWorker(services_redis, workdir, **NO_SWEEP)
    w.start()
    yield w
    w.stop()


@pytest.fixture(scope="module")
def submitter(services_redis):
    s = Submitter(services_redis)
    yield s
    s.stop()


def test_submitted_labels_reach_a_snapshot_within_seconds(worker, submitter, make_campaign):
    assert submitter.ask(cmd="settings")["broker"].startswith("redis://")
    campaign = make_campaign(60, k=3)
    answer = submitter.ask(cmd="submit", campaign=campaign.pk, n=100, workers=12)
    assert answer["acks"] == 100
    snapshot = wait_for(lambda: snapshot_covering(campaign, 100), timeout=20, what="a snapshot with all 100 labels")
    lag = snapshot.computed_at.timestamp() - answer["after"]
    assert lag < 5, f"the snapshot came {lag:.2f} s after the last label"
    # One run per burst, not one per label: labels that arrive while a run is queued are folded in.
    runs = AuditSnapshot.objects.filter(campaign=campaign, kind="quick").count()
    assert 1 <= runs <= 50, runs  # typically 5-10 (one per ~0.3 s of submissions)
    # The worker's numbers are the engine's on the same labels.
    matrix, watermark = campaign_label_matrix(campaign=campaign)
    full = noise_audit(matrix)
    assert watermark == snapshot.watermark == 100
    for key in NOISE_KEYS:
        a, b = snapshot.data[key], getattr(full, key)
        assert (a is None and b is None) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), key
    # The first full audit is due at once; it lands too.
    report = wait_for(lambda: snapshot_covering(campaign, 1, kind="full"), timeout=30, what="a full audit")
    assert report.data["n_workers"] >= 1 and "filters" in report.data and "accuracy" in report.data
    assert AuditStats.objects.get(campaign=campaign).audited_labels == 100


def test_a_broker_outage_keeps_labels_flowing_marks_the_audit_stale_and_heals(
    make_campaign, researcher, client, settings, workdir, django_db_setup
):
    own = RedisServer(workdir)  # our own redis-server: the machine's main Redis is never stopped
    own.start()
    w = CeleryWorker(own.url, workdir, **WORKER_ENV)
    s = None
    try:
        w.start()
        s = Submitter(own.url)
        campaign = make_campaign(40, k=3)
        s.ask(cmd="submit", campaign=campaign.pk, n=5)
        wait_for(lambda: snapshot_covering(campaign, 5), timeout=20, what="the first snapshot")

        own.stop()  # broker and cache gone
        answer = s.ask(cmd="submit", campaign=campaign.pk, n=10)
        assert answer["acks"] == 10
        assert max(answer["seconds"]) < 1.0, answer["seconds"]  # a dead broker costs a label no wait
        # Every label is stored and marked for the audit's fold, which no run has made yet.
        assert campaign_totals(campaign_id=campaign.pk).n_labels == 5
        assert labels_waiting(campaign_id=campaign.pk)[0] == 10
        assert AuditStats.objects.get(campaign=campaign).audited_labels == 5

        settings.CHORUS_AUDIT = {"STALE_AFTER": 1}
        client.force_login(researcher)
        feed = reverse("audit_dashboard_data", args=[campaign.slug])
        status = wait_for(lambda: (st := client.get(feed).json()["status"])["stale"] and st, timeout=10, what="stale")
        assert status["behind"] == 10 and status["stale_since"]
        assert w.proc.poll() is None, "the worker must survive a broker outage"

        own.start()  # same port; no new label: the beat sweep alone must bring the audit up to date
        try:
            # The worker reconnects with growing pauses (2, 4, 6 … s): allow for a long outage on a busy machine.
            wait_for(
                lambda: snapshot_covering(campaign, 15), timeout=120, what="the audit to catch up after the outage"
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- worker log ---\n{w.output()[-6000:]}") from None
        status = client.get(feed).json()["status"]
        assert status["stale"] is False and status["behind"] == 0
    finally:
        if s is not None:
            s.stop()
        w.stop()
        own.stop()


def test_a_hung_redis_costs_one_label_about_a_second_then_nothing(make_campaign, django_db_setup):
    """A Redis that accepts connections but never answers (hung, not dead): the socket timeouts in
    settings bound the first label's wait, and the process then stops trying for a while."""
    import socket

    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(64)  # the kernel accepts connections; nobody ever reads or answers
    url = f"redis://127.0.0.1:{hung.getsockname()[1]}/0"
    s = Submitter(url)
    try:
        campaign = make_campaign(20, k=3)
        seconds = s.ask(cmd="submit", campaign=campaign.pk, n=12)["seconds"]
        assert max(seconds) < 2.5, seconds  # the first label: one socket timeout (1 s in settings)
        assert sorted(seconds)[-2] < 0.5, seconds  # the others do not wait on Redis at all
        assert labels_waiting(campaign_id=campaign.pk)[0] == 12
    finally:
        s.stop()
        hung.close()


def test_a_worker_computes_the_ground_truths_a_researcher_asked_for(worker, submitter, make_campaign):
    from audits.models import GroundTruthRun

    campaign = make_campaign(20, k=3)
    assert submitter.ask(cmd="submit", campaign=campaign.pk, n=60, workers=6)["acks"] == 60
    run = submitter.ask(cmd="ground_truths", campaign=campaign.pk, methods=["majority", "dawid_skene"])["run"]
    done = wait_for(
        lambda: GroundTruthRun.objects.filter(pk=run, status="done").first(),
        timeout=180,  # crowd-kit's import and Dawid–Skene's fixed iterations, behind the audits, on a busy machine
        what="the worker's ground truths",
    )
    assert done.watermark == 60 and len(done.data["dawid_skene"]["labels"]) == 20
