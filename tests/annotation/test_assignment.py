"""The assignment engine's guarantees, one behaviour at a time (concurrency lives in test_concurrency.py)."""

from datetime import timedelta
from unittest import mock

import pytest
from django.db import OperationalError
from django.utils import timezone

from annotation import services
from annotation.models import Campaign, Label, Lease, Slot
from annotation.selectors import invariant_violations
from tests.annotation.test_concurrency import campaign_of
from tests.clock import later

# A label each schema takes, and values it refuses (code bad_value), for the tests run per schema.
GOOD = {Campaign.Schema.BINARY: 1, Campaign.Schema.FREE_TEXT: "walk the dog"}
BAD = {
    Campaign.Schema.BINARY: [2, "yes", None, [1]],
    Campaign.Schema.FREE_TEXT: ["", " \n ", "x" * 61, "tab\x0b", 1, None, ["walk"]],
}

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]


@pytest.mark.parametrize("schema", list(GOOD))
def test_every_prompt_gets_exactly_k_distinct_workers(make_campaign, make_worker, schema):
    campaign = campaign_of(make_campaign, schema, 4, k=3)
    workers = [make_worker() for _ in range(5)]
    for _ in range(10):
        for w in workers:
            lease = services.lease_acquire(campaign=campaign, worker=w)
            if isinstance(lease, Lease):
                services.label_submit(lease_id=lease.pk, worker=w, value=GOOD[schema], client_token=f"t{lease.pk}")
    assert invariant_violations(campaign=campaign, complete=True) == []  # k each, from k distinct workers
    assert Label.objects.filter(campaign=campaign).count() == 12
    nothing = services.lease_acquire(campaign=campaign, worker=workers[0])
    assert isinstance(nothing, services.NothingLeft) and nothing.code == "nothing_left"


def test_asking_twice_returns_the_same_live_lease(make_campaign, make_worker):
    campaign, worker = make_campaign(5), make_worker()
    first = services.lease_acquire(campaign=campaign, worker=worker)
    assert services.lease_acquire(campaign=campaign, worker=worker).pk == first.pk


def test_a_worker_is_never_offered_a_prompt_they_let_expire(make_campaign, make_worker):
    campaign, worker = make_campaign(1, k=2, lease_seconds=60), make_worker()
    lease = services.lease_acquire(campaign=campaign, worker=worker)
    with later(61):
        again = services.lease_acquire(campaign=campaign, worker=worker)
        assert isinstance(again, services.NothingLeft)
        other = services.lease_acquire(campaign=campaign, worker=make_worker())
        assert isinstance(other, Lease) and other.prompt_id == lease.prompt_id


def test_an_expired_lease_frees_its_slot_and_its_label_is_refused(make_campaign, make_worker):
    campaign = make_campaign(1, k=1, lease_seconds=60)
    slow, fast = make_worker(), make_worker()
    lease = services.lease_acquire(campaign=campaign, worker=slow)
    assert isinstance(services.lease_acquire(campaign=campaign, worker=fast), services.NothingLeft)
    with later(61):
        taken = services.lease_acquire(campaign=campaign, worker=fast)
        assert isinstance(taken, Lease)
        with pytest.raises(services.LabelRefused) as refused:
            services.label_submit(lease_id=lease.pk, worker=slow, value=1, client_token="late")
        assert refused.value.code == "lease_expired"
        services.label_submit(lease_id=taken.pk, worker=fast, value=0, client_token="ok")
    assert list(Label.objects.values_list("worker", flat=True)) == [fast.pk]


def test_the_claim_after_a_label_leases_as_lease_acquire_or_answers_none(make_campaign, make_worker, caplog):
    """lease_acquire_after_label: the next lease, as lease_acquire gives it; None, and nothing held, where
    the caller must send the worker through the usual door: a claim the database refuses (logged), or a
    worker with no Participation row in the campaign (a campaign deleted since their label)."""
    campaign = make_campaign(3, k=1)
    worker, stranger = make_worker(), make_worker()
    first = services.lease_acquire(campaign=campaign, worker=worker)
    services.label_submit(lease_id=first.pk, worker=worker, value=1, client_token="t1")
    following = services.lease_acquire_after_label(campaign_slug=campaign.slug, worker=worker)
    assert isinstance(following, Lease) and following.pk != first.pk and following.worker_labels == 1
    services.label_submit(lease_id=following.pk, worker=worker, value=1, client_token="t2")
    assert services.lease_acquire_after_label(campaign_slug=campaign.slug, worker=stranger) is None
    with mock.patch("annotation.services.assignment._slot_take", side_effect=OperationalError("database is locked")):
        assert services.lease_acquire_after_label(campaign_slug=campaign.slug, worker=worker) is None
    assert "claim after a saved label failed" in caplog.text
    assert not Lease.objects.filter(status=Lease.Status.ACTIVE).exists()  # the refused claim rolled back
    assert isinstance(services.lease_acquire(campaign=campaign, worker=worker), Lease)  # the usual door serves


