"""Scheduling of live audits: coalescing per campaign, faults, idempotency, constant cost.

The broker is the edge: ``enqueued`` (conftest) records what would be published. Everything else is
real: label_submit, the cache (the settings' backend), the task bodies, the database.
"""

import time
from functools import partial
from unittest import mock

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation import services
from annotation.models import Lease
from audits import selectors
from audits import services as audit_services
from audits.conf import audit_setting
from audits.models import AuditSnapshot, AuditStats
from audits.selectors import audit_status
from audits.tasks import audit_full_task, audit_refresh_task, audit_sweep_task
from tests.clock import later
from tests.helpers import label_one, on_this_database, sim_worker

pytestmark = [pytest.mark.django_db]


def _run(enqueued, index=-1):
    """Run an enqueued task body as the worker would."""
    name, campaign_id, _ = enqueued[index]
    {"audits.refresh": audit_refresh_task, "audits.full": audit_full_task}[name].run(campaign_id)


def test_two_triggers_give_one_enqueue(make_campaign, django_capture_on_commit_callbacks, enqueued):
    campaign = make_campaign(5)
    with django_capture_on_commit_callbacks(execute=True):
        label_one(campaign, sim_worker())
    with django_capture_on_commit_callbacks(execute=True):
        label_one(campaign, sim_worker())
    assert enqueued == [("audits.refresh", campaign.pk, audit_setting("COUNTDOWN"))]
    _run(enqueued)
    snapshot = AuditSnapshot.objects.get(campaign=campaign, kind="quick")
    assert snapshot.watermark == 2 and snapshot.data["n_labels"] == 2  # one run saw both labels


def test_a_trigger_mid_run_gives_a_second_run(make_campaign, django_capture_on_commit_callbacks, enqueued):
    campaign = make_campaign(5)
    with django_capture_on_commit_callbacks(execute=True):
        label_one(campaign, sim_worker())
    assert enqueued.names() == ["audits.refresh"]

    full_due = selectors.full_audit_due

    def label_meanwhile(*args):
        # Another worker's label commits after this run read the statistics, while the run still
        # holds its key: the label's trigger enqueues nothing, so the run must schedule the next one.
        with django_capture_on_commit_callbacks(execute=True):
            label_one(campaign, sim_worker())
        assert enqueued.names() == ["audits.refresh"]  # at most one queued or running
        return full_due(*args)

    with mock.patch.object(selectors, "full_audit_due", side_effect=label_meanwhile):
        _run(enqueued, 0)
    assert AuditStats.objects.get(campaign=campaign).audited_labels == 1
    assert enqueued.names().count("audits.refresh") == 2
    # The next read comes COUNTDOWN after this run's start, not after its end: the label has waited
    # for the run already.
    countdowns = [countdown for name, _, countdown in enqueued if name == "audits.refresh"]
    assert countdowns[0] == audit_setting("COUNTDOWN") and 0 <= countdowns[1] < countdowns[0]

    # Triggers while the second run is still queued fold into it.
    with django_capture_on_commit_callbacks(execute=True):
        label_one(campaign, sim_worker())
        label_one(campaign, sim_worker())
    assert enqueued.names().count("audits.refresh") == 2
    _run(enqueued, [i for i, name in enumerate(enqueued.names()) if name == "audits.refresh"][1])
    assert AuditStats.objects.get(campaign=campaign).audited_labels == 4
    assert enqueued.names().count("audits.refresh") == 2  # caught up: no further run


def test_a_run_with_nothing_new_schedules_nothing(make_campaign, django_capture_on_commit_callbacks, enqueued):
    campaign = make_campaign(5)
    with django_capture_on_commit_callbacks(execute=True):
        label_one(campaign, sim_worker())
    _run(enqueued, 0)
    assert enqueued.names().count("audits.refresh") == 1
    # the key was released: the next label enqueues again
    with django_capture_on_commit_callbacks(execute=True):
        label_one(campaign, sim_worker())
    assert enqueued.names().count("audits.refresh") == 2


