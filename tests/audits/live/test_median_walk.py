"""The campaign's median seconds per label, walked from the previous read's anchor
(``audits.quality_tables.campaign_median_seconds``), equals the median of every row after each read:
rows arriving below, above and at the anchor, ties in seconds, odd and even counts, a rebuild that
clears the anchor; each fold counts its rows into the anchor (``median_anchor_shift``)."""

import random
import statistics

import pytest
from django.db import transaction
from django.db.models import F

from audits import services as audit_services
from audits.models import AuditStats, LabelSeconds
from audits.quality_tables import campaign_median_seconds, median_anchor_shift
from tests.helpers import label_all, sim_worker

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]


def _add(campaign, rng, n, label_ids, spread):
    """n rows more, as a fold adds them, with label ids not in arrival order (labels commit out of id
    order), so that a new row tied with the anchor on seconds orders before it as often as after."""
    rows = []
    for _ in range(n):
        label_ids.append(rng.choice([i for i in range(1, 10 * len(label_ids) + 20) if i not in label_ids]))
        # a coarse grid of seconds makes ties common, as labels timed to the millisecond are
        rows.append(LabelSeconds(campaign=campaign, worker_id=1, label_id=label_ids[-1], seconds=spread(rng)))
    LabelSeconds.objects.bulk_create(rows)
    median_anchor_shift(campaign_id=campaign.pk, rows=[(row.seconds, row.label_id) for row in rows])


def _read(campaign, n):
    with transaction.atomic():
        return campaign_median_seconds(campaign_id=campaign.pk, n=n)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_walked_median_is_the_median_of_every_row(make_campaign, seed):
    rng = random.Random(seed)
    campaign = make_campaign(1)
    AuditStats.objects.create(campaign=campaign)
    label_ids: list[int] = []
    assert _read(campaign, 0) is None
    # fast labels first, then slow ones, then fast again: the middle moves up, then back down
    phases = (
        [lambda r: r.randint(0, 20) / 4] * 3
        + [lambda r: r.randint(40, 80) / 4] * 4
        + [lambda r: r.randint(0, 8) / 4] * 5
    )
    for spread in phases:
        _add(campaign, rng, rng.randint(1, 9), label_ids, spread)
        n = LabelSeconds.objects.filter(campaign=campaign).count()
        expected = statistics.median(LabelSeconds.objects.filter(campaign=campaign).values_list("seconds", flat=True))
        assert _read(campaign, n) == expected
        anchor = AuditStats.objects.values_list("median_seconds_at", "median_label_at", "median_rank_at").get()
        ordered = list(LabelSeconds.objects.filter(campaign=campaign).order_by("seconds", "label_id"))
        assert (ordered[anchor[2]].seconds, ordered[anchor[2]].label_id) == anchor[:2]
        assert AuditStats.objects.values_list("median_of", flat=True).get() == n


def test_counts_that_disagree_with_the_rows_are_refused(make_campaign):
    campaign, label_ids = make_campaign(1), []
    AuditStats.objects.create(campaign=campaign)
    _add(campaign, random.Random(4), 5, label_ids, lambda r: r.random())
    assert _read(campaign, 5) is not None
    for n in (4, 6):  # a label the statistics missed, or one too many
        with pytest.raises(ValueError, match="do not match"):
            _read(campaign, n)
    _add(campaign, random.Random(4), 2, label_ids, lambda r: r.random())
    with pytest.raises(ValueError, match="do not match"):
        _read(campaign, 5)


def test_without_an_anchor_the_walk_starts_at_the_fastest_label(make_campaign):
    """What a rebuild leaves (rows, no anchor): the same median as with one."""
    campaign = make_campaign(1)
    AuditStats.objects.create(campaign=campaign)
    label_ids: list[int] = []
    _add(campaign, random.Random(5), 11, label_ids, lambda r: r.randint(0, 5))
    first = _read(campaign, 11)
    AuditStats.objects.update(median_seconds_at=None, median_label_at=None, median_rank_at=0)
    assert _read(campaign, 11) == first
    _add(campaign, random.Random(6), 4, label_ids, lambda r: r.randint(0, 5))
    assert _read(campaign, 15) == statistics.median(LabelSeconds.objects.values_list("seconds", flat=True))


def test_a_quick_run_that_finds_them_inconsistent_has_them_rebuilt(make_campaign):
    """An anchor that disagrees with the rows (it never should) fails no run for good: the quick run
    marks the statistics for a rebuild, which clears the anchor, and the next run audits."""
    campaign = make_campaign(4, k=2)
    for worker in (sim_worker(), sim_worker()):
        label_all(campaign, worker)
    assert audit_services.audit_refresh(campaign_id=campaign.pk) is not None
    AuditStats.objects.filter(campaign=campaign).update(median_of=F("median_of") + 3)
    assert audit_services.audit_refresh(campaign_id=campaign.pk) is None
    assert AuditStats.objects.get(campaign=campaign).needs_rebuild
    snapshot = audit_services.audit_refresh(campaign_id=campaign.pk)
    assert snapshot is not None and snapshot.data["worker_quality"]["campaign_median_seconds"] is not None
    assert AuditStats.objects.values_list("needs_rebuild", "median_of").get(campaign=campaign) == (False, 8)
