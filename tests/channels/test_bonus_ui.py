"""The "Bonus a worker" form of the MTurk publication page, against the fake MTurk: the page only writes
the bonus, reconciliation pays it, and a repeated grant (a double click) is paid once."""

from decimal import Decimal

import pytest
from django.utils import timezone

from annotation.channels import selectors, services
from annotation.channels.models import MTurkAssignment, MTurkBonus, Publication
from tests.channels.workers import OPTIONS, mturk_worker_turn, open_task

pytestmark = pytest.mark.django_db

GRANT = {"worker": "AWORKER1", "amount": "0.75", "reason": "Thanks for careful work"}


@pytest.fixture
def worked(make_campaign, researcher, mturk):
    """A publication in which AWORKER1 and AWORKER2 each labeled and submitted one assignment (approved
    by reconciliation), and AOPENER opened one in Chorus without submitting it."""
    campaign = make_campaign(4, k=2)
    publication = services.publication_create_mturk(campaign=campaign, user=researcher, options=OPTIONS)
    services.publication_publish(publication_id=publication.pk)
    for worker_id in ("AWORKER1", "AWORKER2"):
        assert mturk_worker_turn(mturk, worker_id) == "labeled"
    opened = mturk.accept(mturk.visible_hits("AOPENER")[0], "AOPENER")
    assert open_task(mturk, opened).status_code == 200
    assert services.mturk_reconcile(publication_id=publication.pk).approved == 2
    assert MTurkAssignment.objects.get(worker__external_id="AOPENER").status == MTurkAssignment.Status.ACCEPTED
    return publication


def page_url(publication):
    return f"/channels/publications/{publication.pk}/"


def grant(client, publication, **data):
    return client.post(f"/channels/publications/{publication.pk}/bonuses/", data)


def test_grant_on_the_page_then_reconciliation_pays_it_once(client, researcher, worked, mturk):
    client.force_login(researcher)
    page = client.get(page_url(worked))
    body = page.content.decode()
    assert page.status_code == 200 and "Bonus a worker" in body and "No bonus granted yet." in body
    assert page.context["bonus_workers"] == ["AWORKER1", "AWORKER2"]  # not AOPENER: nothing submitted
    assert '<option value="AWORKER1">' in body and "AOPENER" not in body

    response = grant(client, worked, **GRANT)
    assert response.status_code == 302 and response["Location"] == page_url(worked) + "#bonuses"
    bonus = MTurkBonus.objects.get()
    assignment = MTurkAssignment.objects.get(worker__external_id="AWORKER1")
    assert (bonus.assignment, bonus.amount, bonus.reason, bonus.status) == (
        assignment,
        Decimal("0.75"),
        GRANT["reason"],
        "pending",
    )
    assert bonus.created_by == researcher
    assert mturk.attempts["SendBonus"] == 0  # the web request sends nothing to MTurk
    pending = client.get(page_url(worked)).content.decode()
    assert 'class="bonus bonus-pending"' in pending and "Pending: paid at the next reconciliation" in pending
    assert "$0.75" in pending and "Thanks for careful work" in pending

    report = services.mturk_reconcile(publication_id=worked.pk)
    assert report.errors == [] and report.bonuses_paid == 1
    assert mturk.bonuses == [
        {
            "WorkerId": "AWORKER1",
            "BonusAmount": "0.75",
            "AssignmentId": assignment.assignment_id,
            "Reason": f"Thanks for careful work (ref {bonus.token})",
            "GrantTime": mturk.bonuses[0]["GrantTime"],
            "token": bonus.token,
        }
    ]
    bonus.refresh_from_db()
    assert bonus.status == "sent" and bonus.sent_at is not None
    paid = client.get(page_url(worked)).content.decode()
    assert 'class="bonus bonus-sent"' in paid and "Paid " in paid
    assert services.mturk_reconcile(publication_id=worked.pk).bonuses_paid == 0
    assert mturk.attempts["SendBonus"] == 1 and len(mturk.bonuses) == 1


def test_a_double_post_pays_once(client, researcher, worked, mturk):
    client.force_login(researcher)
    first, second = grant(client, worked, **GRANT), grant(client, worked, **GRANT)
    assert first.status_code == second.status_code == 302
    bonus = MTurkBonus.objects.get()  # one row, so one token
    notice = client.get(second["Location"]).content.decode()
    assert "already granted" in notice and "it is paid once" in notice
    # MTurk pays, but its answer is lost: botocore retries with the same token, which MTurk refuses and
    # the backend reads back as already paid.
    mturk.inject("SendBonus", "lost_response")
    assert services.mturk_reconcile(publication_id=worked.pk).errors == []
    assert services.mturk_reconcile(publication_id=worked.pk).errors == []
    assert mturk.attempts["SendBonus"] == 2 and len(mturk.bonuses) == 1
    assert mturk.bonuses[0]["token"] == bonus.token and mturk.bonuses[0]["BonusAmount"] == "0.75"
    # Granting it again once it is paid is refused too (the worker id in another case as well).
    assert grant(client, worked, **{**GRANT, "worker": "aworker1"}).status_code == 302
    assert MTurkBonus.objects.count() == 1
    services.mturk_reconcile(publication_id=worked.pk)
    assert len(mturk.bonuses) == 1


