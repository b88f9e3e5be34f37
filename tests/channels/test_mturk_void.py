"""A label counts when its MTurk assignment is Submitted or Approved. Against the fake MTurk, through
Chorus's real task page: a worker who labels and then returns the HIT (or lets it expire), or whose
submitted assignment is rejected, leaves a void label whose slot another worker fills."""

import pytest
from django.urls import reverse

from annotation.channels import services
from annotation.channels.models import MTurkAssignment
from annotation.channels.registry import get_channel
from annotation.channels.selectors import labels_still_needed, mturk_progress
from annotation.channels.services.reconciliation import MTURK_SUBMIT_GRACE
from annotation.models import Label, Lease
from annotation.selectors import invariant_violations, label_export_rows
from tests.channels.workers import (
    fresh_client,
    label_form_action,
    mturk_worker_turn,
    open_task,
)
from tests.clock import later

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]

DURATION = 300
OPTIONS = {
    "title": "Is this statement true?",
    "description": "Read one statement and say whether it is true.",
    "reward": "0.10",
    "assignments_per_hit": 4,
    "assignment_duration": DURATION,
}
LAPSED = DURATION + MTURK_SUBMIT_GRACE.total_seconds() + 1  # seconds after opening


def label_without_submitting(fake, worker_id: str) -> str:
    """The worker accepts a HIT and labels on Chorus's page, but never submits the assignment to MTurk."""
    assignment_id = fake.accept(fake.visible_hits(worker_id)[0], worker_id)
    done = fresh_client().post(label_form_action(open_task(fake, assignment_id)), {"value": "1", "client_token": "x"})
    assert done.status_code == 200 and b"mturk-submit-form" in done.content
    return assignment_id


def publish(make_campaign, researcher, n_prompts=2, k=2):
    campaign = make_campaign(n_prompts, k=k, lease_seconds=60)
    publication = services.publication_create_mturk(campaign=campaign, user=researcher, options=OPTIONS)
    services.publication_publish(publication_id=publication.pk)
    return campaign, publication


def test_a_label_whose_assignment_is_returned_is_void_and_its_slot_refilled(make_campaign, researcher, mturk, client):
    fake = mturk
    campaign, publication = publish(make_campaign, researcher)
    returned = label_without_submitting(fake, "ARETURNS")
    fake.return_assignment(returned)
    for worker_id in ("AW1", "AW2", "AW3"):
        assert mturk_worker_turn(fake, worker_id) == "labeled"
    assert labels_still_needed(campaign=campaign) == 0  # the returned label holds its slot for now

    early = services.mturk_reconcile(publication_id=publication.pk)
    assert (early.approved, early.voided, early.abandoned, early.errors) == (3, 0, 0, [])
    with later(DURATION + MTURK_SUBMIT_GRACE.total_seconds() - 5):  # MTurk's listing may still lag
        assert services.mturk_reconcile(publication_id=publication.pk).voided == 0

    with later(LAPSED):
        report = services.mturk_reconcile(publication_id=publication.pk)
        assert (report.voided, report.abandoned, report.errors) == (1, 1, [])
        assert report.extended >= 1  # the campaign wants a label again: the HITs are kept up
        assert labels_still_needed(campaign=campaign) == 1
        assignment = MTurkAssignment.objects.get(assignment_id=returned)
        assert assignment.status == MTurkAssignment.Status.ABANDONED
        void = assignment.label
        assert void.voided_at is not None and "returned" in void.void_reason
        assert Lease.objects.get(pk=void.lease_id).worker.external_id == "ARETURNS"  # kept: never twice
        assert services.mturk_reconcile(publication_id=publication.pk).voided == 0  # idempotent

        # The worker who returned it is never shown that prompt again; a newcomer fills the slot.
        assert mturk_worker_turn(fake, "ARETURNS") == "nothing_left"
        assert mturk_worker_turn(fake, "ANEW") == "labeled"
        final = services.mturk_reconcile(publication_id=publication.pk)
    assert final.approved == 1 and final.errors == []
    assert invariant_violations(campaign=campaign, complete=True) == []
    assert Label.objects.filter(campaign=campaign).count() == 5  # the void label is kept
    assert void.pk not in {row["label_id"] for row in label_export_rows(campaign=campaign)}
    progress = mturk_progress(publication=publication)
    assert (progress.labeled, progress.voided, progress.abandoned, progress.approved) == (5, 1, 1, 4)
    client.force_login(researcher)
    page = client.get(reverse("channels:publication_detail", args=[publication.pk])).content.decode()
    assert '<td class="voided">1</td>' in page and '<td class="abandoned">1</td>' in page


