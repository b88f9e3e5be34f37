"""The assignment engine's hand-written SQL (``services.assignment``, ``annotation.rows``) against the
selectors and querysets it stands for: the same slots free, the same live lease, the same model
instances field by field. On both databases, since each types its values differently."""

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from annotation import selectors, services
from annotation.models import Campaign, Label, Lease, Prompt, Slot
from annotation.selectors.assignment import _unfilled_slots
from annotation.services import assignment
from tests.clock import later
from tests.helpers import label_one

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]


def fields(instance) -> dict:
    return {f.attname: getattr(instance, f.attname) for f in type(instance)._meta.concrete_fields}


@pytest.fixture
def busy(make_campaign, make_worker):
    """A campaign in every state a slot can be in, seen by ``worker``: prompts they labeled, gave back
    and let run out; slots other workers hold, filled, let run out; a retired prompt; untouched ones."""
    campaign = make_campaign(8, k=2, lease_seconds=60)
    worker, other, third = make_worker(), make_worker(), make_worker()
    label_one(campaign, worker)  # labeled
    given_back = services.lease_acquire(campaign=campaign, worker=worker)
    services.lease_release(lease_id=given_back.pk, worker=worker)
    services.lease_acquire(campaign=campaign, worker=other)  # held by another worker, live
    label_one(campaign, third)  # a slot filled by another worker
    services.lease_acquire(campaign=campaign, worker=third)  # ... and one of theirs that will run out
    untouched = Prompt.objects.filter(campaign=campaign, n_labels=0, leases__isnull=True)
    services.prompts_retired_set(campaign=campaign, prompt_ids=[untouched.first().pk])
    return campaign, worker


def test_the_free_slots_are_the_selectors(busy, make_worker):
    campaign, worker = busy
    for moment in (0, 61):  # the leases live, then run out
        with later(moment):
            now = timezone.now()
            for who in (worker, make_worker()):
                free, params = assignment._free_slots_sql(campaign=campaign, worker=who, now=now)
                with connection.cursor() as cursor:
                    cursor.execute(f"SELECT s.id {free}", params)
                    by_sql = {row[0] for row in cursor.fetchall()}
                by_orm = set(selectors.free_slots(campaign=campaign, now=now, worker=who).values_list("pk", flat=True))
                assert by_sql == by_orm and by_orm  # some free, so the comparison means something
                # The task page's count of prompts left (hand-written): one on screen + those with an
                # unfilled slot never leased to the worker.
                unfilled = _unfilled_slots(campaign, who).values_list("prompt_id", flat=True)
                progress = selectors.worker_progress(campaign=campaign, worker=who)
                assert progress.left == 1 + len(set(unfilled)) and not progress.more


@pytest.mark.parametrize("moment", [0, 61])
def test_a_workers_live_lease_is_the_selectors(busy, moment):
    campaign, worker = busy
    live = services.lease_acquire(campaign=campaign, worker=worker)
    with later(moment):
        now = timezone.now()
        expected = selectors.live_lease(campaign=campaign, worker=worker, now=now)
        with transaction.atomic():
            _, _, holds, _ = assignment._participation_locked(campaign_id=campaign.pk, worker_id=worker.pk, now=now)
            found = assignment._live_lease(campaign=campaign, worker=worker, now=now)
        assert holds == (expected is not None) == (moment == 0)
        assert (found and found.pk) == (expected and expected.pk) == (live.pk if moment == 0 else None)
    # A lease on a prompt retired since is nobody's live lease (set directly: the service refuses a prompt
    # another worker may have labeled already, and the draw decides which prompt this is).
    Prompt.objects.filter(pk=live.prompt_id).update(retired_at=timezone.now())
    with transaction.atomic():
        _, _, holds, _ = assignment._participation_locked(
            campaign_id=campaign.pk, worker_id=worker.pk, now=timezone.now()
        )
    assert not holds and selectors.live_lease(campaign=campaign, worker=worker, now=timezone.now()) is None


def test_rows_load_as_the_orm_loads_them(make_campaign, make_worker):
    """Every field of the lease, its campaign and its prompt, as the ORM reads them: dates aware, JSON
    decoded, booleans booleans, on either database."""
    campaign = make_campaign(2, k=2)
    Prompt.objects.filter(campaign=campaign).update(options=["a", "b"], gold=[1, 0], group="g")
    worker = make_worker()
    lease = services.lease_acquire(campaign=campaign, worker=worker)
    with transaction.atomic():
        locked = assignment._locked_lease(lease.pk, worker, campaign.slug, label_token=True)
    orm = Lease.objects.select_related("campaign", "prompt").get(pk=lease.pk)
    assert fields(locked) == fields(orm) and fields(locked.campaign) == fields(orm.campaign)
    assert fields(locked.prompt) == fields(orm.prompt) and locked.label_token is None
    assert fields(lease) == fields(orm) and fields(lease.prompt) == fields(orm.prompt)  # as lease_acquire made it
    assert fields(lease.slot) == fields(Slot.objects.get(pk=lease.slot_id))  # as the slot's UPDATE returned it
    assert isinstance(locked.campaign, Campaign) and locked.campaign.label_schema == orm.campaign.label_schema
    ack = services.label_submit(lease_id=lease.pk, worker=worker, value=1, client_token="tok")
    label = Label.objects.get(pk=ack.label_id)
    with transaction.atomic():
        assert assignment._locked_lease(lease.pk, worker, label_token=True).label_token == "tok"
    assert (label.value, label.leased_at, label.created_at, label.slot_id) == (
        1,
        orm.created_at,
        ack.created_at,
        orm.slot_id,
    )
    assert orm.expires_at - orm.created_at == timedelta(seconds=campaign.lease_seconds)
