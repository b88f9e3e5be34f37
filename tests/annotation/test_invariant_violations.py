"""``selectors.invariant_violations``, the one check of the guarantees on stored rows that the tests,
benchmarks/assignment.py and benchmarks/soak.py share: it stays silent on a campaign the services
wrote, a voided label included, and names each kind of broken row (written here with update() or
the ORM, past the services; the database's own constraints dropped for the rows they forbid)."""

from contextlib import contextmanager
from datetime import timedelta
from unittest import mock

import pytest
from django.db import connection
from django.db.models import F
from django.utils import timezone

from annotation import services
from annotation.models import Campaign, ImportBatch, Label, Lease, Participation, Prompt, Slot, StopDecision
from annotation.selectors import VIOLATIONS_NAMED, invariant_violations
from tests.clock import later
from tests.helpers import label_all, label_one

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]


@pytest.fixture
def labeled(make_campaign, make_worker):
    """One prompt ('p0', k = 2) and its two labels, by two workers."""
    campaign = make_campaign(1, k=2)
    workers = [make_worker(), make_worker()]
    labels = [label_one(campaign, worker) for worker in workers]
    return campaign, workers, labels


def test_a_campaign_the_services_wrote_breaks_nothing_a_void_label_included(make_campaign, make_worker):
    campaign = make_campaign(3, k=2, lease_seconds=60)
    skipper, idle, *workers = [make_worker() for _ in range(5)]
    skipped = services.lease_acquire(campaign=campaign, worker=skipper)
    services.lease_release(lease_id=skipped.pk, worker=skipper)
    services.lease_acquire(campaign=campaign, worker=idle)  # left to expire
    voided = label_one(campaign, workers[0])
    label_one(campaign, workers[1])
    assert invariant_violations(campaign=campaign, acknowledged=[voided.pk]) == []

    services.label_void(label_id=voided.pk, reason="returned")

    # The void label keeps its row and its lease, and its worker keeps away from the prompt.
    assert invariant_violations(campaign=campaign, acknowledged=[voided.pk]) == []
    with later(61):
        for worker in (skipper, idle, *workers):
            label_all(campaign, worker)
        assert invariant_violations(campaign=campaign, acknowledged=[voided.pk], complete=True) == []
        assert invariant_violations(complete=True) == []  # every campaign


def test_a_control_prompt_has_no_slots_and_its_labels_fill_none(labeled):
    """Controls (``Prompt.is_control``) are served to measure workers, outside exactly-k; written here
    with the ORM as the schema describes them."""
    campaign, (first, _), _ = labeled
    control = Prompt.objects.create(
        campaign=campaign,
        batch=ImportBatch.objects.get(campaign=campaign),
        external_id="c0",
        text="A control",
        gold=1,
        is_control=True,
        n_labels=1,
    )
    ImportBatch.objects.filter(campaign=campaign).update(n_prompts=2)
    now = timezone.now()
    lease = Lease.objects.create(
        campaign=campaign,
        prompt=control,
        worker=first,
        slot=None,
        status=Lease.Status.SUBMITTED,
        created_at=now,
        expires_at=now + timedelta(minutes=5),
    )
    Label.objects.create(
        campaign=campaign,
        prompt=control,
        worker=first,
        lease=lease,
        is_control=True,
        value=1,
        client_token="control",
        leased_at=now,
        created_at=now + timedelta(seconds=3),
    )
    Participation.objects.filter(campaign=campaign, worker=first).update(n_labels=F("n_labels") + 1)
    assert invariant_violations(campaign=campaign, complete=True) == []
    Prompt.objects.filter(pk=control.pk).update(n_labels=0)
    assert invariant_violations(campaign=campaign) == [
        f"prompt 'c0' of {campaign.slug}: its counter says 0 labels, 1 count"
    ]


def test_complete_asks_for_exactly_k(labeled, make_campaign, make_worker):
    campaign = make_campaign(2, k=2)
    label_one(campaign, make_worker())
    assert invariant_violations(campaign=campaign) == []
    assert invariant_violations(campaign=campaign, complete=True) == [
        f"prompt {external_id!r} of {campaign.slug} has {n} counted labels for its 2 slots: not complete"
        for external_id, n in Prompt.objects.filter(campaign=campaign)
        .order_by("pk")
        .values_list("external_id", "n_labels")
    ]
    done, _, _ = labeled
    assert invariant_violations(campaign=done, complete=True) == []


