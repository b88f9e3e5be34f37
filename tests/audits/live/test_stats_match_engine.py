"""The incremental statistics give the engine's numbers: after random label sequences, the quick audit
(from the statistics the quick run's fold keeps) equals the engine's full computation on the
same labels, read two ways (the matrix from the database, and the label export as a labels file)."""

import dataclasses
import json
import math
import random

import pandas as pd
import pytest
from django.db.models import Sum

from annotation import services
from annotation.models import Lease
from annotation.selectors import label_export_rows
from audits import LabelMatrix, noise_audit, noise_partitions
from audits import selectors as audit_selectors
from audits import services as audit_services
from audits.engine.noise import NOISE_KEYS
from audits.models import AuditStats, UnitAuditStats, UnitStateCount, WorkerAuditStats
from tests.helpers import sim_worker

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]


def _prompts(n, *, options=0, gold=True, rng=None):
    rows = []
    for i in range(n):
        row = {"id": f"q{i}", "text": f"Statement {i}."}
        if options:
            row["options"] = [f"answer {j}" for j in range(options)]
            if gold:
                row["gold"] = [rng.randint(1, 4) for _ in range(options)]
        elif gold:
            row["gold"] = rng.choice([0, 1]) if options == 0 and rng else 1
        rows.append(json.dumps(row))
    return ("\n".join(rows) + "\n").encode()


def _campaign(researcher, *, schema, n_prompts, k, rng, **fields):
    campaign = services.campaign_create(owner=researcher, title=f"Random {schema}", schema=schema, k=k, **fields)
    options = 3 if schema == "option_rating" else 0
    data = _prompts(n_prompts, options=options, gold=schema != "rating", rng=rng)
    services.prompts_import(campaign=campaign, data=data, filename="p.jsonl")
    return services.campaign_transition(campaign=campaign, action="launch")


def _random_labels(campaign, workers, rng, n_labels, values):
    """Workers ask for work in random order and label with their own bias; returns labels submitted."""
    bias = {w.pk: rng.random() for w in workers}
    done = 0
    for _ in range(n_labels * 4):
        if done == n_labels:
            break
        worker = rng.choice(workers)
        lease = services.lease_acquire(campaign=campaign, worker=worker)
        if not isinstance(lease, Lease):
            continue
        if rng.random() < 0.1:  # some skip
            services.lease_release(lease_id=lease.pk, worker=worker)
            continue
        n_options = len(lease.prompt.options)

        def pick(share=bias[worker.pk]):
            return values[-1] if rng.random() < share else rng.choice(values)

        value = [pick() for _ in range(n_options)] if n_options else pick()
        services.label_submit(lease_id=lease.pk, worker=worker, value=value, client_token=f"t{lease.pk}")
        done += 1
    return done


def _assert_same_numbers(quick: dict, full, *, rel=1e-9):
    for key in NOISE_KEYS:
        a, b = quick[key], getattr(full, key)
        if b is None:
            assert a is None, (key, a, b)
        else:
            assert a is not None and math.isclose(a, b, rel_tol=rel, abs_tol=1e-12), (key, a, b)
    assert (quick["n_workers"], quick["n_prompts"], quick["n_labels"]) == (
        full.n_workers,
        full.n_prompts,
        full.n_labels,
    )


CASES = [
    # schema, fields, values workers choose from, seed
    ("binary", {}, [0, 1], 1),
    ("binary", {}, [0, 1], 2),
    ("rating", {"binarization": {"1": 0, "2": 0, "3": 1, "4": 1}}, [1, 2, 3, 4], 3),
    # 5 is outside the map: counted invalid, never audited
    ("rating", {"scale_max": 5, "binarization": {"1": 0, "2": 0, "4": 1, "5": 1}}, [1, 2, 3, 4, 5], 4),
    ("option_rating", {"binarization": {"1": 0, "2": 0, "3": 1, "4": 1}}, [1, 2, 3, 4], 5),
    # Without a map the audit is on the unit scale, (value − min) / (max − min) (issue 22): half points,
    # whole points, a continuous 0–100 scale, and per-option ratings.
    ("rating", {"scale_min": 0, "scale_max": 10, "scale_step": 0.5}, [0, 2.5, 5, 7.5, 10, 6.5], 6),
    ("rating", {"scale_min": 1, "scale_max": 7}, [1, 2, 3, 4, 5, 6, 7], 7),
    ("rating", {"scale_min": 0, "scale_max": 100, "scale_step": None}, [0, 12.3, 37.5, 99.9, 100], 8),
    ("option_rating", {}, [1, 2, 3, 4], 9),
]


