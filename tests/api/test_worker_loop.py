"""The worker-loop API: next task, heartbeat, submit, release, and the error shape around them."""

from datetime import timedelta
from unittest import mock

import pytest
from django.db import OperationalError
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework.test import APIClient

from annotation import services
from annotation.models import Label, Lease, Participation
from annotation.models.prompts import MAX_OPTIONS
from annotation.selectors import invariant_violations
from tests.helpers import (
    WORKER_LOOP_KINDS,
    CountedRequests,
    assert_error,
    jsonl,
    on_this_database,
    worker_loop_campaign,
)

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]


def next_task(client, campaign):
    return client.post(f"/api/v1/campaigns/{campaign.slug}/next-task/")


def submit(client, lease_id, value=1, token="tok"):
    return client.post(f"/api/v1/leases/{lease_id}/submit/", {"value": value, "client_token": token}, format="json")


def test_token_from_username_and_password_signs_api_calls(make_user, make_campaign, api):
    campaign = make_campaign(2)
    make_user("alice")
    response = api().post("/api/v1/auth/token/", {"username": "alice", "password": "pw-for-tests-123"}, format="json")
    assert response.status_code == 200
    client = api()
    client.credentials(HTTP_AUTHORIZATION=f"Token {response.json()['token']}")
    assert next_task(client, campaign).json()["lease"]["prompt"]["id"].startswith("p")


def test_a_wrong_password_gets_no_token(make_user, api):
    make_user("alice")
    response = api().post("/api/v1/auth/token/", {"username": "alice", "password": "wrong"}, format="json")
    assert_error(response, 400, "bad_credentials")


def test_next_task_leases_one_prompt_without_its_gold(make_campaign, make_user, api):
    campaign, user = make_campaign(3), make_user()
    client = api(user)
    body = next_task(client, campaign).json()
    lease = Lease.objects.get(pk=body["lease"]["id"])
    assert body == {
        "lease": {
            "id": lease.pk,
            "expires_at": body["lease"]["expires_at"],
            "prompt": {"id": lease.prompt.external_id, "text": lease.prompt.text, "options": []},
        },
        "worker_labels": 0,
    }
    assert parse_datetime(body["lease"]["expires_at"]) == lease.expires_at
    assert lease.worker.user == user
    assert next_task(client, campaign).json()["lease"]["id"] == lease.pk  # a reload keeps the lease


def test_submit_acknowledges_once_and_a_retry_is_a_duplicate(make_campaign, make_user, api):
    campaign, client = make_campaign(3), api(make_user())
    lease_id = next_task(client, campaign).json()["lease"]["id"]
    first = submit(client, lease_id, value=1, token="t-1")
    assert first.status_code == 201
    ack = first.json()
    label = Label.objects.get()
    assert ack == {
        "label_id": label.pk,
        "prompt_id": label.prompt_id,
        "created_at": ack["created_at"],
        "worker_labels": 1,
        "duplicate": False,
    }
    again = submit(client, lease_id, value=1, token="t-1")
    assert again.status_code == 200
    assert again.json() == {**ack, "duplicate": True}
    assert_error(submit(client, lease_id, value=0, token="t-2"), 409, "already_labeled")
    assert Label.objects.count() == 1
    assert next_task(client, campaign).json()["worker_labels"] == 1


def test_heartbeat_extends_the_lease(make_campaign, make_user, api):
    campaign, client = make_campaign(1, lease_seconds=60), api(make_user())
    lease = next_task(client, campaign).json()["lease"]
    later = timezone.now() + timedelta(seconds=30)
    with mock.patch("django.utils.timezone.now", return_value=later):
        response = client.post(f"/api/v1/leases/{lease['id']}/heartbeat/")
    assert response.status_code == 200
    assert parse_datetime(response.json()["expires_at"]) == later + timedelta(seconds=60)
    assert Lease.objects.get(pk=lease["id"]).expires_at == later + timedelta(seconds=60)


def test_an_expired_lease_cannot_be_kept_alive_or_labeled(make_campaign, make_user, api):
    campaign, client = make_campaign(1, lease_seconds=60), api(make_user())
    lease_id = next_task(client, campaign).json()["lease"]["id"]
    with mock.patch("django.utils.timezone.now", return_value=timezone.now() + timedelta(seconds=61)):
        assert_error(client.post(f"/api/v1/leases/{lease_id}/heartbeat/"), 409, "lease_ended")
        assert_error(submit(client, lease_id), 409, "lease_expired")
    assert Label.objects.count() == 0