def test_more_than_k_labels_on_a_prompt(labeled, make_worker):
    campaign, _, _ = labeled
    Slot.objects.create(campaign=campaign, prompt=campaign.prompts.get(), index=2, rand=0.5, priority=2)
    label_one(campaign, make_worker())
    assert invariant_violations(campaign=campaign) == [
        f"prompt 'p0' of {campaign.slug} has 3 counted labels, more than k = 2",
        f"prompt 'p0' of {campaign.slug} has 3 slots, not k = 2",
    ]
    # Adaptive k: a prompt may grow up to k_max slots, and labels, one slot per logged "extend"; a full
    # prompt has its "stop" or "at max" (the StopDecision rows the rule writes, written here by hand).
    Campaign.objects.filter(pk=campaign.pk).update(k_max=3)
    assert invariant_violations(campaign=campaign, complete=True) == [
        f"prompt 'p0' of {campaign.slug} has 3 slots, but k = 2 and 0 logged \"extend\" decisions make 2"
    ]
    prompt, now = campaign.prompts.get(), timezone.now()
    StopDecision.objects.create(
        campaign=campaign, prompt=prompt, n_labels=2, n_positive=2, posterior=0.875, outcome="extend", created_at=now
    )
    StopDecision.objects.create(
        campaign=campaign, prompt=prompt, n_labels=3, n_positive=3, posterior=0.9375, outcome="at_max", created_at=now
    )
    assert invariant_violations(campaign=campaign, complete=True) == []
    Campaign.objects.filter(pk=campaign.pk).update(k_max=2)
    assert invariant_violations(campaign=campaign) == [
        f"prompt 'p0' of {campaign.slug} has 3 counted labels, more than k_max = 2",
        f"prompt 'p0' of {campaign.slug} has 3 slots, not k = 2 to k_max = 2",
        f"prompt 'p0' of {campaign.slug} (now 3 slots): \"extend\" at 2 of 2 (posterior 0.8750) breaks the rule k = 2 "
        f"to k_max = 2, stop at 0.95",
        f"prompt 'p0' of {campaign.slug} (now 3 slots): \"at_max\" at 3 of 3 (posterior 0.9375) breaks the rule k = 2 "
        f"to k_max = 2, stop at 0.95",
    ]


def test_counters_out_of_step(labeled):
    campaign, (first, _), _ = labeled
    slug = campaign.slug
    Prompt.objects.update(n_labels=F("n_labels") + 1)
    assert invariant_violations(campaign=campaign) == [f"prompt 'p0' of {slug}: its counter says 3 labels, 2 count"]

    Prompt.objects.update(n_labels=F("n_labels") - 1)
    Participation.objects.filter(worker=first).update(n_labels=5)
    assert invariant_violations(campaign=campaign) == [
        f"worker {first.public_id} in {slug}: the counter says 5 labels, 1 count"
    ]

    Participation.objects.filter(worker=first).update(n_labels=1)
    ImportBatch.objects.filter(campaign=campaign).update(n_prompts=2)
    assert invariant_violations(campaign=campaign) == [f"import 'prompts.jsonl' of {slug} says 2 prompts, holds 1"]


def test_slots_out_of_step_with_their_labels(make_campaign, make_worker):
    campaign = make_campaign(1, k=3)
    label = label_one(campaign, make_worker())
    open_slots = Slot.objects.filter(campaign=campaign, filled=False).order_by("index")
    a, b = open_slots
    Slot.objects.filter(pk=a.pk).update(priority=0)
    assert invariant_violations(campaign=campaign) == [
        f"open slot {a.index} of prompt 'p0' of {campaign.slug} has fill-first priority 0, "
        "not the prompt's label count 1"
    ]

    Slot.objects.filter(pk=a.pk).update(priority=1, filled=True)
    assert invariant_violations(campaign=campaign) == [
        f"slot {a.index} of prompt 'p0' of {campaign.slug} is filled, but no counted label fills it"
    ]

    Slot.objects.filter(pk=a.pk).update(filled=False)
    Slot.objects.filter(pk=label.slot_id).update(filled=False, priority=1)
    assert invariant_violations(campaign=campaign) == [
        f"counted label {label.pk} does not fill the slot its lease {label.lease_id} holds: its slot {label.slot_id}"
        f" (filled: False, held by lease {label.lease_id}), the lease's slot {label.slot_id}"
    ]

    Slot.objects.filter(pk=label.slot_id).update(filled=True)
    Label.objects.filter(pk=label.pk).update(slot=b)  # the label moves to another slot; its own stays filled
    assert invariant_violations(campaign=campaign) == [
        f"counted label {label.pk} does not fill the slot its lease {label.lease_id} holds: its slot {b.pk}"
        f" (filled: False, held by lease None), the lease's slot {label.slot_id}",
        f"slot {label.slot.index} of prompt 'p0' of {campaign.slug} is filled, but no counted label fills it",
    ]