def test_campaigns_are_coalesced_separately(make_campaign, django_capture_on_commit_callbacks, enqueued):
    a, b = make_campaign(3, title="A"), make_campaign(3, title="B")
    with django_capture_on_commit_callbacks(execute=True):
        label_one(a, sim_worker())
        label_one(b, sim_worker())
        label_one(a, sim_worker())
    assert sorted(cid for name, cid, _ in enqueued if name == "audits.refresh") == sorted([a.pk, b.pk])


def test_the_pending_key_expires_so_a_lost_enqueue_heals(make_campaign, settings, enqueued):
    settings.CHORUS_AUDIT = {"PENDING_TTL": 1}
    campaign = make_campaign(3)
    assert audit_services.audit_schedule_recompute(campaign_id=campaign.pk) is True
    enqueued.clear()  # the message is lost (e.g. the broker died with it)
    assert audit_services.audit_schedule_recompute(campaign_id=campaign.pk) is False
    time.sleep(2.1)  # the database cache keeps whole seconds
    assert audit_services.audit_schedule_recompute(campaign_id=campaign.pk) is True
    assert enqueued.names() == ["audits.refresh"]


def test_a_dead_broker_never_reaches_the_label_submitter(
    make_campaign, django_capture_on_commit_callbacks, enqueued, caplog
):
    campaign = make_campaign(5)
    calls = []

    def broker_down(*args, **kwargs):
        calls.append(args)
        raise OSError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    with mock.patch.object(audit_refresh_task, "apply_async", side_effect=broker_down):
        with django_capture_on_commit_callbacks(execute=True):
            ack = label_one(campaign, sim_worker())
        with django_capture_on_commit_callbacks(execute=True):
            second = label_one(campaign, sim_worker())
    assert ack.pk and second.pk and second.pk != ack.pk  # two labels stored
    assert len(calls) == 1  # the second label did not try again: the process backs off
    assert "broker unavailable" in caplog.text
    waiting, first = selectors.labels_waiting(campaign_id=campaign.pk)  # marked for the audit, not audited
    assert waiting == 2 and first is not None
    assert not AuditSnapshot.objects.filter(campaign=campaign).exists()


def test_a_dead_cache_never_reaches_the_label_submitter(make_campaign, django_capture_on_commit_callbacks, enqueued):
    campaign = make_campaign(5)
    with mock.patch.object(audit_services.scheduling.cache, "add", side_effect=ConnectionError("cache down")):
        with django_capture_on_commit_callbacks(execute=True):
            ack = label_one(campaign, sim_worker())
    assert ack.pk and enqueued == []


def test_the_dashboard_status_turns_stale_then_catches_up(make_campaign, django_capture_on_commit_callbacks, enqueued):
    campaign = make_campaign(5)
    with django_capture_on_commit_callbacks(execute=True):
        label_one(campaign, sim_worker())
    assert audit_status(campaign=campaign)["stale"] is False  # not yet: the label is new
    with later(audit_setting("STALE_AFTER") + 1):
        status = audit_status(campaign=campaign)
    assert status["stale"] is True and status["behind"] == 1 and status["stale_since"]
    # The queued run is lost and its key has expired: the beat sweep reschedules the campaign.
    enqueued.clear()
    audit_services.runs._clear_pending(campaign.pk, "quick")
    audit_sweep_task.run()
    assert enqueued.names()[0] == "audits.refresh" and enqueued[0][1] == campaign.pk
    assert audit_services.audit_sweep()["quick"] == []  # already pending: not twice
    _run(enqueued, [n for n, _, _ in enqueued].index("audits.refresh"))
    with later(audit_setting("STALE_AFTER") + 1):  # caught up: not stale however late it is
        status = audit_status(campaign=campaign)
    assert status["stale"] is False and status["behind"] == 0 and status["audited_labels"] == 1


