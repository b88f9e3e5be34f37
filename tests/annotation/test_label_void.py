"""``label_void``: a label a channel takes back (an MTurk assignment returned, abandoned or rejected
after its label was acknowledged) keeps its row and its lease, gives its slot back to the pool, and
leaves every count, export and audit."""

import pytest

from annotation import services
from annotation.models import Label, Lease, Participation, Prompt, Slot
from annotation.selectors import campaign_labels, campaign_progress, invariant_violations, label_export_rows
from audits.models import AuditStats
from audits.selectors import campaign_label_matrix
from audits.services import stats_fold
from tests.helpers import label_one

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]


def test_a_void_label_frees_its_slot_for_another_worker_but_never_for_its_own(make_campaign, make_worker):
    campaign = make_campaign(1, k=2)
    first, second, third = make_worker(), make_worker(), make_worker()
    voided = label_one(campaign, first)
    label_one(campaign, second)
    assert isinstance(services.lease_acquire(campaign=campaign, worker=third), services.NothingLeft)

    services.label_void(label_id=voided.pk, reason="returned")

    voided.refresh_from_db()
    assert voided.voided_at is not None and voided.void_reason == "returned" and voided.slot_id is None
    assert Lease.objects.get(pk=voided.lease_id).status == Lease.Status.SUBMITTED  # the lease stays
    prompt = Prompt.objects.get(campaign=campaign)
    assert prompt.n_labels == 1
    assert Slot.objects.filter(prompt=prompt, filled=False).count() == 1
    assert Participation.objects.get(campaign=campaign, worker=first).n_labels == 0
    assert campaign_progress(campaign=campaign).labels == 1

    again = services.lease_acquire(campaign=campaign, worker=first)
    assert isinstance(again, services.NothingLeft) and again.code == "nothing_left"  # never twice
    refill = label_one(campaign, third)
    assert refill.prompt_id == prompt.pk
    prompt.refresh_from_db()
    assert prompt.n_labels == 2 and not Slot.objects.filter(prompt=prompt, filled=False).exists()
    assert Label.objects.filter(prompt=prompt).count() == 3  # nothing deleted
    assert sorted(Label.objects.counted().filter(prompt=prompt).values_list("worker_id", flat=True)) == sorted(
        [second.pk, third.pk]
    )
    assert invariant_violations(campaign=campaign, acknowledged=[voided.pk], complete=True) == []


def test_voiding_twice_changes_nothing(make_campaign, make_worker):
    campaign = make_campaign(1, k=3)
    label = label_one(campaign, make_worker())
    label_one(campaign, make_worker())
    first = services.label_void(label_id=label.pk, reason="returned")
    second = services.label_void(label_id=label.pk, reason="rejected")
    assert second.voided_at == first.voided_at and second.void_reason == "returned"
    assert Prompt.objects.get(campaign=campaign).n_labels == 1
    assert Slot.objects.filter(campaign=campaign, filled=False).count() == 2


def test_a_resubmission_after_the_void_is_not_a_new_label(make_campaign, make_worker):
    campaign, worker = make_campaign(1, k=2), make_worker()
    label = label_one(campaign, worker)
    services.label_void(label_id=label.pk, reason="returned")
    ack = services.label_submit(lease_id=label.lease_id, worker=worker, value=1, client_token=label.client_token)
    assert ack.duplicate and ack.label_id == label.pk
    with pytest.raises(services.LabelRefused):
        services.label_submit(lease_id=label.lease_id, worker=worker, value=1, client_token="another")
    assert Prompt.objects.get(campaign=campaign).n_labels == 0 and Label.objects.count() == 1


def test_fill_first_priorities_follow_the_void(make_campaign, make_worker):
    campaign = make_campaign(2, k=3, policy="fill_first")
    labels = [label_one(campaign, make_worker()) for _ in range(2)]  # fill-first: both on one prompt
    prompt = labels[0].prompt
    assert labels[1].prompt_id == prompt.pk
    services.label_void(label_id=labels[0].pk, reason="returned")
    open_slots = Slot.objects.filter(prompt=prompt, filled=False)
    assert sorted(open_slots.values_list("priority", flat=True)) == [1, 1]  # the prompt's one counted label
    # A new worker still goes to the prompt that has a label, not to the empty one.
    assert label_one(campaign, make_worker()).prompt_id == prompt.pk


def test_void_labels_leave_the_exports_the_matrix_and_the_statistics(make_campaign, make_worker):
    campaign = make_campaign(2, k=2)
    labels = [label_one(campaign, make_worker(), value=v) for v in (1, 0, 1)]
    stats_fold(campaign_id=campaign.pk)  # a quick run folded them before the void
    services.label_void(label_id=labels[1].pk, reason="rejected")
    kept = {labels[0].pk, labels[2].pk}
    assert set(campaign_labels(campaign=campaign).values_list("pk", flat=True)) == kept
    assert {row["label_id"] for row in label_export_rows(campaign=campaign)} == kept
    matrix, watermark = campaign_label_matrix(campaign=campaign)
    assert watermark == 2 and matrix.n_labels == 2
    assert AuditStats.objects.get(campaign=campaign).needs_rebuild  # the next audit run rebuilds without it
