"""Personal invitation links: one link is one person.

The first browser to accept a link gets a guest account and a re-entry code; afterwards the link opens
that account only (signed in already, or with the code), so a link passed around, opened in several
browsers or on several devices never makes a second worker for the same k slots.
"""

import re
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connection
from django.test import Client, override_settings
from django.urls import reverse

from annotation import services
from annotation.models import Invitation, Label, Worker
from tests.clock import later
from tests.helpers import label_on_page

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_sign_in_throttle():
    """Wrong codes count against the sign-in throttle, whose counters live in the cache."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def invite(researcher):
    def make(campaign, note="Ada") -> Invitation:
        return services.invitations_create(campaign=campaign, created_by=researcher, notes=[note])[0]

    return make


def join_url(invitation) -> str:
    return reverse("worker_join", args=[invitation.campaign.slug, invitation.token])


def accept(client, invitation) -> str:
    """Press "Start as a guest"; returns the re-entry code shown."""
    response = client.post(join_url(invitation))
    assert response.status_code == 200 and response.context["step"] == "welcome"
    return response.context["code"]


def label_one(client, campaign) -> Label:
    """The client labels a prompt on its task page; the label stored."""
    label_on_page(client, campaign)
    return Label.objects.latest("id")


# --- the researcher's page ------------------------------------------------------------------------


def test_the_researcher_makes_one_link_per_line_and_sees_who_used_them(client, researcher, make_campaign):
    campaign = make_campaign(2)
    client.force_login(researcher)
    page_url = reverse("campaign_invitation", args=[campaign.slug])
    assert (
        reverse("campaign_invitation", args=[campaign.slug]).encode()
        in client.get(reverse("campaign_detail", args=[campaign.slug])).content
    )
    response = client.post(page_url, {"notes": "Ada Lovelace\n\n  participant 17 \n"})
    assert response.status_code == 302 and response.url == page_url
    ada, p17 = Invitation.objects.order_by("id")
    assert (ada.note, p17.note, ada.user, ada.created_by) == ("Ada Lovelace", "participant 17", None, researcher)
    assert ada.token != p17.token and len(ada.token) == 24

    page = client.get(page_url).content.decode()
    for invitation in (ada, p17):
        assert f'value="http://testserver/w/{campaign.slug}/join/{invitation.token}/"' in page
    assert page.count("Not used yet") == 2

    code = accept(Client(), ada)
    page = client.get(page_url).content.decode()
    assert f"Used by {Invitation.objects.get(pk=ada.pk).user.username}" in page and ": 0 labels" in page
    assert page.count("Not used yet") == 1 and code not in page  # the code is the guest's alone


@pytest.mark.parametrize(
    "notes, error",
    [
        ("\n \n", "This field is required."),
        ("x" * 201, "Line 1 is longer than 200 characters."),
        ("\n".join(f"p{n}" for n in range(201)), "201 lines: make at most 200 links at a time."),
    ],
)
def test_the_researcher_page_refuses_bad_notes_and_makes_nothing(client, researcher, make_campaign, notes, error):
    campaign = make_campaign(1)
    client.force_login(researcher)
    response = client.post(reverse("campaign_invitation", args=[campaign.slug]), {"notes": notes})
    assert response.status_code == 400
    assert response.context["form"].errors["notes"] == [error]
    assert not Invitation.objects.exists()


def test_the_service_checks_the_notes_again(make_campaign, researcher):
    campaign = make_campaign(1)
    for notes, code in [([], "bad_count"), (["x"] * 201, "bad_count"), (["x" * 201], "bad_note")]:
        with pytest.raises(services.ServiceError) as refused:
            services.invitations_create(campaign=campaign, created_by=researcher, notes=notes)
        assert refused.value.code == code
    assert not Invitation.objects.exists()


# --- one link, one person --------------------------------------------------------------------------


def test_the_first_browser_to_accept_gets_a_guest_account_and_a_code(make_campaign, invite):
    campaign = make_campaign(2)
    invitation = invite(campaign)
    browser = Client()
    users = get_user_model().objects.count()
    page = browser.get(join_url(invitation))
    assert page.status_code == 200 and b"Start as a guest" in page.content
    assert get_user_model().objects.count() == users  # a GET (link preview) takes nothing

    response = browser.post(join_url(invitation))
    code = response.context["code"]
    assert re.fullmatch(r"[A-HJ-NP-Z2-9]{4}-[A-HJ-NP-Z2-9]{4}", code)
    assert f'<strong class="reentry-code">{code}</strong>'.encode() in response.content
    guest = response.context["user"]
    assert guest.is_authenticated and guest.username.startswith("guest-")
    invitation.refresh_from_db()
    assert invitation.user == guest and invitation.accepted_at is not None
    assert guest.check_password(code.replace("-", "")) and code.replace("-", "") not in guest.password

    assert browser.get(join_url(invitation)).url == reverse("worker_campaign", args=[campaign.slug])
    label = label_one(browser, campaign)
    assert label.worker.user == guest


def test_a_second_browser_gets_no_account_of_its_own(make_campaign, invite):
    """The defect this design fixes: every new browser session used to make another guest worker, so one
    person could fill several of a prompt's k slots."""
    campaign = make_campaign(1, k=3)
    invitation = invite(campaign)
    first = Client()
    accept(first, invitation)
    label_one(first, campaign)
    users, workers = get_user_model().objects.count(), Worker.objects.count()

    second = Client()
    page = second.get(join_url(invitation))
    assert page.status_code == 200 and page.context["step"] == "reenter"
    assert b"Start as a guest" not in page.content
    response = second.post(join_url(invitation))  # pressing where "Start" was: only a code gets in
    assert response.status_code == 400 and not response.context["user"].is_authenticated
    assert (get_user_model().objects.count(), Worker.objects.count()) == (users, workers)
    assert second.get(reverse("worker_next", args=[campaign.slug])).url.startswith(reverse("login"))
    assert Label.objects.count() == 1


