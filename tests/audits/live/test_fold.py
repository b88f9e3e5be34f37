"""The quick run's fold (``audits.services.stats_fold``): a label is marked in its own transaction and
folded exactly once, by the transaction that deletes its mark; a fold that fails leaves every mark
and every statistic as they were; labels that wait for the fold count as behind on the dashboard."""

import threading
from unittest import mock

import pytest

from annotation import services
from audits import selectors as audit_selectors
from audits import services as audit_services
from audits.models import LabelSeconds, PendingLabel, WorkerAuditStats, WorkerQualityStats
from audits.selectors import audit_status
from audits.services import stats as stats_module
from tests.clock import later
from tests.helpers import db_thread, label_one, sim_worker

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]


def _stored(campaign):
    return (
        sorted(WorkerAuditStats.objects.filter(campaign=campaign).values_list("worker_id", "n_labels", "sum")),
        sorted(WorkerQualityStats.objects.filter(campaign=campaign).values_list("worker_id", "n_labels")),
        sorted(LabelSeconds.objects.filter(campaign=campaign).values_list("label_id", flat=True)),
        audit_selectors.campaign_totals(campaign_id=campaign.pk).n_labels,
    )


def test_a_label_waits_marked_until_the_fold_takes_it_once(make_campaign):
    campaign = make_campaign(6, k=3)
    workers = [sim_worker() for _ in range(3)]
    labels = [label_one(campaign, w, value=i % 2) for i in range(2) for w in workers]
    assert set(PendingLabel.objects.values_list("label_id", flat=True)) == {label.pk for label in labels}
    assert _stored(campaign) == ([], [], [], 0)  # nothing folded in the labels' transactions

    assert audit_services.stats_fold(campaign_id=campaign.pk) == 6
    folded = _stored(campaign)
    assert folded[3] == 6 and folded[2] == sorted(label.pk for label in labels)
    assert not PendingLabel.objects.exists()
    assert audit_services.stats_fold(campaign_id=campaign.pk) == 0  # nothing twice
    assert _stored(campaign) == folded
    audit_services.stats_rebuild(campaign_id=campaign.pk)
    assert _stored(campaign) == folded


def test_a_fold_that_fails_midway_leaves_every_mark_for_the_next(make_campaign):
    campaign = make_campaign(6, k=3)
    for w in [sim_worker() for _ in range(3)]:
        label_one(campaign, w)
    audit_services.stats_fold(campaign_id=campaign.pk)
    before = _stored(campaign)
    for w in [sim_worker() for _ in range(2)]:
        label_one(campaign, w, value=0)

    # The process dies after the quality statistics, before the noise statistics.
    with mock.patch.object(stats_module, "_noise_fold", side_effect=RuntimeError("worker killed")):
        with pytest.raises(RuntimeError):
            audit_services.stats_fold(campaign_id=campaign.pk)
    assert _stored(campaign) == before and PendingLabel.objects.count() == 2

    assert audit_services.stats_fold(campaign_id=campaign.pk) == 2
    after = _stored(campaign)
    assert after[3] == 5 and len(after[2]) == 5
    audit_services.stats_rebuild(campaign_id=campaign.pk)
    assert _stored(campaign) == after


def test_a_label_voided_before_its_fold_is_not_folded(make_campaign):
    """Before any fold the campaign has no statistics row: the void makes one, marked for a rebuild, so
    that a fold cannot take the labels as they were before it."""
    campaign = make_campaign(4, k=2)
    kept, voided = label_one(campaign, sim_worker()), label_one(campaign, sim_worker())
    services.label_void(label_id=voided.pk, reason="returned")
    assert audit_services.stats_fold(campaign_id=campaign.pk) == 0
    assert audit_services.audit_refresh(campaign_id=campaign.pk).watermark == 1  # rebuilt without it
    assert _stored(campaign)[2] == [kept.pk] and not PendingLabel.objects.exists()


def test_waiting_labels_count_as_behind_and_turn_the_audit_stale(make_campaign):
    campaign = make_campaign(5, k=3)
    label_one(campaign, sim_worker())
    assert audit_services.audit_refresh(campaign_id=campaign.pk).watermark == 1
    label_one(campaign, sim_worker())
    label_one(campaign, sim_worker())
    status = audit_status(campaign=campaign)
    assert (status["labels"], status["audited_labels"], status["behind"], status["stale"]) == (3, 1, 2, False)
    assert audit_selectors.audit_behind(campaign_id=campaign.pk)
    assert [due for c, _, _, due in audit_selectors.audit_progress() if c == campaign.pk] == [True]
    with later(60):  # no run came: the oldest waiting label makes the audit stale
        status = audit_status(campaign=campaign)
    assert status["stale"] and status["stale_since"] == status["first_unaudited_at"]
    audit_services.audit_refresh(campaign_id=campaign.pk)
    status = audit_status(campaign=campaign)
    assert (status["labels"], status["behind"], status["stale"]) == (3, 0, False)
    assert not audit_selectors.audit_behind(campaign_id=campaign.pk)