def test_release_gives_the_prompt_back(make_campaign, make_user, api):
    campaign, client = make_campaign(1, k=1), api(make_user())
    lease_id = next_task(client, campaign).json()["lease"]["id"]
    other = api(make_user())
    assert next_task(other, campaign).json()["code"] == "nothing_left"
    response = client.post(f"/api/v1/leases/{lease_id}/release/")
    assert response.status_code == 204 and response.content == b""
    assert Lease.objects.get(pk=lease_id).status == Lease.Status.RELEASED
    assert next_task(other, campaign).json()["lease"] is not None
    assert_error(submit(client, lease_id), 409, "lease_released")


def test_nothing_left_says_why(make_campaign, make_user, api):
    campaign, client = make_campaign(1, k=1), api(make_user())
    lease_id = next_task(client, campaign).json()["lease"]["id"]
    assert submit(client, lease_id).status_code == 201
    body = next_task(client, campaign).json()
    assert body["lease"] is None and body["code"] == "nothing_left" and "nothing left" in body["message"]
    services.campaign_transition(campaign=campaign, action="pause")
    body = next_task(api(make_user()), campaign).json()
    assert body == {"lease": None, "code": "campaign_paused", "message": "This campaign is paused."}


def test_another_workers_lease_does_not_exist_for_you(make_campaign, make_user, api):
    campaign, owner = make_campaign(2), api(make_user())
    lease_id = next_task(owner, campaign).json()["lease"]["id"]
    intruder = api(make_user())
    for action in ("heartbeat", "submit", "release"):
        response = intruder.post(
            f"/api/v1/leases/{lease_id}/{action}/", {"value": 1, "client_token": "x"}, format="json"
        )
        assert_error(response, 404, "not_found")
    assert_error(intruder.post("/api/v1/leases/999999/heartbeat/"), 404, "not_found")
    assert Lease.objects.get(pk=lease_id).status == Lease.Status.ACTIVE
    assert Label.objects.count() == 0


# Exact query counts of each request of the worker loop through the API, signed with a token as a program
# is: a change that adds one fails here. Each list: a new lease, the same lease again (a retry), heartbeat,
# release, a new lease, submit, a new lease, submit. Every request reads the token with its user and the
# user's worker (annotation.api.authentication): 1. Transactions count BEGIN and COMMIT (under the test's own
# transaction: a SAVEPOINT and its RELEASE). The slot draw's random start is pinned (the first try finds a
# slot). The audit run a label schedules on commit is not counted (the test's transaction never commits;
# its debounce is one Redis command in production).
WORKER_LOOP_QUERIES = {
    # A new lease: 1 + BEGIN, the Participation row locked with the campaign found by the URL's slug (read after the
    # lock: a pause that committed meanwhile is seen) and whether the worker holds a live lease, the claim (INSERT the
    # lease of an open slot it picks and locks: INSERT ... SELECT), the conditional UPDATE of the slot returning it
    # with its prompt (no savepoint), COMMIT: 4 statements and the transaction's two. The same lease again: 1 + 3 +
    # the lease with its prompt. Heartbeat: 1 + BEGIN, the lease locked with its campaign and prompt, the slot's
    # expiry, the lease's, COMMIT. Release: 1 + BEGIN, the lease locked, its status, the slot freed, COMMIT. Submit:
    # 1 + BEGIN, the lease locked with its campaign, prompt and label's client token, the Participation count (UPDATE
    # ... RETURNING), the prompt's count, the prompt's open slots (the lease's filled, the others' priority raised:
    # one UPDATE ... RETURNING), INSERT the label, the lease's status, the label's mark for the live audit's fold
    # (INSERT a PendingLabel), COMMIT: 8 statements and two; on PostgreSQL the last three are one (6 and two:
    # on_this_database).
    "plain": [6, 5, 6, 6, 6, 10, 6, 10],
    # The first label is on a control (control_first): instead of a slot, whether other work is left (one
    # EXISTS), the control drawn and locked, INSERT its lease (7); its heartbeat has no slot to update (5).
    # After the release the other control is still due (no label yet: 7), and its label fills no slot (9).
    # Then a normal prompt, as on a plain campaign: a control is not due.
    "controls": [7, 5, 5, 6, 7, 9, 6, 10],
    # Each label fills its prompt's last open slot: the stop rule reads the prompt's labels and its last
    # decision, logs the new one and adds a slot (the prompt gets one label more): 4 more per submit.
    "adaptive": [6, 5, 6, 6, 6, 14, 6, 14],
}