def test_heartbeat_keeps_a_lease_alive(make_campaign, make_worker):
    campaign = make_campaign(1, k=1, lease_seconds=60)
    worker = make_worker()
    lease = services.lease_acquire(campaign=campaign, worker=worker)
    with later(50):
        services.lease_heartbeat(lease_id=lease.pk, worker=worker)
    with later(100):
        assert isinstance(services.lease_acquire(campaign=campaign, worker=make_worker()), services.NothingLeft)
        ack = services.label_submit(lease_id=lease.pk, worker=worker, value=1, client_token="x")
    assert ack.worker_labels == 1


def test_resubmission_with_the_same_token_returns_the_same_ack(make_campaign, make_worker):
    campaign, worker = make_campaign(2), make_worker()
    lease = services.lease_acquire(campaign=campaign, worker=worker)
    first = services.label_submit(lease_id=lease.pk, worker=worker, value=1, client_token="abc")
    second = services.label_submit(lease_id=lease.pk, worker=worker, value=1, client_token="abc")
    assert (second.label_id, second.created_at, second.duplicate) == (first.label_id, first.created_at, True)
    with pytest.raises(services.LabelRefused, match="already labeled"):
        services.label_submit(lease_id=lease.pk, worker=worker, value=0, client_token="other")
    assert Label.objects.count() == 1


@pytest.mark.parametrize("schema, value", [(schema, value) for schema, values in BAD.items() for value in values])
def test_refused_labels_change_nothing(make_campaign, make_worker, schema, value):
    campaign, worker = campaign_of(make_campaign, schema, 1, k=2), make_worker()
    lease = services.lease_acquire(campaign=campaign, worker=worker)
    before = list(Slot.objects.order_by("pk").values())
    with pytest.raises(services.LabelRefused) as refused:
        services.label_submit(lease_id=lease.pk, worker=worker, value=value, client_token="t")
    assert refused.value.code == "bad_value"
    assert list(Slot.objects.order_by("pk").values()) == before
    assert Label.objects.count() == 0
    services.label_submit(lease_id=lease.pk, worker=worker, value=GOOD[schema], client_token="t")


def test_a_label_for_someone_elses_lease_is_refused(make_campaign, make_worker):
    campaign = make_campaign(1)
    owner, intruder = make_worker(), make_worker()
    lease = services.lease_acquire(campaign=campaign, worker=owner)
    with pytest.raises(services.LabelRefused) as refused:
        services.label_submit(lease_id=lease.pk, worker=intruder, value=1, client_token="t")
    assert refused.value.code == "not_leased"


def test_pause_stops_new_leases_but_live_leases_may_still_submit(make_campaign, make_worker):
    campaign = make_campaign(3)
    holder = make_worker()
    lease = services.lease_acquire(campaign=campaign, worker=holder)
    services.campaign_transition(campaign=campaign, action="pause")
    nothing = services.lease_acquire(campaign=campaign, worker=make_worker())
    assert isinstance(nothing, services.NothingLeft) and nothing.code == "campaign_paused"
    services.label_submit(lease_id=lease.pk, worker=holder, value=1, client_token="t")
    services.campaign_transition(campaign=campaign, action="resume")
    assert isinstance(services.lease_acquire(campaign=campaign, worker=make_worker()), Lease)


def test_closed_campaign_refuses_labels_once_leases_expire(make_campaign, make_worker):
    campaign = make_campaign(3, lease_seconds=60)
    worker = make_worker()
    lease = services.lease_acquire(campaign=campaign, worker=worker)
    services.campaign_transition(campaign=campaign, action="close")
    with later(61), pytest.raises(services.LabelRefused) as refused:
        services.label_submit(lease_id=lease.pk, worker=worker, value=1, client_token="t")
    assert refused.value.code == "campaign_closed"