def test_a_label_that_did_not_come_through_its_own_live_lease(labeled, make_worker):
    campaign, (first, second), (label, _) = labeled
    lease = label.lease
    Lease.objects.filter(pk=lease.pk).update(status=Lease.Status.ACTIVE)
    assert invariant_violations(campaign=campaign) == [
        f"label {label.pk}: its lease {lease.pk} is active, not submitted"
    ]

    Lease.objects.filter(pk=lease.pk).update(status=Lease.Status.SUBMITTED, expires_at=label.created_at)
    [late] = invariant_violations(campaign=campaign)
    assert late.startswith(f"label {label.pk} arrived at ") and late.endswith(f", after its lease {lease.pk} ran out")

    Lease.objects.filter(pk=lease.pk).update(expires_at=label.created_at + timedelta(seconds=1))
    # Somebody else's label on this lease: a third worker, who joined the campaign but has no lease here.
    third = make_worker()
    Participation.objects.create(campaign=campaign, worker=third, n_labels=1)
    Participation.objects.filter(worker=first).update(n_labels=0)
    Label.objects.filter(pk=label.pk).update(worker=third)
    assert invariant_violations(campaign=campaign) == [
        f"label {label.pk} (worker {third.pk}, prompt {label.prompt_id}) came through lease {lease.pk} of worker "
        f"{first.pk} on prompt {label.prompt_id}"
    ]

    Participation.objects.filter(worker=third).delete()
    assert invariant_violations(campaign=campaign) == [
        f"label {label.pk} (worker {third.pk}, prompt {label.prompt_id}) came through lease {lease.pk} of worker "
        f"{first.pk} on prompt {label.prompt_id}",
        f"label {label.pk}: its worker has no participation in its campaign",
    ]


def test_an_acknowledged_label_that_is_not_stored(labeled):
    campaign, _, labels = labeled
    missing = max(label.pk for label in labels) + 1000
    assert invariant_violations(campaign=campaign, acknowledged=[labels[0].pk, missing, labels[1].pk]) == [
        f"acknowledged label {missing} is not stored"
    ]


def test_one_campaign_or_all_of_them(labeled, make_campaign):
    campaign, _, _ = labeled
    other = make_campaign(1, k=2, title="Other")
    Prompt.objects.filter(campaign=other).update(n_labels=2)
    assert invariant_violations(campaign=campaign) == []
    assert len(invariant_violations(campaign=other)) == 3  # the counter, and both open slots' priority
    assert invariant_violations() == invariant_violations(campaign=other)


def test_many_rows_of_one_kind_are_counted_not_all_named(make_campaign):
    campaign = make_campaign(VIOLATIONS_NAMED + 5, k=1)
    Slot.objects.filter(campaign=campaign).update(priority=1)
    violations = invariant_violations(campaign=campaign)
    assert len(violations) == VIOLATIONS_NAMED + 1
    assert violations[-1] == "... and 5 more like the last"


# --- rows the database's constraints forbid ------------------------------------------------------------


@contextmanager
def constraint_dropped(model, name: str):
    """The table of ``model`` without its constraint ``name``, so that the rows it forbids can be
    written; rows added meanwhile are deleted and the constraint is back afterwards."""
    constraint = next(c for c in model._meta.constraints if c.name == name)
    others = [c for c in model._meta.constraints if c.name != name]
    # SQLite rebuilds the table from the model's constraints; PostgreSQL drops the one named.
    with mock.patch.object(model._meta, "constraints", others), connection.schema_editor() as editor:
        editor.remove_constraint(model, constraint)
    last = model.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    try:
        yield
    finally:
        model.objects.filter(pk__gt=last).delete()
        with connection.schema_editor() as editor:
            editor.add_constraint(model, constraint)


@pytest.mark.django_db(transaction=True)  # schema changes, which SQLite makes only outside a transaction
def test_a_void_labels_worker_served_the_prompt_again(make_campaign, make_worker):
    campaign = make_campaign(1, k=2)
    worker = make_worker()
    voided = label_one(campaign, worker)
    services.label_void(label_id=voided.pk, reason="returned")
    slot = Slot.objects.get(campaign=campaign, filled=False, index=voided.lease.slot.index)
    now = timezone.now()
    with constraint_dropped(Lease, "lease_prompt_worker_unique"):
        Lease.objects.create(
            campaign=campaign,
            prompt=voided.prompt,
            worker=worker,
            slot=slot,
            created_at=now,
            expires_at=now + timedelta(minutes=5),
        )
        assert invariant_violations(campaign=campaign) == [
            f"worker {worker.public_id} has 2 leases on prompt 'p0' of {campaign.slug}: never twice"
        ]
    assert invariant_violations(campaign=campaign) == []


@pytest.mark.django_db(transaction=True)
def test_two_labels_of_one_worker_on_a_prompt(make_campaign, make_worker):
    campaign = make_campaign(1, k=3)
    worker, other = make_worker(), make_worker()
    label = label_one(campaign, worker)
    services.label_void(label_id=label.pk, reason="returned")
    lease = services.lease_acquire(campaign=campaign, worker=other)  # a lease the second label can take
    with constraint_dropped(Label, "label_prompt_worker_unique"):
        Label.objects.create(
            campaign=campaign,
            prompt=label.prompt,
            worker=worker,
            lease=lease,
            value=1,
            client_token="again",
            leased_at=lease.created_at,
            created_at=lease.created_at,
            voided_at=timezone.now(),
        )
        violations = invariant_violations(campaign=campaign)
        assert (
            f"worker {worker.public_id} has 2 labels (void ones included) on prompt 'p0' of {campaign.slug}: "
            "never twice" in violations
        )
    assert invariant_violations(campaign=campaign) == []