@pytest.mark.parametrize("kind", WORKER_LOOP_KINDS)
def test_the_worker_loop_costs_a_fixed_number_of_queries(kind, make_campaign, make_user, monkeypatch):
    monkeypatch.setattr("annotation.services.assignment.random.random", lambda: 0.0)
    user = make_user()
    campaign = worker_loop_campaign(make_campaign, kind, services.worker_for_user(user=user))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {services.api_token_get_or_create(user=user).key}")
    request = CountedRequests(client, format="json")

    def counted(path, body=None, status=200):
        response = request("post", path, body, status)
        return response.json() if response.content else None

    first = counted(f"/api/v1/campaigns/{campaign.slug}/next-task/")["lease"]
    assert counted(f"/api/v1/campaigns/{campaign.slug}/next-task/")["lease"]["id"] == first["id"]
    counted(f"/api/v1/leases/{first['id']}/heartbeat/")
    counted(f"/api/v1/leases/{first['id']}/release/", status=204)
    for n in range(2):
        lease = counted(f"/api/v1/campaigns/{campaign.slug}/next-task/")["lease"]
        counted(f"/api/v1/leases/{lease['id']}/submit/", {"value": 1, "client_token": f"t{n}"}, status=201)
    expected = on_this_database(WORKER_LOOP_QUERIES[kind], labels=(5, 7))
    assert request.counts == expected, f"queries per request: {request.counts}"


def test_a_submit_answers_next_task_only_when_asked(make_campaign, make_user, api):
    campaign = make_campaign(2)
    client = api(make_user())
    first = next_task(client, campaign).json()["lease"]
    plain = submit(client, first["id"], token="t-1").json()
    assert "next_task" not in plain  # as before, without next

    second = next_task(client, campaign).json()["lease"]
    body = {"value": 0, "client_token": "t-2", "next": True}
    answered = client.post(f"/api/v1/leases/{second['id']}/submit/", body, format="json")
    assert answered.status_code == 201
    # Two prompts, k = 1 each (make_campaign's default k): after two labels, nothing is left.
    assert answered.json()["next_task"] == {
        "lease": None,
        "code": "nothing_left",
        "message": next_task(client, campaign).json()["message"],
    }
    assert answered.json()["worker_labels"] == 2 and Label.objects.filter(worker__user__isnull=False).count() == 2


def test_a_submit_with_next_leases_the_next_prompt_once(make_campaign, make_user, api):
    campaign = make_campaign(3)
    client = api(make_user())
    lease = next_task(client, campaign).json()["lease"]
    body = {"value": 1, "client_token": "t-1", "next": True}
    answered = client.post(f"/api/v1/leases/{lease['id']}/submit/", body, format="json").json()
    following = answered["next_task"]["lease"]
    held = Lease.objects.get(pk=following["id"])
    assert held.status == Lease.Status.ACTIVE and held.pk != lease["id"]
    assert following["prompt"]["id"] == held.prompt.external_id and answered["next_task"]["worker_labels"] == 1
    # A retry (the answer was lost) is the same label and the same next prompt; next-task agrees.
    again = client.post(f"/api/v1/leases/{lease['id']}/submit/", body, format="json")
    assert again.status_code == 200 and again.json()["duplicate"] is True
    assert again.json()["next_task"]["lease"]["id"] == held.pk == next_task(client, campaign).json()["lease"]["id"]
    assert Lease.objects.filter(status=Lease.Status.ACTIVE).count() == 1 and Label.objects.count() == 1

    claim = mock.Mock(side_effect=AssertionError("a refused label must not claim"))
    with mock.patch("annotation.api.worker_loop.services.lease_acquire_after_label", claim):
        refused = client.post(
            f"/api/v1/leases/{held.pk}/submit/", {**body, "client_token": "t-2", "value": 7}, format="json"
        )
    assert_error(refused, 409, "bad_value")
    assert not claim.called  # a refused label claims nothing
    assert list(Lease.objects.filter(status=Lease.Status.ACTIVE).values_list("pk", flat=True)) == [held.pk]


def test_a_saved_label_whose_next_claim_fails_says_so(make_campaign, make_user, api, monkeypatch):
    campaign = make_campaign(3)
    client = api(make_user())
    lease = next_task(client, campaign).json()["lease"]

    def busy(*args):  # inside the claim's transaction
        raise OperationalError("database is locked")

    with monkeypatch.context() as patched:
        patched.setattr("annotation.services.assignment._lease_under_lock", busy)
        body = {"value": 1, "client_token": "t-1", "next": True}
        answered = client.post(f"/api/v1/leases/{lease['id']}/submit/", body, format="json")
    assert answered.status_code == 201
    assert answered.json()["next_task"]["lease"] is None and answered.json()["next_task"]["code"] == "next_task_failed"
    assert Label.objects.get().pk == answered.json()["label_id"]  # the label stands
    assert next_task(client, campaign).json()["lease"]["id"] != lease["id"]  # and next-task serves on