def test_a_label_whose_assignment_expires_unsubmitted_is_void(make_campaign, researcher, mturk):
    fake = mturk
    campaign, publication = publish(make_campaign, researcher, n_prompts=1, k=2)
    kept = label_without_submitting(fake, "AKEEPS")
    fake.advance(LAPSED)  # MTurk's side: the assignment's time ran out
    assert fake.status_of(kept) == "Abandoned"
    with later(LAPSED):
        report = services.mturk_reconcile(publication_id=publication.pk)
    assert (report.voided, report.abandoned) == (1, 1)
    assert (
        labels_still_needed(campaign=campaign) == 2 and not Label.objects.counted().filter(campaign=campaign).exists()
    )
    assert invariant_violations(campaign=campaign) == []


def test_a_rejected_assignment_voids_its_label_and_gives_the_slot_back(make_campaign, researcher, mturk):
    fake = mturk
    campaign, publication = publish(make_campaign, researcher, n_prompts=1, k=2)
    assert mturk_worker_turn(fake, "AREJECTED") == "labeled"
    (assignment_id,) = fake.assignments
    # The requester rejects it outside Chorus (MTurk's own site), before Chorus reviews it.
    get_channel("mturk").client.reject_assignment(AssignmentId=assignment_id, RequesterFeedback="Not careful")
    report = services.mturk_reconcile(publication_id=publication.pk)
    assert (report.approved, report.rejected, report.refilled, report.errors) == (0, 0, 1, [])
    label = MTurkAssignment.objects.get(assignment_id=assignment_id).label
    assert label.voided_at is not None and "rejected" in label.void_reason
    assert labels_still_needed(campaign=campaign) == 2
    assert services.mturk_reconcile(publication_id=publication.pk).refilled == 0


def test_an_assignment_listed_after_its_label_was_voided_is_paid_but_not_counted(make_campaign, researcher, mturk):
    """MTurk's listing lagging past the grace period: the worker did submit, so they are approved; the
    label stays void, since its slot may already be another worker's."""
    fake = mturk
    campaign, publication = publish(make_campaign, researcher, n_prompts=1, k=2)
    late = label_without_submitting(fake, "ALATE")
    with later(LAPSED):
        assert services.mturk_reconcile(publication_id=publication.pk).voided == 1
    with fake.lock:
        fake.assignments[late].update(status="Submitted", submit_time=fake.now(), auto_approval_time=fake.now() + 3600)
    report = services.mturk_reconcile(publication_id=publication.pk)
    assert report.approved == 1 and fake.status_of(late) == "Approved"
    assignment = MTurkAssignment.objects.get(assignment_id=late)
    assert assignment.status == MTurkAssignment.Status.APPROVED and assignment.label.voided_at is not None
    assert labels_still_needed(campaign=campaign) == 2


def test_a_submitted_assignment_is_never_voided(make_campaign, researcher, mturk):
    fake = mturk
    campaign, publication = publish(make_campaign, researcher, n_prompts=1, k=2)
    assert mturk_worker_turn(fake, "AHONEST") == "labeled"
    with later(10 * LAPSED):
        report = services.mturk_reconcile(publication_id=publication.pk)
    assert (report.approved, report.voided, report.abandoned) == (1, 0, 0)
    assert Label.objects.counted().filter(campaign=campaign).count() == 1
    assert invariant_violations(campaign=campaign) == []
