"""Worker quality from its sufficient statistics equals the full recomputation from the labels: after
random label sequences with controls, exclusions and inclusions, void labels and invalid values, the
quick run's table (``worker_quality``, folded per run) is the one read from every
label (``worker_quality_from_labels``), counts and medians exactly, the bias to 1e-12; and a rebuild
from the labels stores the very statistics the labels kept."""

import json
import math
import random
from unittest import mock

import pytest

from annotation import services
from annotation.models import Lease, Participation, Prompt
from annotation.services import controls, quality
from audits import selectors as audit_selectors
from audits import services as audit_services
from audits.models import (
    AuditStats,
    LabelSeconds,
    PendingLabel,
    WorkerBiasStats,
    WorkerQualityStats,
    WorkerValueCount,
)
from tests.helpers import sim_worker

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]


def _campaign(researcher, *, schema, n_prompts, n_controls, k, rng, **fields):
    campaign = services.campaign_create(owner=researcher, title=f"Random {schema}", schema=schema, k=k, **fields)
    options = 3 if schema == "option_rating" else 0
    rows = []
    for i in range(n_prompts):
        row = {"id": f"q{i}", "text": f"Statement {i}."}
        if options:
            row["options"] = [f"answer {j}" for j in range(options)]
        rows.append(row)
    for i in range(n_controls):
        row = {"id": f"c{i}", "text": f"Control {i}.", "control": True}
        if options:
            row["options"] = [f"answer {j}" for j in range(options)]
            row["gold"] = [rng.randint(1, 4) for _ in range(options)]
        else:
            row["gold"] = rng.choice([0, 1]) if schema == "binary" else rng.randint(1, 4)
        rows.append(row)
    data = ("\n".join(json.dumps(r) for r in rows) + "\n").encode()
    services.prompts_import(campaign=campaign, data=data, filename="p.jsonl")
    if n_controls:
        campaign = services.campaign_update(campaign=campaign, control_rate=0.3)
    return services.campaign_transition(campaign=campaign, action="launch")


def _label(campaign, workers, rng, n_labels, values):
    done = 0
    for _ in range(n_labels * 4):
        if done == n_labels:
            break
        worker = rng.choice(workers)
        lease = services.lease_acquire(campaign=campaign, worker=worker)
        if not isinstance(lease, Lease):
            continue
        n_options = len(lease.prompt.options)
        value = [rng.choice(values) for _ in range(n_options)] if n_options else rng.choice(values)
        services.label_submit(lease_id=lease.pk, worker=worker, value=value, client_token=f"t{lease.pk}")
        done += 1
    return done


def _refresh_stats(campaign):
    """What the quick run does before it reads: fold the labels since the last fold, then rebuild
    statistics marked stale."""
    audit_services.stats_fold(campaign_id=campaign.pk)
    if AuditStats.objects.get(campaign=campaign).needs_rebuild:
        audit_services.stats_rebuild(campaign_id=campaign.pk)


def _close(a, b, path=""):
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), (path, a, b)
        for key in a:
            _close(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), (path, a, b)
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12), (path, a, b)
    else:
        assert a == b, (path, a, b)


def _assert_same_table(campaign):
    incremental = audit_selectors.worker_quality(campaign=campaign).to_dict()
    full = audit_selectors.worker_quality_from_labels(campaign=campaign).to_dict()
    for d in (incremental, full):
        d.pop("computed_at"), d.pop("duration_ms")
    # counts, shares and medians exactly; flags' words exactly; the bias's floats to 1e-12
    _close(incremental, full)
    for a, b in zip(incremental["workers"], full["workers"]):
        for key in ("n_labels", "n_controls", "n_correct", "n_timed", "n_compared", "top_value", "top_share"):
            assert a[key] == b[key], (key, a, b)
        assert a["median_seconds"] == b["median_seconds"] and a["control_ci"] == b["control_ci"]
        assert a["flags"] == b["flags"]
    assert incremental["campaign_median_seconds"] == full["campaign_median_seconds"]
    return incremental


def _stored(campaign):
    """The statistics as stored (zero bias rows aside, which folds leave and a rebuild does not write)."""
    return (
        sorted(
            WorkerQualityStats.objects.filter(campaign=campaign).values_list(
                "worker_id", "n_labels", "n_controls", "n_correct", "median_seconds"
            )
        ),
        sorted(WorkerValueCount.objects.filter(campaign=campaign, n__gt=0).values_list("worker_id", "value", "n")),
        sorted(
            WorkerBiasStats.objects.filter(campaign=campaign, n__gt=0).values_list(
                "worker_id", "k", "n", "sx", "sxx", "so", "soo", "sxo"
            )
        ),
        sorted(LabelSeconds.objects.filter(campaign=campaign).values_list("worker_id", "label_id", "seconds")),
    )