@pytest.mark.parametrize("action", ["pause", "close"])
def test_heartbeats_do_not_keep_a_lease_alive_after_pause_or_close(make_campaign, make_worker, action):
    campaign = make_campaign(3, lease_seconds=60)
    worker = make_worker()
    lease = services.lease_acquire(campaign=campaign, worker=worker)
    expires = lease.expires_at
    services.campaign_transition(campaign=campaign, action=action)
    with later(30):  # the page keeps beating: the lease keeps its expiry, and may still be labeled
        assert services.lease_heartbeat(lease_id=lease.pk, worker=worker).expires_at == expires
    with later(61), pytest.raises(services.LeaseRefused) as ended:
        services.lease_heartbeat(lease_id=lease.pk, worker=worker)
    assert ended.value.code == "lease_ended"
    with later(61), pytest.raises(services.LabelRefused):
        services.label_submit(lease_id=lease.pk, worker=worker, value=1, client_token="t")
    assert not Label.objects.filter(lease=lease).exists()
    if action == "pause":  # resuming brings heartbeats back for a lease that is still live
        lease = services.lease_acquire(
            campaign=services.campaign_transition(campaign=campaign, action="resume"), worker=make_worker()
        )
        with later(30):
            assert services.lease_heartbeat(lease_id=lease.pk, worker=lease.worker).expires_at > lease.expires_at


def test_per_worker_cap(make_campaign, make_worker):
    campaign, worker = make_campaign(5, max_labels_per_worker=2), make_worker()
    for token in "ab":
        lease = services.lease_acquire(campaign=campaign, worker=worker)
        services.label_submit(lease_id=lease.pk, worker=worker, value=1, client_token=token)
    nothing = services.lease_acquire(campaign=campaign, worker=worker)
    assert isinstance(nothing, services.NothingLeft) and nothing.code == "cap_reached"


def test_fill_first_completes_a_started_prompt_before_opening_another(make_campaign, make_worker):
    campaign = make_campaign(50, k=3, policy="fill_first")
    first = make_worker()
    lease = services.lease_acquire(campaign=campaign, worker=first)
    services.label_submit(lease_id=lease.pk, worker=first, value=1, client_token="t")
    for _ in range(2):
        w = make_worker()
        next_lease = services.lease_acquire(campaign=campaign, worker=w)
        assert next_lease.prompt_id == lease.prompt_id
        services.label_submit(lease_id=next_lease.pk, worker=w, value=1, client_token="t")


def test_released_prompt_goes_to_someone_else(make_campaign, make_worker):
    campaign = make_campaign(1, k=1)
    skipper, other = make_worker(), make_worker()
    lease = services.lease_acquire(campaign=campaign, worker=skipper)
    services.lease_release(lease_id=lease.pk, worker=skipper)
    assert isinstance(services.lease_acquire(campaign=campaign, worker=skipper), services.NothingLeft)
    assert isinstance(services.lease_acquire(campaign=campaign, worker=other), Lease)


def test_a_slot_taken_between_the_claim_and_the_update_leaves_no_lease(make_campaign, make_worker):
    """lease_acquire's conditional UPDATE is the capacity check: when the claimed slot is not free when
    it comes to take it (here another worker's live lease holds it, as if it changed hands between the
    two statements), the lease row the claim made is gone and the next claim is tried; with none left,
    the worker hears "nothing left" and holds nothing."""
    campaign, first, second = make_campaign(1, k=1), make_worker(), make_worker()
    taken = services.lease_acquire(campaign=campaign, worker=first)

    def stale_claim(*args):
        now = timezone.now()
        claimed = Lease.objects.create(
            campaign=campaign, prompt_id=taken.prompt_id, worker=second, slot_id=taken.slot_id,
            created_at=now, expires_at=now + timedelta(seconds=60),
        )  # fmt: skip
        yield claimed.pk, taken.slot_id

    with mock.patch("annotation.services.assignment._claims", stale_claim):
        assert isinstance(services.lease_acquire(campaign=campaign, worker=second), services.NothingLeft)
    assert list(Lease.objects.values_list("worker_id", flat=True)) == [first.pk]
    assert Slot.objects.get(pk=taken.slot_id).lease_id == taken.pk
    assert invariant_violations(campaign=campaign) == []
