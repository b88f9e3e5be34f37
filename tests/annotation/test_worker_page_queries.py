"""Exact query counts of the native worker pages' requests (``/w/<slug>/...``), on the campaigns of
tests/api/test_worker_loop.py's count (``worker_loop_campaign``): a change that adds a query fails here."""

import pytest
from django.urls import reverse

from annotation import services
from tests.helpers import WORKER_LOOP_KINDS, CountedRequests, on_this_database, signed_in, worker_loop_campaign

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]

# Each list: next (-> 302), next again (the same lease), the task page, heartbeat, skip (-> 302), next, then
# twice: the task page and the label's POST (-> 302), which claims the next prompt and leads to its page
# (the campaign's three prompts: the second POST finds none left, and leads to next). Every request reads
# the session, then its user with the user's worker (annotation.throttling's get_user): 2. As in the API's
# count, the slot draw's random start is pinned. The counts are SQLite's: a label's POST makes 2 fewer on
# PostgreSQL (on_this_database).
WORKER_PAGE_QUERIES = {
    # next: 2 + the API's next-task without its token (5). next again: 2 + 4 (the lease with its prompt).
    # The task page: 2 + the lease with its prompt, campaign (by the URL's slug) and the worker's label
    # count, then worker_progress's one bounded count of open slots. Heartbeat: 2 + the API's without
    # the token (5). Skip: 2 + the API's release (5). The label's POST: 2 + the submit's transaction, as in the
    # API's (9: the form is read under the submit's lock on the lease, which brings the prompt its fields
    # depend on), + next's claim (5; 6 to find nothing left).
    "plain": [7, 6, 4, 7, 7, 7, 4, 16, 4, 17],
    # The control first (next 8: whether other work is left, the control drawn and locked, its lease); its
    # page counts the unseen controls too (5), its heartbeat has no slot (6). After the skip the other control
    # is still due (8), and its label fills no slot (10, + the claim of a normal prompt: 5), whose page still
    # counts unseen controls (5).
    "controls": [8, 6, 5, 6, 7, 8, 5, 15, 5, 16],
    # Each label runs the stop rule (4 more per POST: the prompt's labels, its last decision, the new one,
    # the slot added).
    "adaptive": [7, 6, 4, 7, 7, 7, 4, 20, 4, 21],
}


@pytest.mark.parametrize("kind", WORKER_LOOP_KINDS)
def test_the_worker_pages_cost_a_fixed_number_of_queries(kind, make_campaign, make_user, monkeypatch):
    monkeypatch.setattr("annotation.services.assignment.random.random", lambda: 0.0)
    user = make_user()
    campaign = worker_loop_campaign(make_campaign, kind, services.worker_for_user(user=user))
    client = signed_in(user)
    counted = CountedRequests(client)
    next_url = reverse("worker_next", args=[campaign.slug])
    task = counted("get", next_url, status=302).url
    assert counted("get", next_url, status=302).url == task
    counted("get", task)
    counted("post", task + "heartbeat/")
    counted("post", task + "skip/", status=302)
    task = counted("get", next_url, status=302).url
    for _ in range(2):
        # The second time round, the page the label's POST led to: it claimed the next prompt.
        token = counted("get", task).context["client_token"]
        task = counted("post", task, {"value": "1", "client_token": token}, status=302).url
    expected = on_this_database(WORKER_PAGE_QUERIES[kind], labels=(7, 9))
    assert counted.counts == expected, f"queries per request: {counted.counts}"