def test_the_same_person_continues_on_another_device_with_the_code(make_campaign, invite):
    campaign = make_campaign(3, k=1)
    invitation = invite(campaign)
    phone = Client()
    code = accept(phone, invitation)
    first_label = label_one(phone, campaign)

    laptop = Client()
    response = laptop.post(join_url(invitation), {"code": f" {code.lower().replace('-', ' ')} "})
    assert response.status_code == 302 and response.url == reverse("worker_campaign", args=[campaign.slug])
    page = laptop.get(response.url)
    assert page.context["user"] == first_label.worker.user
    assert page.context["outlook"].done == 1  # the same worker: their label is counted here too
    second_label = label_one(laptop, campaign)
    assert second_label.worker == first_label.worker and second_label.prompt != first_label.prompt
    assert Worker.objects.filter(user__username__startswith="guest-").count() == 1


@override_settings(CHORUS_LOGIN_FAILURES_PER_ACCOUNT=3)
def test_a_wrong_code_is_refused_and_guessing_is_throttled(make_campaign, invite):
    campaign = make_campaign(1)
    invitation = invite(campaign)
    code = accept(Client(), invitation)
    stranger = Client()
    for _ in range(3):
        response = stranger.post(join_url(invitation), {"code": "AAAA-AAAA"})
        assert response.status_code == 400
        assert response.context["form"].errors["code"] == [
            "That is not this invitation's code (after many wrong tries, wait a few minutes)."
        ]
    response = stranger.post(join_url(invitation), {"code": code})  # right, but after too many wrong tries
    assert response.status_code == 400 and not response.context["user"].is_authenticated


def test_somebody_signed_in_labels_with_their_own_account_and_leaves_the_invitation_unused(
    client, make_campaign, invite, make_user
):
    campaign = make_campaign(1)
    invitation = invite(campaign)
    client.force_login(make_user("wanda"))
    response = client.post(join_url(invitation), follow=True)
    assert response.redirect_chain[-1][0] == reverse("worker_campaign", args=[campaign.slug])
    assert any("the invitation stays unused" in str(m) for m in response.context["messages"])
    invitation.refresh_from_db()
    assert invitation.user is None
    assert Client().get(join_url(invitation)).context["step"] == "accept"  # still there for its person


def test_a_stale_acceptance_loses_to_the_first_and_leaves_no_account(make_campaign, invite):
    """Two browsers pressing "Start" at once: the conditional UPDATE lets one win; the other's
    transaction, guest account included, rolls back."""
    invitation = invite(make_campaign(1))
    stale = Invitation.objects.get(pk=invitation.pk)
    services.invitation_accept(invitation=invitation)
    users = get_user_model().objects.count()
    with pytest.raises(services.InvitationTaken):
        services.invitation_accept(invitation=stale)
    assert get_user_model().objects.count() == users


@pytest.mark.both_dbs
@pytest.mark.django_db(transaction=True)
def test_browsers_accepting_at_the_same_moment_make_one_account(make_campaign, invite):
    """Eight browsers press "Start" at once, each on its own connection: one account, seven refusals."""
    invitation = invite(make_campaign(1))
    users = get_user_model().objects.count()
    barrier = threading.Barrier(8)

    def press_start(_):
        try:
            barrier.wait()
            return services.invitation_accept(invitation=Invitation.objects.get(pk=invitation.pk)).user.pk
        except services.InvitationTaken:
            return None
        finally:
            connection.close()

    with ThreadPoolExecutor(8) as pool:
        winners = [pk for pk in pool.map(press_start, range(8)) if pk is not None]
    assert len(winners) == 1
    assert get_user_model().objects.count() == users + 1
    assert Invitation.objects.get(pk=invitation.pk).user_id == winners[0]


@pytest.mark.parametrize("problem", ["unknown", "other_campaign", "expired"])
def test_a_bad_invitation_is_refused_and_creates_nobody(client, make_campaign, invite, problem):
    campaign = make_campaign(1)
    other = make_campaign(1, title="Other")
    invitation = invite(other if problem == "other_campaign" else campaign)
    token = invitation.token[:-2] + "zz" if problem == "unknown" else invitation.token
    users_before = get_user_model().objects.count()
    with override_settings(CHORUS_INVITATION_MAX_AGE=-1 if problem == "expired" else 3600):
        response = client.post(reverse("worker_join", args=[campaign.slug, token]))
    assert response.status_code == 403
    assert b"This invitation link does not work" in response.content
    assert get_user_model().objects.count() == users_before


def test_an_accepted_invitation_keeps_working_for_its_person_after_the_expiry(make_campaign, invite, settings):
    campaign = make_campaign(1)
    invitation = invite(campaign)
    code = accept(Client(), invitation)
    with later(settings.CHORUS_INVITATION_MAX_AGE + 60):
        response = Client().post(join_url(invitation), {"code": code})
    assert response.status_code == 302 and response.url == reverse("worker_campaign", args=[campaign.slug])
