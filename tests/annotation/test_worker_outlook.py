"""The campaign's front page says before sign-up whether there is work: full, busy, paused or closed,
and for a signed-in worker their cap or "everything done", instead of a "Start labeling" button that
leads to "nothing left" (``selectors.worker_outlook``)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation import selectors, services
from tests.helpers import label_one, signed_in

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]


def front_page(campaign, user=None):
    return signed_in(user).get(reverse("worker_campaign", args=[campaign.slug]))


def main_part(response) -> str:
    """The page without its header (whose "Sign up" link is always there)."""
    body = response.content.decode()
    return body[body.index('<main class="main">') :]


def test_an_open_campaign_invites_to_sign_up(make_campaign):
    page = front_page(make_campaign(2, k=1))
    assert page.context["outlook"].code == "open"
    assert ">Sign up</a>" in main_part(page) and "outlook" not in main_part(page)


def test_a_full_campaign_says_so_before_anybody_signs_up(make_campaign, make_worker):
    campaign = make_campaign(2, k=1)
    worker = make_worker()
    label_one(campaign, worker)
    label_one(campaign, worker)
    page = front_page(campaign)
    section = main_part(page)
    assert page.context["outlook"].code == "full"
    assert "This campaign is full: every prompt has all the labels it needs." in section
    assert "Sign up" not in section and "Start labeling" not in section


def test_slots_all_leased_to_others_say_come_back_later(make_campaign, make_worker, make_user):
    campaign = make_campaign(1, k=2)
    for _ in range(2):
        services.lease_acquire(campaign=campaign, worker=make_worker())
    for page in (front_page(campaign), front_page(campaign, make_user("newcomer"))):
        assert page.context["outlook"].code == "busy"
        assert "being labeled by somebody right now" in main_part(page)
        assert "Start labeling" not in main_part(page) and "Sign up" not in main_part(page)


@pytest.mark.parametrize(
    "action, message",
    [
        ("pause", "This campaign is paused: there is nothing to label right now."),
        ("close", "This campaign is closed: it takes no more labels."),
    ],
)
def test_a_paused_or_closed_campaign_says_so(make_campaign, make_user, action, message):
    campaign = services.campaign_transition(campaign=make_campaign(2), action=action)
    for page in (front_page(campaign), front_page(campaign, make_user())):
        assert message in main_part(page)
        assert "Sign up" not in main_part(page) and "Start labeling" not in main_part(page)


def test_a_worker_at_their_cap_is_told_before_asking(make_campaign, make_user):
    campaign = make_campaign(5, k=1, max_labels_per_worker=2)
    user = make_user("capped")
    worker = services.worker_for_user(user=user)
    label_one(campaign, worker)
    assert "Continue labeling" in main_part(front_page(campaign, user))
    label_one(campaign, worker)
    page = front_page(campaign, user)
    assert page.context["outlook"].code == "cap_reached"
    assert "You have given the 2 labels this campaign allows per worker." in main_part(page)
    assert "Continue labeling" not in main_part(page)
    assert front_page(campaign, make_user()).context["outlook"].code == "open"  # others still may


def test_a_worker_who_labeled_everything_open_to_them_is_told(make_campaign, make_user):
    campaign = make_campaign(2, k=2)
    user = make_user("thorough")
    worker = services.worker_for_user(user=user)
    label_one(campaign, worker)
    label_one(campaign, worker)
    page = front_page(campaign, user)
    assert page.context["outlook"].code == "nothing_left" and page.context["outlook"].done == 2
    assert "You have labeled everything this campaign has for you." in main_part(page)
    assert front_page(campaign).context["outlook"].code == "open"  # the other slot is open to others


def test_a_worker_holding_the_last_prompt_may_continue(make_campaign, make_user):
    campaign = make_campaign(1, k=1)
    user = make_user("holder")
    services.lease_acquire(campaign=campaign, worker=services.worker_for_user(user=user))
    assert front_page(campaign, user).context["outlook"].code == "open"
    assert "Start labeling" in main_part(front_page(campaign, user))
    assert front_page(campaign).context["outlook"].code == "busy"


def test_the_outlook_costs_the_same_for_any_number_of_prompts(make_campaign, make_worker):
    """A few indexed EXISTS queries: no count or loop over the prompts."""
    queries = []
    for n_prompts in (2, 40):
        campaign = make_campaign(n_prompts, k=1, title=f"Size {n_prompts}")
        worker = make_worker()
        for _ in range(n_prompts):
            label_one(campaign, worker)  # everything done: the longest path through the outlook
        with CaptureQueriesContext(connection) as captured:
            assert selectors.worker_outlook(campaign=campaign, worker=worker).code == "full"
        queries.append(len(captured))
    assert queries[0] == queries[1] <= 5