@pytest.mark.django_db(transaction=True)
def test_a_campaign_edit_during_a_fold_waits_for_it_and_marks_a_rebuild(make_campaign):
    """The edit holds the campaign's row, then marks the statistics stale under the AuditStats row the
    fold holds; the fold's own inserts need the campaign's row too. Neither may deadlock the other."""
    campaign = make_campaign(0, k=2, launch=False, schema="rating", binarization={"1": 0, "2": 0, "3": 1, "4": 1})
    rows = "".join(f'{{"id": "q{i}", "text": "Statement {i}."}}\n' for i in range(4)).encode()
    services.prompts_import(campaign=campaign, data=rows, filename="p.jsonl")
    campaign = services.campaign_transition(campaign=campaign, action="launch")
    label_one(campaign, sim_worker(), value=3)
    audit_services.stats_fold(campaign_id=campaign.pk)
    label_one(campaign, sim_worker(), value=4)
    locked, go, errors = threading.Event(), threading.Event(), []
    shift = stats_module.median_anchor_shift

    def held(**kwargs):  # the fold holds its locks here until the edit has started
        locked.set()
        go.wait(5)
        return shift(**kwargs)

    def fold():
        with mock.patch.object(stats_module, "median_anchor_shift", held):
            audit_services.stats_fold(campaign_id=campaign.pk)

    folder = db_thread(fold, errors)
    assert locked.wait(5)
    edit = {"binarization": {"1": 0, "2": 1, "3": 1, "4": 1}}
    editor = db_thread(lambda: services.campaign_update(campaign=campaign, **edit), errors)
    editor.join(0.5)  # the edit is waiting for the fold
    go.set()
    folder.join(10)
    editor.join(10)
    assert not errors, errors
    assert audit_selectors.campaign_totals(campaign_id=campaign.pk).n_labels == 2
    snapshot = audit_services.audit_refresh(campaign_id=campaign.pk)  # the rebuild on the new map
    assert snapshot.watermark == 2 and not PendingLabel.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("change", ["void", "exclude"])
def test_a_change_racing_the_first_fold_is_not_folded_over(make_campaign, change):
    """A void or an exclusion whose invalidation comes before the campaign's statistics row exists
    (no fold yet) and commits after the first fold started: the fold must not keep the labels as they
    were before the change (the invalidation makes the row, marked; the fold waits for it)."""
    from annotation.services import assignment, quality

    campaign = make_campaign(4, k=3)
    workers = [sim_worker() for _ in range(3)]
    labels = [label_one(campaign, w) for w in workers]
    module = assignment if change == "void" else quality
    invalidate, reached, go, errors = module.audit_stats_invalidate, threading.Event(), threading.Event(), []

    def invalidate_then_hold(**kwargs):
        invalidate(**kwargs)
        reached.set()
        go.wait(10)

    def act():
        if change == "void":
            services.label_void(label_id=labels[0].pk, reason="returned")
        else:
            quality.worker_act(kind="exclude", campaign=campaign, worker=workers[0], reason="test")

    with mock.patch.object(module, "audit_stats_invalidate", invalidate_then_hold):
        thread = db_thread(act, errors)
        assert reached.wait(10)
        folder = db_thread(lambda: audit_services.stats_fold(campaign_id=campaign.pk), errors)
        folder.join(0.5)  # the fold waits for the change's lock
        go.set()
        thread.join(10)
        folder.join(10)
    assert not errors, errors
    audit_services.audit_refresh(campaign_id=campaign.pk)  # rebuilds when marked
    kept = _stored(campaign)
    audit_services.stats_rebuild(campaign_id=campaign.pk)
    assert _stored(campaign) == kept and kept[3] == 2


@pytest.mark.django_db(transaction=True)
def test_a_fold_during_a_read_that_places_the_first_anchor_makes_the_read_retry(make_campaign, monkeypatch):
    """Without an anchor, a fold still writes the statistics row: a worker-quality read that overlapped it
    (REPEATABLE READ) is retried instead of placing an anchor that misses the fold's rows."""
    from audits.selectors import worker_numbers

    campaign = make_campaign(6, k=3)
    for _ in range(3):
        label_one(campaign, sim_worker())
    audit_services.stats_fold(campaign_id=campaign.pk)
    walk, reached, go, errors = worker_numbers.campaign_median_seconds, threading.Event(), threading.Event(), []

    def held(**kwargs):
        reached.set()
        go.wait(10)
        return walk(**kwargs)

    monkeypatch.setattr(worker_numbers, "campaign_median_seconds", held)

    reader = db_thread(lambda: audit_selectors.worker_quality(campaign=campaign), errors)
    assert reached.wait(10)
    label_one(campaign, sim_worker())
    assert audit_services.stats_fold(campaign_id=campaign.pk) == 1
    go.set()
    reader.join(10)
    assert not errors, errors
    monkeypatch.setattr(worker_numbers, "campaign_median_seconds", walk)
    assert audit_selectors.worker_quality(campaign=campaign).watermark == 4  # the anchor counts all 4 rows