CASES = [
    # schema, fields, values workers choose from, seed
    ("binary", {}, [0, 1], 11),
    ("binary", {}, [0, 1], 12),
    # 5 is outside the map: counted invalid, never audited
    ("rating", {"scale_max": 5, "binarization": {"1": 0, "2": 0, "4": 1, "5": 1}}, [1, 2, 3, 4, 5], 13),
    ("option_rating", {"binarization": {"1": 0, "2": 0, "3": 1, "4": 1}}, [1, 2, 3, 4], 14),
    # Without a map, on the unit scale: the statistics hold grid points, read back divided (issue 22).
    ("rating", {"scale_min": 0, "scale_max": 10, "scale_step": 0.5}, [0, 2.5, 5, 7.5, 10, 6.5], 15),
    ("rating", {"scale_min": 0, "scale_max": 100, "scale_step": None}, [0, 12.3, 37.5, 99.9, 100], 16),
]


@pytest.mark.parametrize(("schema", "fields", "values", "seed"), CASES)
def test_incremental_worker_quality_equals_the_full_recomputation(researcher, schema, fields, values, seed):
    rng = random.Random(seed)
    k = rng.choice([3, 4, 5])
    n_prompts = rng.randint(8, 16)
    campaign = _campaign(researcher, schema=schema, n_prompts=n_prompts, n_controls=4, k=k, rng=rng, **fields)
    workers = [sim_worker() for _ in range(rng.randint(k + 1, 8))]
    checked = 0
    with mock.patch.object(controls, "random", rng):
        # each sequence meets every event: labels folding across runs, an exclusion, a void, an inclusion
        for event in ("fold", "run", "exclude", "void", "fold", "include", "run"):
            if not _label(campaign, workers, rng, rng.randint(4, n_prompts), values):
                break
            if event in ("exclude", "include"):  # a worker excluded from the audit, or included again
                participation = rng.choice(
                    list(Participation.objects.filter(campaign=campaign, excluded_at__isnull=event == "exclude"))
                )
                quality.worker_act(
                    kind=event, campaign=campaign, worker=participation.worker, by=researcher, reason="test"
                )
            elif event == "void":
                label = rng.choice(list(campaign.labels.filter(voided_at__isnull=True)))
                services.label_void(label_id=label.pk, reason="returned")
            elif event == "fold":  # labels keep coming without a fold: the next one takes them all at once
                continue
            _refresh_stats(campaign)
            _assert_same_table(campaign)
            checked += 1
    _refresh_stats(campaign)
    table = _assert_same_table(campaign)
    assert table["watermark"] == campaign.labels.filter(voided_at__isnull=True).count()
    assert checked >= 2
    assert not PendingLabel.objects.filter(campaign=campaign).exists()  # every label folded once
    assert Prompt.objects.filter(campaign=campaign, is_control=True).exists()


def test_a_rebuild_stores_what_the_labels_kept(researcher):
    rng = random.Random(21)
    campaign = _campaign(
        researcher,
        schema="option_rating",
        n_prompts=10,
        n_controls=3,
        k=4,
        rng=rng,
        binarization={"1": 0, "2": 0, "4": 1},
    )
    workers = [sim_worker() for _ in range(6)]
    with mock.patch.object(controls, "random", rng):
        _label(campaign, workers, rng, 30, [1, 2, 3, 4])
    quality.worker_act(kind="exclude", campaign=campaign, worker=workers[0], by=researcher, reason="test")
    audit_services.stats_rebuild(campaign_id=campaign.pk)
    with mock.patch.object(controls, "random", rng):
        _label(campaign, workers, rng, 12, [1, 2, 3, 4])  # the excluded worker's labels fold with k others
    audit_services.stats_fold(campaign_id=campaign.pk)
    incremental = _stored(campaign)
    assert incremental[0] and incremental[2]
    audit_services.stats_rebuild(campaign_id=campaign.pk)
    assert _stored(campaign) == incremental


def test_a_refresh_reads_the_statistics_not_the_labels(researcher, django_assert_max_num_queries):
    rng = random.Random(22)
    campaign = _campaign(researcher, schema="binary", n_prompts=12, n_controls=2, k=3, rng=rng)
    workers = [sim_worker() for _ in range(5)]
    with mock.patch.object(controls, "random", rng):
        _label(campaign, workers, rng, 24, [0, 1])
    # The fold takes the 24 labels in a constant number of statements (a few per table, not per label).
    with django_assert_max_num_queries(30):
        assert audit_services.stats_fold(campaign_id=campaign.pk) == 24
    # A constant number of queries over per-worker rows; the first read also counts the label seconds
    # (the campaign median has no anchor yet: audits.quality_tables.campaign_median_seconds).
    with django_assert_max_num_queries(14):
        quality = audit_selectors.worker_quality(campaign=campaign)
    assert quality.watermark == 24
