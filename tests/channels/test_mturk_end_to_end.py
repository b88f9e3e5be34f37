"""MTurk end to end against the fake MTurk: publish through the Celery task, workers accept HITs and
label on Chorus's real task page, reconciliation approves, rejects, refills, blocks and pays — with
native workers labeling the same campaign, and throttling and lost responses injected."""

import pytest

from annotation.channels import selectors, services
from annotation.channels.models import (
    MTurkAssignment,
    MTurkBonus,
    MTurkHIT,
    MTurkWorkerBlock,
    Publication,
)
from annotation.models import Label
from annotation.selectors import invariant_violations
from tests.channels.workers import mturk_worker_turn
from tests.clock import later
from tests.helpers import label_one

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]

OPTIONS = {
    "title": "Is this statement true?",
    "description": "Read one statement and say whether it is true.",
    "reward": "0.10",
    "assignments_per_hit": 4,
    "locales": ["US"],
    "min_approval_rate": 95,
}


def turns_until_stopped(fake, worker_id, limit=10):
    outcomes = []
    for _ in range(limit):
        outcome = mturk_worker_turn(fake, worker_id, value=1)
        outcomes.append(outcome)
        if outcome in ("no_hits", "nothing_left"):
            break
    return outcomes


def test_publish_label_reconcile_with_native_workers_and_injected_faults(
    make_campaign,
    make_worker,
    researcher,
    mturk,
    eager_celery,
    django_capture_on_commit_callbacks,
    no_remote_call_in_transaction,
):
    fake = mturk
    campaign = make_campaign(8, k=3, lease_seconds=60, max_labels_per_worker=3)
    natives = [make_worker() for _ in range(3)]
    for worker in natives[:2]:
        label_one(campaign, worker, value=0)
        label_one(campaign, worker, value=0)
    assert selectors.labels_still_needed(campaign=campaign) == 20

    # --- publish: the service writes a pending publication; the task (run after commit) creates the HITs
    fake.inject("CreateHITWithHITType", "throttle", times=2)
    fake.inject("CreateHITWithHITType", "lost_response")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        publication = services.publication_create_mturk(campaign=campaign, user=researcher, options=OPTIONS)
        assert publication.status == Publication.Status.PENDING and fake.calls == []  # nothing sent before commit
    assert len(callbacks) == 1
    publication.refresh_from_db()
    assert publication.status == Publication.Status.PUBLISHED, publication.error
    assert sorted(h["max"] for h in fake.hits.values()) == [4, 4, 4, 4, 4]  # 20 assignments, no duplicate HIT
    assert set(MTurkHIT.objects.filter(publication=publication).values_list("hit_id", flat=True)) == set(fake.hits)
    hit_type = fake.hit_types[publication.remote_group_id]
    assert hit_type["Reward"] == "0.10"
    assert {r["QualificationTypeId"]: r["Comparator"] for r in hit_type["QualificationRequirements"]} == {
        publication.remote_block_id: "DoesNotExist",
        "00000000000000000071": "In",
        "000000000000000000L0": "GreaterThanOrEqualTo",
    }

    # --- phase A: one worker opens a HIT and returns it (their lease holds a slot until it expires),
    # one forges a submission without labeling, four label until the per-worker cap, a native labels too
    assert mturk_worker_turn(fake, "AWORKER00", returns=True) == "returned"
    forged = fake.accept(fake.visible_hits("AFORGER")[0], "AFORGER")
    fake.external_submit({"assignmentId": forged})
    for worker_id in ["AWORKER01", "AWORKER02", "AWORKER03", "AWORKER04"]:
        assert turns_until_stopped(fake, worker_id) == ["labeled"] * 3 + ["nothing_left"]
    label_one(campaign, natives[2], value=0)
    label_one(campaign, natives[2], value=0)
    assert MTurkWorkerBlock.objects.filter(publication=publication, status="pending").count() == 4

    fake.inject("ListAssignmentsForHIT", "throttle", times=2)
    fake.inject(
        "ApproveAssignment", "lost_response"
    )  # approved, but the answer is lost: the retry must not approve twice
    first = services.mturk_reconcile(publication_id=publication.pk)
    assert first.errors == []
    assert first.approved + first.already_reviewed == 12 and first.already_reviewed == 1
    assert (first.rejected, first.refilled, first.blocks_pushed) == (1, 1, 4)
    assert fake.status_of(forged) == "Rejected"
    assert sum(h["max"] for h in fake.hits.values()) == 21  # the forged assignment was replaced
    for blocked in ["AWORKER01", "AWORKER02", "AWORKER03", "AWORKER04"]:
        assert fake.visible_hits(blocked) == []
    assert fake.visible_hits("AWORKER05") != []

    # --- phase B: the returned assignment's lease has expired; the campaign fills up
    with later(61):
        outcomes = {w: turns_until_stopped(fake, w) for w in ["AWORKER05", "AWORKER06", "AWORKER00", "AWORKER07"]}
    assert sum(o.count("labeled") for o in outcomes.values()) == 6
    assert all(o[-1] in ("nothing_left", "no_hits") and o.count("labeled") <= 3 for o in outcomes.values())
    told_nothing_left = [w for w, o in outcomes.items() if o[-1] == "nothing_left"]
    assert told_nothing_left  # the HITs were still up when the campaign filled: the next worker was told
    assert selectors.labels_still_needed(campaign=campaign) == 0

    second = services.mturk_reconcile(publication_id=publication.pk)
    assert second.errors == [] and second.approved == 6 and second.expired == 5
    assert second.blocks_pushed == len(told_nothing_left)
    assert all(fake.visible_hits(w) == [] for w in [*told_nothing_left, "ANEWCOMER"])  # expired for everybody

    # --- a bonus, whose first answer is lost: paid exactly once
    assignment = MTurkAssignment.objects.filter(hit__publication=publication, status="approved").first()
    services.mturk_bonus_grant(assignment=assignment, amount="0.25", reason="Careful work")
    fake.inject("SendBonus", "lost_response")
    third = services.mturk_reconcile(publication_id=publication.pk)
    fourth = services.mturk_reconcile(publication_id=publication.pk)
    assert third.errors == [] and fourth.errors == []
    assert fake.attempts["SendBonus"] == 2 and len(fake.bonuses) == 1
    bonus = MTurkBonus.objects.get()
    assert fake.bonuses[0]["BonusAmount"] == "0.25" and fake.bonuses[0]["AssignmentId"] == assignment.assignment_id
    assert fake.bonuses[0]["token"] == f"{publication.token_prefix}-b{bonus.pk}" and bonus.status == "sent"
    assert (fourth.approved, fourth.rejected, fourth.refilled, fourth.bonuses_paid) == (0, 0, 0, 0)

    # --- the guarantees: exactly k distinct workers per prompt, across channels; nothing lost or paid twice
    assert invariant_violations(campaign=campaign, complete=True) == []
    assert Label.objects.counted().filter(campaign=campaign).count() == 24  # 8 prompts × k = 3
    mturk_labels = Label.objects.filter(campaign=campaign, worker__channel="mturk_sandbox")
    assert mturk_labels.count() == 18
    approved_on_mturk = {a["id"] for a in fake.assignments.values() if a["status"] == "Approved"}
    assert len(approved_on_mturk) == 18
    assert (
        set(MTurkAssignment.objects.filter(status="approved").values_list("assignment_id", flat=True))
        == approved_on_mturk
    )
    assert set(MTurkAssignment.objects.filter(status="approved").values_list("label_id", flat=True)) == set(
        mturk_labels.values_list("pk", flat=True)
    )
    assert all(fake.effects[("approve", aid)] == 1 for aid in approved_on_mturk)
    assert fake.effects[("reject", forged)] == 1 and fake.attempts["RejectAssignment"] == 1
