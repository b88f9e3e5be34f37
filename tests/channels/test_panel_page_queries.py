"""Exact query counts of a panel participant's requests (``/channels/panel/<slug>/...``, what a Prolific
study URL opens), on the campaigns of tests/api/test_worker_loop.py's count (``worker_loop_campaign``):
a change that adds a query fails here."""

import pytest
from django.test import Client
from django.urls import reverse

from annotation import services
from annotation.channels import services as channels
from tests.helpers import WORKER_LOOP_KINDS, CountedRequests, on_this_database, worker_loop_campaign

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]

# Each list: the study link (-> 302), next (-> 302), next again (the same lease), the task page,
# heartbeat, skip (-> 302), next, then twice: the task page and the label's POST (-> 302), which claims the
# next prompt and leads to its page (the second finds none left, and leads to the end). The participant's
# worker exists and joined the campaign, as for every visit but their first; the slot draw's random start
# is pinned, as in the API's count. The counts are SQLite's: a label's POST makes 2 fewer on PostgreSQL
# (on_this_database).
PANEL_PAGE_QUERIES = {
    # The study link (a new browser: no session to read): the panel with its publication and campaign, the
    # worker, the panel session made (BEGIN, its read, a savepoint, INSERT, RELEASE, COMMIT), the new
    # Django session saved (whether its key is taken, then BEGIN, INSERT, COMMIT). Every later request: the
    # session, the panel
    # with its publication and campaign, the panel session with its worker (3). next: + the API's next-task
    # without its token and campaign (5). The task page: + the lease with its campaign, prompt and the
    # worker's label count, and the bounded count of open slots (2). Heartbeat and skip: + the services' (5 each).
    # The label's POST: + the submit's transaction (9: the form is read under its lock on the lease, which
    # brings the prompt) + the session's count (1) + next's claim (5; 6 to find nothing left).
    "plain": [12, 8, 7, 5, 8, 8, 8, 5, 18, 5, 19],
    # The control first: next finds it due (whether other work is left, the draw, its lease); its task
    # page counts the unseen controls too; its heartbeat and label have no slot. After the skip the other
    # control is still due.
    "controls": [12, 9, 7, 6, 7, 8, 9, 6, 17, 6, 18],
    # Each label runs the stop rule: 4 more per POST.
    "adaptive": [12, 8, 7, 5, 8, 8, 8, 5, 22, 5, 23],
}


@pytest.mark.parametrize("kind", WORKER_LOOP_KINDS)
def test_the_panel_pages_cost_a_fixed_number_of_queries(kind, make_campaign, researcher, monkeypatch):
    monkeypatch.setattr("annotation.services.assignment.random.random", lambda: 0.0)
    worker = services.worker_get_or_create(channel="prolific", external_id="PARTICIPANT")
    campaign = worker_loop_campaign(make_campaign, kind, worker)
    panel = channels.publication_create_panel(campaign=campaign, user=researcher, completion_code="C0DE").panel
    assert panel.publication.worker_channel == "prolific"  # the worker above is the participant's
    counted = CountedRequests(Client())
    link = f"/channels/panel/{panel.slug}/"
    counted("get", link, {"PROLIFIC_PID": "PARTICIPANT", "STUDY_ID": "S1", "SESSION_ID": "X1"}, status=302)
    next_url = reverse("channels:panel_next", args=[panel.slug])
    task = counted("get", next_url, status=302).url
    assert counted("get", next_url, status=302).url == task
    counted("get", task)
    lease_id = int(task.rstrip("/").rsplit("/", 1)[-1])
    counted("post", reverse("channels:panel_heartbeat", args=[panel.slug, lease_id]))
    counted("post", reverse("channels:panel_skip", args=[panel.slug, lease_id]), status=302)
    task = counted("get", next_url, status=302).url
    for _ in range(2):
        # The second time round, the page the label's POST led to: it claimed the next prompt.
        token = counted("get", task).context["client_token"]
        task = counted("post", task, {"value": "1", "client_token": token}, status=302).url
    expected = on_this_database(PANEL_PAGE_QUERIES[kind], labels=(8, 10))
    assert counted.counts == expected, f"queries per request: {counted.counts}"