def test_a_rerun_is_harmless_and_a_killed_run_leaves_nothing(
    make_campaign, django_capture_on_commit_callbacks, enqueued
):
    campaign = make_campaign(5)
    with django_capture_on_commit_callbacks(execute=True):
        label_one(campaign, sim_worker(), value=1)
        label_one(campaign, sim_worker(), value=0)
    with mock.patch.object(selectors.stats, "noise_from_stats", side_effect=MemoryError("killed")):
        with pytest.raises(MemoryError):
            audit_refresh_task.run(campaign.pk)
    assert not AuditSnapshot.objects.filter(campaign=campaign).exists()
    assert AuditStats.objects.get(campaign=campaign).audited_labels == 0

    first = audit_services.audit_refresh(campaign_id=campaign.pk)
    again = audit_services.audit_refresh(campaign_id=campaign.pk)
    assert first.pk == again.pk and first.watermark == again.watermark == 2
    assert AuditSnapshot.objects.filter(campaign=campaign, kind="quick").count() == 1

    full = audit_services.audit_full(campaign_id=campaign.pk)
    assert full.watermark == 2 and full.data["n_labels"] == 2 and "accuracy" in full.data
    with mock.patch.object(selectors, "full_report_data", side_effect=AssertionError("recomputed")):
        assert audit_services.audit_full(campaign_id=campaign.pk).pk == full.pk


def test_a_full_run_is_scheduled_by_label_volume(make_campaign, settings, django_capture_on_commit_callbacks, enqueued):
    settings.CHORUS_AUDIT = {
        "FULL_EVERY_LABELS": 3,
        "FULL_GROWTH": 100,
        "FULL_MIN_INTERVAL": 0,
        "FULL_DUTY": 0,
        "FULL_MAX_AGE": 3600,
    }
    campaign = make_campaign(5)
    with django_capture_on_commit_callbacks(execute=True):
        label_one(campaign, sim_worker())
    _run(enqueued)  # the first quick run: no full audit exists yet, so one is due
    assert enqueued.names() == ["audits.refresh", "audits.full"]
    _run(enqueued)
    assert AuditSnapshot.objects.get(campaign=campaign, kind="full").watermark == 1
    for _ in range(2):
        with django_capture_on_commit_callbacks(execute=True):
            label_one(campaign, sim_worker())
        _run(enqueued, [n for n, _, _ in enqueued].index("audits.refresh", 2))
    assert enqueued.names().count("audits.full") == 1  # 2 new labels < 3
    with django_capture_on_commit_callbacks(execute=True):
        label_one(campaign, sim_worker())
    audit_services.audit_refresh(campaign_id=campaign.pk)
    assert enqueued.names().count("audits.full") == 2


def _queries(fn):
    with CaptureQueriesContext(connection) as ctx:
        fn()
    return len(ctx.captured_queries)


