"""The task page's progress line: "12 labeled · about 40 left for you"."""

import re

import pytest
from django.test import Client
from django.urls import reverse

from annotation import selectors, services
from annotation.channels import services as channel_services
from tests.helpers import label_on_page, signed_in

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]


def progress_line(page) -> str:
    """The line's text, tags left out."""
    html = re.search(r'<span class="task-count">(.*?)</span>\s*</div>', page.content.decode(), re.S).group(1)
    return " ".join(re.sub(r"<[^>]+>", "", html).split())


def open_task(client, campaign):
    return client.get(client.get(reverse("worker_next", args=[campaign.slug])).url)


@pytest.fixture
def new_worker(make_worker):
    """A new worker's signed-in test client: ``new_worker()``."""
    return lambda: signed_in(make_worker().user)


def test_labeled_and_left_count_the_prompt_on_screen_and_not_the_skipped_or_full_ones(make_campaign, new_worker):
    campaign = make_campaign(6, k=1)
    me, other = new_worker(), new_worker()
    assert progress_line(open_task(me, campaign)) == "0 labeled · about 6 left for you"
    label_on_page(me, campaign)
    label_on_page(me, campaign)
    label_on_page(other, campaign)  # a prompt full without me: not left for me
    page = open_task(me, campaign)
    skipped = page.context["lease"]
    me.post(reverse("worker_skip", args=[campaign.slug, skipped.pk]))  # skipped: never mine again
    assert progress_line(open_task(me, campaign)) == "2 labeled · about 2 left for you"


def test_left_stops_at_the_cap_per_worker(make_campaign, new_worker):
    campaign = make_campaign(10, k=2, max_labels_per_worker=3)
    me = new_worker()
    assert progress_line(open_task(me, campaign)) == "0 labeled · about 3 left for you"
    label_on_page(me, campaign)
    assert progress_line(open_task(me, campaign)) == "1 labeled · about 2 left for you"
    label_on_page(me, campaign)
    assert progress_line(open_task(me, campaign)) == "2 labeled · about 1 left for you"


def test_left_stops_at_a_panels_quota(make_campaign, researcher):
    campaign = make_campaign(10, k=1)
    panel = channel_services.publication_create_panel(
        campaign=campaign, user=researcher, completion_code="C0DE", quota_per_session=4
    ).panel
    client = Client()
    response = client.get(f"/channels/panel/{panel.slug}/", {"PROLIFIC_PID": "P1", "STUDY_ID": "S", "SESSION_ID": "X"})
    page = client.get(client.get(response["Location"])["Location"])
    assert progress_line(page) == "0 labeled · about 4 left for you"


def test_a_large_campaign_is_counted_only_up_to_a_bound(
    make_campaign, make_worker, monkeypatch, django_assert_num_queries
):
    monkeypatch.setattr("annotation.selectors.workers.PROMPTS_LEFT_COUNTED", 4)
    campaign = make_campaign(9, k=3)
    worker = make_worker()
    services.lease_acquire(campaign=campaign, worker=worker)
    with django_assert_num_queries(2):  # the worker's label count, one bounded count of open slots
        progress = selectors.worker_progress(campaign=campaign, worker=worker)
    assert (progress.labeled, progress.left, progress.more) == (0, 4, True)
    capped = make_campaign(9, k=3, max_labels_per_worker=4, title="Capped")
    services.lease_acquire(campaign=capped, worker=worker)
    assert selectors.worker_progress(campaign=capped, worker=worker).more is False  # 4 is all the cap allows


def test_at_least_is_shown_when_the_count_stopped(make_campaign, new_worker, monkeypatch):
    monkeypatch.setattr("annotation.selectors.workers.PROMPTS_LEFT_COUNTED", 3)
    campaign = make_campaign(5, k=1)
    assert progress_line(open_task(new_worker(), campaign)) == "0 labeled · at least 3 left for you"