def test_a_submit_with_next_costs_the_submit_and_the_claim_with_one_token_read(make_campaign, make_user, monkeypatch):
    monkeypatch.setattr("annotation.services.assignment.random.random", lambda: 0.0)  # as in the count above
    user = make_user()
    campaign = make_campaign(3)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {services.api_token_get_or_create(user=user).key}")
    lease = next_task(client, campaign).json()["lease"]  # the worker's first request: not counted
    counted = CountedRequests(client, format="json")
    body = {"value": 1, "client_token": "t-1", "next": True}
    assert counted("post", f"/api/v1/leases/{lease['id']}/submit/", body, status=201).json()["next_task"]["lease"]
    # The submit's (WORKER_LOOP_QUERIES: 10) and a new lease's (6), but one token read: 15 (13 on PostgreSQL).
    assert counted.counts == on_this_database([15], labels=(0,))


def test_errors_have_one_shape(make_campaign, make_user, api):
    campaign, client = make_campaign(2), api(make_user())
    assert_error(api().post(f"/api/v1/campaigns/{campaign.slug}/next-task/"), 401, "not_authenticated")
    assert_error(client.post("/api/v1/campaigns/no-such-campaign/next-task/"), 404, "not_found")
    lease_id = next_task(client, campaign).json()["lease"]["id"]
    missing = assert_error(client.post(f"/api/v1/leases/{lease_id}/submit/", {}, format="json"), 400, "invalid")
    assert set(missing["fields"]) == {"value", "client_token"}
    long_token = assert_error(submit(client, lease_id, token="x" * 65), 400, "invalid")
    assert set(long_token["fields"]) == {"client_token"}
    assert_error(submit(client, lease_id, value=7), 409, "bad_value")
    assert_error(submit(client, lease_id, value=[1, 0]), 409, "bad_value")
    broken = client.post(f"/api/v1/leases/{lease_id}/submit/", "{not json", content_type="application/json")
    assert_error(broken, 400, "parse_error")
    assert_error(client.get(f"/api/v1/leases/{lease_id}/submit/"), 405, "method_not_allowed")
    assert Label.objects.count() == 0


def test_a_draft_answers_only_those_who_manage_it_even_after_they_took_part(make_campaign, make_user, api):
    """next-task finds the campaign with the worker's Participation row (lease_acquire_by_slug): that row
    must not let a former collaborator into a draft they may no longer see."""
    draft = make_campaign(2, launch=False)
    user = make_user("former-editor")
    services.campaign_share(campaign=draft, username=user.username)
    client = api(user)
    assert next_task(client, draft).json()["code"] == "campaign_draft"  # a manager's preview takes part
    assert Participation.objects.filter(campaign=draft, worker__user=user).exists()
    services.campaign_unshare(campaign=draft, username=user.username)
    assert_error(next_task(client, draft), 404, "not_found")
    assert_error(client.post("/api/v1/campaigns/no-such-campaign/next-task/"), 404, "not_found")


def test_k_workers_label_a_campaign_through_the_api(make_campaign, make_user, api):
    campaign = make_campaign(4, k=3)
    clients = [api(make_user()) for _ in range(4)]
    acknowledged = []
    for _ in range(5):
        for n, client in enumerate(clients):
            lease = next_task(client, campaign).json()["lease"]
            if lease:
                response = submit(client, lease["id"], value=n % 2, token=f"{lease['id']}")
                assert response.status_code == 201
                acknowledged.append(response.json()["label_id"])
    assert len(acknowledged) == 12
    # k labels per prompt, from k distinct workers, each acknowledged one stored
    assert invariant_violations(campaign=campaign, acknowledged=acknowledged, complete=True) == []


def test_a_prompt_with_the_most_options_a_prompt_may_have_is_labeled(researcher, make_user, api):
    campaign = services.campaign_create(
        owner=researcher,
        title="Many options",
        schema="option_rating",
        scale_min=0,
        scale_max=1,
        k=1,
        binarization={"0": 0, "1": 1},
    )
    options = [f"option {n}" for n in range(1, MAX_OPTIONS + 1)]
    services.prompts_import(
        campaign=campaign, data=jsonl({"id": "many", "text": "Rate each.", "options": options}), filename="many.jsonl"
    )
    services.campaign_transition(campaign=campaign, action="launch")
    client = api(make_user())
    lease = next_task(client, campaign).json()["lease"]
    assert lease["prompt"]["options"] == options
    response = submit(client, lease["id"], value=[n % 2 for n in range(MAX_OPTIONS)])
    assert response.status_code == 201, response.content
    assert Label.objects.get().value == [n % 2 for n in range(MAX_OPTIONS)]
    assert_error(submit(client, lease["id"], value=[1] * (MAX_OPTIONS + 1), token="longer"), 400, "invalid")
