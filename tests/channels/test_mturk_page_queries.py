"""Exact query counts of an MTurk worker's requests (Chorus's task page in MTurk's frame and its label's
POST), on the campaigns of tests/api/test_worker_loop.py's count (``worker_loop_campaign``): a change
that adds a query fails here. MTurk takes no new requesters, but old accounts still run HITs."""

import pytest

from annotation import services
from annotation.channels import services as channels
from tests.channels.workers import OPTIONS, fresh_client, label_form_action
from tests.helpers import WORKER_LOOP_KINDS, CountedRequests, on_this_database, worker_loop_campaign

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]

# Each list: the task page of a first assignment, the same page reloaded (the same lease), its label's POST
# (-> the page that submits the assignment to MTurk), then a second assignment's task page and label. The
# worker exists and joined the campaign, as for every assignment but their first; the slot draw's random
# start is pinned, as in the API's count. The counts are SQLite's: a label's POST makes 2 fewer on
# PostgreSQL (on_this_database).
MTURK_PAGE_QUERIES = {
    # The task page: the publication, the HIT, the worker, the assignment recorded (its transaction: 6 the
    # first time, with get_or_create's savepoint and INSERT; 3 when it reopens), whether it has a label, the
    # lease (next-task's transaction: 5; 4 for the same lease again), the page's count of open slots (the
    # worker's label count comes with the lease). The label's POST: the assignment with its HIT,
    # publication and worker, whether it has a label, the submit's transaction (9: the form is read under its
    # lock on the lease), the assignment marked labeled (3), its label for the page that submits the assignment.
    "plain": [16, 12, 15, 16, 15],
    # A control first: next-task finds it due (whether other work is left, the draw, its lease: 6); the page
    # counts the unseen controls too (+1 on every page); its label has no slot (-1).
    "controls": [18, 13, 14, 17, 15],
    # Each label runs the stop rule: 4 more per POST.
    "adaptive": [16, 12, 19, 16, 19],
}


@pytest.mark.parametrize("kind", WORKER_LOOP_KINDS)
def test_the_mturk_pages_cost_a_fixed_number_of_queries(kind, make_campaign, researcher, mturk, monkeypatch):
    monkeypatch.setattr("annotation.services.assignment.random.random", lambda: 0.0)
    worker = services.worker_get_or_create(channel="mturk_sandbox", external_id="AWQUERIES")
    campaign = worker_loop_campaign(make_campaign, kind, worker)
    publication = channels.publication_create_mturk(campaign=campaign, user=researcher, options=OPTIONS)
    channels.publication_publish(publication_id=publication.pk)
    publication.refresh_from_db()
    assert publication.worker_channel == worker.channel  # the worker above is the one MTurk sends
    counted = CountedRequests(new_client=fresh_client)  # no cookie in MTurk's frame

    for n in range(2):
        assignment = mturk.accept(mturk.visible_hits("AWQUERIES")[0], "AWQUERIES")
        page = counted("get", mturk.task_path(assignment))
        if n == 0:
            page = counted("get", mturk.task_path(assignment))
        done = counted("post", label_form_action(page), {"value": "1", "client_token": "ignored"})
        assert b"mturk-submit-form" in done.content
    expected = on_this_database(MTURK_PAGE_QUERIES[kind], labels=(2, 4))
    assert counted.counts == expected, f"queries per request: {counted.counts}"