def test_another_reason_or_worker_is_another_bonus(client, researcher, worked, mturk):
    client.force_login(researcher)
    grant(client, worked, **GRANT)
    grant(client, worked, **{**GRANT, "reason": "A second batch of careful work"})
    grant(client, worked, **{**GRANT, "worker": "AWORKER2"})
    assert MTurkBonus.objects.count() == 3
    assert services.mturk_reconcile(publication_id=worked.pk).bonuses_paid == 3
    assert sorted(b["WorkerId"] for b in mturk.bonuses) == ["AWORKER1", "AWORKER1", "AWORKER2"]
    assert len({b["token"] for b in mturk.bonuses}) == 3


@pytest.mark.parametrize(
    "change, field, message",
    [
        ({"amount": "0"}, "amount", "greater than or equal to 0.01"),
        ({"amount": "-1"}, "amount", "greater than or equal to 0.01"),
        ({"amount": "100.01"}, "amount", "less than or equal to 100"),
        ({"amount": "0.125"}, "amount", "no more than 2 decimal places"),
        ({"amount": "ten"}, "amount", "Enter a number"),
        ({"amount": ""}, "amount", "required"),
        ({"reason": ""}, "reason", "required"),
        ({"reason": "   "}, "reason", "required"),
        ({"reason": "x" * 901}, "reason", "at most 900 characters"),
        ({"worker": ""}, "worker", "required"),
        ({"worker": "A1; DROP"}, "worker", "only letters and digits"),
        ({"worker": "ANOBODY"}, "worker", "ANOBODY has no submitted or approved assignment"),
        ({"worker": "AOPENER"}, "worker", "AOPENER has no submitted or approved assignment"),
    ],
)
def test_bad_input_is_a_form_error_and_nothing_is_recorded(client, researcher, worked, mturk, change, field, message):
    client.force_login(researcher)
    response = grant(client, worked, **{**GRANT, **change})
    assert response.status_code == 400
    errors = response.context["bonus_form"].errors
    assert list(errors) == [field] and message in " ".join(errors[field]), errors
    assert message.encode() in response.content  # the page shows it
    assert MTurkBonus.objects.count() == 0
    services.mturk_reconcile(publication_id=worked.pk)
    assert mturk.attempts["SendBonus"] == 0 and mturk.bonuses == []


def test_only_the_owner_and_staff_may_grant(client, make_user, researcher, worked, mturk):
    collaborator, stranger = make_user("collaborator"), make_user("stranger")
    worked.campaign.collaborators.add(collaborator)
    client.force_login(collaborator)
    page = client.get(page_url(worked))
    assert page.status_code == 200 and "bonus_form" not in page.context  # sees the bonuses, not the form
    assert "Only the campaign's owner can grant bonuses." in page.content.decode()
    assert grant(client, worked, **GRANT).status_code == 403
    client.force_login(stranger)
    assert grant(client, worked, **GRANT).status_code == 404
    client.logout()
    anonymous = grant(client, worked, **GRANT)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/")
    assert MTurkBonus.objects.count() == 0

    staff = make_user("staff", is_staff=True)
    client.force_login(staff)
    assert grant(client, worked, **GRANT).status_code == 302
    assert MTurkBonus.objects.get().created_by == staff
    client.force_login(researcher)
    assert client.get(f"/channels/publications/{worked.pk}/bonuses/").status_code == 405
    services.mturk_reconcile(publication_id=worked.pk)
    assert len(mturk.bonuses) == 1


def test_a_panel_publication_has_no_bonuses(client, researcher, make_campaign, locmem_channel):
    panel = services.publication_create_panel(campaign=make_campaign(2), user=researcher, completion_code="DONE")
    client.force_login(researcher)
    assert grant(client, panel, **GRANT).status_code == 404
    assert MTurkBonus.objects.count() == 0


def test_a_bonus_reopens_a_closed_publication_so_that_it_is_paid(client, researcher, worked, mturk):
    # Closed publications are no longer reconciled; a pending bonus keeps one open.
    Publication.objects.filter(pk=worked.pk).update(closed_at=timezone.now())
    assert worked.pk not in set(selectors.publications_to_reconcile().values_list("pk", flat=True))
    client.force_login(researcher)
    assert grant(client, worked, **GRANT).status_code == 302
    assert worked.pk in set(selectors.publications_to_reconcile().values_list("pk", flat=True))
    assert services.mturk_reconcile(publication_id=worked.pk).bonuses_paid == 1
    assert len(mturk.bonuses) == 1