@pytest.mark.both_dbs
def test_the_cost_of_a_label_and_of_a_refresh_does_not_grow_with_the_campaign(make_campaign, enqueued):
    small, large = make_campaign(4, title="small", k=3), make_campaign(60, title="large", k=3)
    # Fewer than k labels in the small campaign, so none of its prompts can be full and the new worker
    # always finds one that already has a label (3 labels could fill one prompt and leave only empty ones).
    for campaign, n in ((small, 2), (large, 150)):
        for i in range(n):
            label_one(campaign, sim_worker(), value=i % 2)
    w = sim_worker()
    costs = {}
    for campaign in (small, large):
        lease = services.lease_acquire(campaign=campaign, worker=w)
        while lease.prompt.n_labels == 0:  # compare like with like: a prompt that already has labels
            services.lease_release(lease_id=lease.pk, worker=w)
            lease = services.lease_acquire(campaign=campaign, worker=w)
            assert isinstance(lease, Lease), lease
        submit = _queries(
            partial(services.label_submit, lease_id=lease.pk, worker=w, value=1, client_token=f"x{lease.pk}")
        )
        refresh = _queries(partial(audit_services.audit_refresh, campaign_id=campaign.pk))
        costs[campaign.title] = (submit, refresh)
    # A label costs the same queries in a campaign of 3 labels as in one of 150, and so does the
    # quick run that folds it.
    assert costs["small"] == costs["large"], costs
    # Absolute ceilings, as measured: a new query on these paths must be a decision, not an accident.
    # The live audit adds one statement to a label's transaction on SQLite, its mark for the fold
    # (PendingLabel); on PostgreSQL the mark rides in the label's INSERT (two statements fewer).
    assert max(costs["small"][0], costs["large"][0]) <= on_this_database([9], labels=(0,))[0], costs
    # The quick run folds first (audits.services.stats_fold, about 22 statements whatever the number of
    # labels: a few per statistics table, 500 rows a statement), then reads the noise statistics, the
    # workers' statistics (3 queries), participations, control prompts and the campaign's median
    # seconds (the anchor read, the walk from it and the anchor moved: audits.quality_tables), and the
    # rules one query more; then it stamps the snapshot's rules_applied_at, and the Prolific channel looks
    # for submissions waiting for the audit (one query each): constant in the campaign's size, as the
    # small-equals-large check above shows. On PostgreSQL the fold and the snapshot's save each share-lock
    # the campaign's row first (audits.services.stats.campaign_key_share): 2 more.
    assert costs["large"][1] <= 74 + (2 if connection.vendor == "postgresql" else 0), costs
    assert selectors.campaign_totals(campaign_id=large.pk).n_labels == 151


def test_the_full_cadence_rules(make_campaign, settings):
    from datetime import timedelta

    from django.utils import timezone

    settings.CHORUS_AUDIT = {
        "FULL_EVERY_LABELS": 1000,
        "FULL_GROWTH": 0.1,
        "FULL_MAX_AGE": 60,
        "FULL_MIN_INTERVAL": 10,
        "FULL_DUTY": 5,
    }
    campaign = make_campaign(3)
    now = timezone.now()
    assert selectors.full_audit_due(campaign.pk, 0, now) is False
    assert selectors.full_audit_due(campaign.pk, 1, now) is True  # no full audit yet
    AuditSnapshot.objects.create(
        campaign=campaign, kind="full", watermark=500, data={}, computed_at=now, duration_ms=4000
    )
    due = lambda labels, seconds: selectors.full_audit_due(campaign.pk, labels, now + timedelta(seconds=seconds))  # noqa: E731
    assert due(500, 3600) is False  # nothing new
    assert due(549, 25) is False  # 49 new < 10 % of 500, and younger than a minute
    assert due(550, 25) is True  # 10 % more labels
    assert due(560, 15) is False  # a 4 s run may not run again within 5 × 4 s
    assert due(501, 61) is True  # one new label, but the last full audit is a minute old


def test_a_full_run_is_single_flight(make_campaign, django_capture_on_commit_callbacks, enqueued):
    campaign = make_campaign(3)
    with django_capture_on_commit_callbacks(execute=True):
        label_one(campaign, sim_worker())
    assert audit_services.audit_schedule_recompute(campaign_id=campaign.pk, kind="full") is True
    matrices = selectors.campaign_label_matrices  # the full run's one read of the labels
    during = []

    def mid_run(**kwargs):  # a trigger while the full report is computed must not start a second one
        during.append(audit_services.audit_schedule_recompute(campaign_id=campaign.pk, kind="full"))
        return matrices(**kwargs)

    with mock.patch.object(selectors, "campaign_label_matrices", side_effect=mid_run):
        audit_full_task.run(campaign.pk)
    assert during == [False]
    assert enqueued.names().count("audits.full") == 1
    assert audit_services.audit_schedule_recompute(campaign_id=campaign.pk, kind="full") is True  # done: free again