@pytest.mark.parametrize(("schema", "fields", "values", "seed"), CASES)
def test_incremental_numbers_equal_the_engine_on_the_same_labels(researcher, schema, fields, values, seed):
    rng = random.Random(seed)
    k = rng.choice([3, 4, 5])
    n_prompts = rng.randint(8, 20)
    campaign = _campaign(researcher, schema=schema, n_prompts=n_prompts, k=k, rng=rng, **fields)
    workers = [sim_worker() for _ in range(rng.randint(k + 1, 9))]
    checked = 0
    for _ in range(3):  # compare mid-collection several times, not only at the end
        if not _random_labels(campaign, workers, rng, rng.randint(n_prompts, n_prompts * k // 3), values):
            break
        audit_services.stats_fold(campaign_id=campaign.pk)  # every label since the last fold, at once
        totals = audit_selectors.campaign_totals(campaign_id=campaign.pk)
        quick = audit_selectors.quick_audit_data(campaign=campaign, totals=totals)

        matrix, watermark = audit_selectors.campaign_label_matrix(campaign=campaign)
        assert watermark == totals.n_labels == campaign.labels.count()
        _assert_same_numbers(quick, noise_audit(matrix))
        assert quick["n_invalid"] == matrix.n_invalid

        # The export is a labels file: the engine reading it agrees too (units named <id>#<n>).
        frame = pd.DataFrame(list(label_export_rows(campaign=campaign)))
        exported = LabelMatrix.from_frame(frame, gold=None, **audit_selectors.value_scale(campaign))
        _assert_same_numbers(quick, noise_audit(exported))
        assert sorted(map(str, exported.prompt_ids)) == sorted(map(str, matrix.prompt_ids))
        # The export carries the raw value (7.5, not 0.75 nor a grid point).
        assert set(exported.raw.tolist()) <= {float(v) for v in values}

        if campaign.label_schema.unit_divisor == 1:  # 0/1 values: binary answers or a map
            assert quick["partitions"] == noise_partitions(matrix, k=k).to_dict()
        else:
            assert quick["partitions"] is None
        checked += 1
    assert checked >= 2


def _stats_rows(campaign):
    """The statistics as stored, the labels that wait folded first (as the quick run reads them)."""
    audit_services.stats_fold(campaign_id=campaign.pk)
    return (
        sorted(
            WorkerAuditStats.objects.filter(campaign=campaign).values_list(
                "worker_id", "n_labels", "n_units", "n_invalid", "sum", "sumsq"
            )
        ),
        sorted(
            UnitAuditStats.objects.filter(campaign=campaign).values_list(
                "prompt_id", "option", "count", "sum", "sumsq", "disagreement"
            )
        ),
        # the histogram summed over shards (a rebuild puts everything in shard 0)
        sorted(
            UnitStateCount.objects.filter(campaign=campaign)
            .values("count", "sum", "sumsq")
            .annotate(n=Sum("n_units"))
            .filter(n__gt=0)
            .values_list("count", "sum", "sumsq", "n")
        ),
        dataclasses.astuple(audit_selectors.campaign_totals(campaign_id=campaign.pk))[:6],
    )


def test_rebuild_from_the_labels_gives_the_incremental_statistics(researcher):
    rng = random.Random(7)
    campaign = _campaign(
        researcher, schema="option_rating", n_prompts=10, k=3, rng=rng, binarization={"1": 0, "2": 0, "4": 1}
    )
    workers = [sim_worker() for _ in range(5)]
    _random_labels(campaign, workers, rng, 25, [1, 2, 3, 4])
    incremental = _stats_rows(campaign)
    audit_services.stats_rebuild(campaign_id=campaign.pk)
    assert _stats_rows(campaign) == incremental
    assert incremental[3][0] == 25 and incremental[3][2] > 0  # value 3 is not in the map: invalid


def test_a_changed_binarization_map_rebuilds_the_statistics(researcher):
    rng = random.Random(8)
    campaign = _campaign(
        researcher, schema="rating", n_prompts=6, k=3, rng=rng, binarization={"1": 0, "2": 0, "3": 1, "4": 1}
    )
    workers = [sim_worker() for _ in range(4)]
    _random_labels(campaign, workers, rng, 8, [1, 2, 3, 4])
    audit_services.stats_fold(campaign_id=campaign.pk)
    campaign = services.campaign_update(campaign=campaign, binarization={"1": 0, "2": 1, "3": 1, "4": 1})
    _random_labels(campaign, workers, rng, 4, [1, 2, 3, 4])
    assert audit_services.stats_fold(campaign_id=campaign.pk) == 0  # built on the old map: left to the rebuild
    stats = AuditStats.objects.get(campaign=campaign)
    assert stats.needs_rebuild and audit_selectors.campaign_totals(campaign_id=campaign.pk).n_labels == 8
    audit_services.audit_refresh(campaign_id=campaign.pk)  # the task rebuilds, then audits
    stats.refresh_from_db()
    assert not stats.needs_rebuild and stats.audited_labels == 12
    quick = audit_selectors.latest_snapshot(campaign=campaign).data
    matrix, _ = audit_selectors.campaign_label_matrix(campaign=campaign)
    _assert_same_numbers(quick, noise_audit(matrix))


def test_void_labels_leave_the_audit_and_later_labels_fold_in_again(researcher):
    rng = random.Random(10)
    campaign = _campaign(
        researcher, schema="option_rating", n_prompts=10, k=3, rng=rng, binarization={"1": 0, "2": 0, "3": 1, "4": 1}
    )
    workers = [sim_worker() for _ in range(6)]
    _random_labels(campaign, workers, rng, 20, [1, 2, 3, 4])
    audit_services.audit_refresh(campaign_id=campaign.pk)
    assert audit_services.audit_full(campaign_id=campaign.pk).watermark == 20
    voided = rng.sample(list(campaign.labels.values_list("pk", flat=True)), 5)
    for label_id in voided:
        services.label_void(label_id=label_id, reason="returned")
    assert audit_services.audit_full(campaign_id=campaign.pk) is None  # not saved before the rebuild
    audit_services.audit_refresh(campaign_id=campaign.pk)  # rebuilds without them, then audits
    matrix, watermark = audit_selectors.campaign_label_matrix(campaign=campaign)
    assert watermark == 15 == audit_selectors.campaign_totals(campaign_id=campaign.pk).n_labels
    _assert_same_numbers(audit_selectors.latest_snapshot(campaign=campaign).data, noise_audit(matrix))
    assert audit_selectors.latest_snapshot(campaign=campaign, kind="full") is None  # the one at 20 is gone
    full = audit_services.audit_full(campaign_id=campaign.pk)
    assert full.watermark == 15 and full.data["computed_on"]["watermark"] == 15

    _random_labels(campaign, workers, rng, 6, [1, 2, 3, 4])  # folded incrementally after the rebuild
    assert audit_services.stats_fold(campaign_id=campaign.pk) == 6
    totals = audit_selectors.campaign_totals(campaign_id=campaign.pk)
    matrix, watermark = audit_selectors.campaign_label_matrix(campaign=campaign)
    assert watermark == totals.n_labels == 21
    _assert_same_numbers(audit_selectors.quick_audit_data(campaign=campaign, totals=totals), noise_audit(matrix))
    incremental = _stats_rows(campaign)
    audit_services.stats_rebuild(campaign_id=campaign.pk)
    assert _stats_rows(campaign) == incremental


def test_a_full_run_that_read_the_labels_before_a_rebuild_is_not_saved(researcher, monkeypatch):
    """A void label and its rebuild (another worker's refresh) while a full run computes: the run's
    report holds the void label, and would pass for the latest at its (higher) watermark."""
    rng = random.Random(12)
    campaign = _campaign(researcher, schema="binary", n_prompts=6, k=3, rng=rng)
    _random_labels(campaign, [sim_worker() for _ in range(4)], rng, 10, [0, 1])
    read_labels = audit_selectors.campaign_label_matrices

    def read_then_void(**kwargs):
        read = read_labels(**kwargs)
        services.label_void(label_id=campaign.labels.first().pk, reason="returned")
        audit_services.stats_rebuild(campaign_id=campaign.pk)
        return read

    monkeypatch.setattr(audit_selectors, "campaign_label_matrices", read_then_void)
    assert audit_services.audit_full(campaign_id=campaign.pk) is None
    monkeypatch.setattr(audit_selectors, "campaign_label_matrices", read_labels)
    assert audit_selectors.latest_snapshot(campaign=campaign, kind="full") is None
    assert audit_services.audit_full(campaign_id=campaign.pk).watermark == 9


def test_a_map_changed_with_no_label_after_it_still_reaches_the_audit(
    researcher, enqueued, django_capture_on_commit_callbacks
):
    rng = random.Random(9)
    campaign = _campaign(
        researcher, schema="rating", n_prompts=6, k=3, rng=rng, binarization={"1": 0, "2": 0, "3": 1, "4": 1}
    )
    _random_labels(campaign, [sim_worker() for _ in range(4)], rng, 8, [1, 2, 3, 4])
    audit_services.audit_refresh(campaign_id=campaign.pk)
    services.campaign_transition(campaign=campaign, action="close")
    enqueued.clear()
    with django_capture_on_commit_callbacks(execute=True):
        campaign = services.campaign_update(campaign=campaign, binarization={"1": 0, "2": 1, "3": 1, "4": 1})
    assert AuditStats.objects.get(campaign=campaign).needs_rebuild
    assert len(enqueued) == 1  # the refresh, with no label after the change
    audit_services.audit_refresh(campaign_id=campaign.pk)
    quick = audit_selectors.latest_snapshot(campaign=campaign).data
    matrix, _ = audit_selectors.campaign_label_matrix(campaign=campaign)
    _assert_same_numbers(quick, noise_audit(matrix))


@pytest.mark.django_db(transaction=True)
def test_concurrent_labels_lose_no_update(researcher):
    """Workers submitting at the same time while folds run (threads, one connection each): the
    statistics still equal a rebuild from the labels, and the watermark counts every label once."""
    import threading

    from django.db import connection

    rng = random.Random(11)
    campaign = _campaign(researcher, schema="binary", n_prompts=12, k=5, rng=rng)
    workers = [sim_worker() for _ in range(6)]
    errors = []

    def crowd(worker, seed):
        try:
            local = random.Random(seed)
            for _ in range(12):
                lease = services.lease_acquire(campaign=campaign, worker=worker)
                if not isinstance(lease, Lease):
                    break
                services.label_submit(
                    lease_id=lease.pk, worker=worker, value=local.choice([0, 1]), client_token=f"t{lease.pk}"
                )
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    crowd_done = threading.Event()

    def folds():  # two quick runs' folds at once, as often as they go, while the crowd labels
        try:
            while not crowd_done.is_set():
                audit_services.stats_fold(campaign_id=campaign.pk)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=crowd, args=(w, i)) for i, w in enumerate(workers)]
    folders = [threading.Thread(target=folds) for _ in range(2)]
    for t in threads + folders:
        t.start()
    for t in threads:
        t.join()
    crowd_done.set()
    for t in folders:
        t.join()
    assert not errors, errors
    # How the labels fell into folds is the scheduler's (on a loaded machine SQLite may hand the two
    # folders its lock only once the crowd is done); what must hold whatever it was comes below.
    n = campaign.labels.count()
    assert n >= 50
    incremental = _stats_rows(campaign)
    assert incremental[3][0] == n
    audit_services.stats_rebuild(campaign_id=campaign.pk)
    assert _stats_rows(campaign) == incremental
