"""The API of a campaign's workers and the actions on them: the workers' standing, acting (idempotent:
201 once, 200 after), the log, undo; bad input answers 400 naming the field and changes nothing;
anybody but the campaign's managers gets 404; the endpoints are in the OpenAPI schema."""

import pytest

from annotation import services
from annotation.models import Participation, WorkerAction
from annotation.services.quality import worker_act
from annotation.services.rules import rule_create
from tests.helpers import assert_error, label_one

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def crowd(make_campaign):
    """A live campaign labeled by two workers, ``sim:a`` (twice) and ``sim:b``."""
    campaign = make_campaign(4, k=2)
    a = services.worker_get_or_create(channel="sim", external_id="a")
    b = services.worker_get_or_create(channel="sim", external_id="b")
    label_one(campaign, a)
    label_one(campaign, a)
    label_one(campaign, b)
    return campaign


def _urls(campaign):
    base = f"/api/v1/campaigns/{campaign.slug}"
    return f"{base}/workers/", f"{base}/worker-actions/"


def test_act_read_the_log_and_undo(crowd, researcher, api):
    client = api(researcher)
    workers, actions = _urls(crowd)
    listed = client.get(workers).json()["results"]
    assert [(w["worker"], w["labels"], w["excluded_at"], w["blocked_at"], w["flagged"]) for w in listed] == [
        ("sim:a", 2, None, None, False),
        ("sim:b", 1, None, None, False),
    ]

    done = client.post(actions, {"worker": "sim:a", "action": "exclude", "reason": "Always 1."}, format="json")
    assert done.status_code == 201, done.content
    body = done.json()
    assert (body["worker"], body["kind"], body["by"], body["rule"], body["automatic"]) == (
        "sim:a",
        "exclude",
        "researcher",
        None,
        False,
    )
    assert body["reason"] == "Always 1." and body["undoable"] is True and body["undo_note"] is None
    again = client.post(actions, {"worker": "sim:a", "action": "exclude", "reason": "Twice."}, format="json")
    assert again.status_code == 200 and again.json() == body  # idempotent: the same action, nothing new
    assert [w["excluded_at"] is not None for w in client.get(workers).json()["results"]] == [True, False]

    undone = client.post(f"{actions}{body['id']}/undo/")
    assert undone.status_code == 200
    assert undone.json()["undone_by"] == "researcher" and undone.json()["undoable"] is False
    log = client.get(actions).json()["results"]
    assert [(a["kind"], a["numbers"]) for a in log] == [("include", {"undoes": body["id"]}), ("exclude", {})]
    assert client.post(f"{actions}{body['id']}/undo/").json() == undone.json()  # twice: unchanged
    assert_error(client.post(f"{actions}{log[0]['id']}/undo/"), 409, "not_undoable")

    recollect = client.post(actions, {"worker": "sim:b", "action": "recollect", "reason": "Spam."}, format="json")
    assert recollect.status_code == 201
    assert recollect.json()["numbers"] == {"labels_voided": 1} and "stay void" in recollect.json()["undo_note"]
    only_b = client.get(actions, {"worker": "sim:b"}).json()["results"]
    assert [a["kind"] for a in only_b] == ["recollect"]


def test_an_action_by_a_rule_is_automatic_and_undoable(crowd, researcher, api):
    rule = rule_create(
        campaign=crowd, by=researcher, metric="straight_lining", threshold=0.5, min_labels=2, action="block"
    )
    worker = services.worker_get_or_create(channel="sim", external_id="a")
    worker_act(
        kind="block",
        campaign=crowd,
        worker=worker,
        rule=rule,
        reason="answers 1 to 100 % of 2 labels",
        numbers={"top_share": 1.0, "rule_count": 2},
    )
    client = api(researcher)
    [action] = client.get(_urls(crowd)[1]).json()["results"]
    assert (action["by"], action["rule"], action["automatic"], action["undoable"]) == (None, rule.pk, True, True)
    assert action["numbers"] == {"top_share": 1.0, "rule_count": 2}
    assert client.post(f"{_urls(crowd)[1]}{action['id']}/undo/").status_code == 200
    assert Participation.objects.get(worker=worker).blocked_at is None


@pytest.mark.parametrize(
    "payload, field",
    [
        ({"worker": "sim:a", "action": "erase", "reason": "x"}, "action"),
        ({"worker": "sim:a", "reason": "x"}, "action"),
        ({"worker": "sim:elsewhere", "action": "exclude", "reason": "x"}, "worker"),
        ({"worker": "nobody", "action": "exclude", "reason": "x"}, "worker"),
        ({"action": "exclude", "reason": "x"}, "worker"),
        ({"worker": "sim:a", "action": "exclude"}, "reason"),
        ({"worker": "sim:a", "action": "exclude", "reason": "   "}, "reason"),
        ({"worker": "sim:a", "action": "exclude", "reason": "x" * 301}, "reason"),
    ],
)
def test_bad_input_names_the_field_and_changes_nothing(
    crowd, make_campaign, researcher, api, unchanged, payload, field
):
    elsewhere = services.worker_get_or_create(channel="sim", external_id="elsewhere")
    label_one(make_campaign(2, title="Elsewhere"), elsewhere)
    unchanged()
    error = assert_error(api(researcher).post(_urls(crowd)[1], payload, format="json"), 400, "invalid")
    assert list(error["fields"]) == [field]


def test_including_a_worker_never_excluded_is_refused(crowd, researcher, api, unchanged):
    unchanged()
    payload = {"worker": "sim:a", "action": "include", "reason": "x"}
    assert_error(api(researcher).post(_urls(crowd)[1], payload, format="json"), 409, "not_excluded")
    payload["action"] = "unblock"
    assert_error(api(researcher).post(_urls(crowd)[1], payload, format="json"), 409, "not_blocked")


def test_only_the_campaigns_managers_see_or_act(crowd, researcher, make_user, api, unchanged):
    workers, actions = _urls(crowd)
    own = api(researcher).post(actions, {"worker": "sim:a", "action": "flag", "reason": "Odd."}, format="json").json()
    collaborator, staff, stranger = make_user(), make_user(is_staff=True), make_user()
    crowd.collaborators.add(collaborator)
    payload = {"worker": "sim:b", "action": "flag", "reason": "Odd too."}
    unchanged()
    for path in (workers, actions):
        assert_error(api(stranger).get(path), 404, "not_found")
        assert_error(api().get(path), 401, "not_authenticated")
    assert_error(api(stranger).post(actions, payload, format="json"), 404, "not_found")
    assert_error(api(stranger).post(f"{actions}{own['id']}/undo/"), 404, "not_found")
    assert_error(api(researcher).post(f"{actions}999999/undo/"), 404, "not_found")
    assert api(collaborator).get(workers).status_code == api(staff).get(actions).status_code == 200
    assert WorkerAction.objects.count() == 1


def test_a_collaborator_acts_too(crowd, make_user, api):
    collaborator = make_user()
    crowd.collaborators.add(collaborator)
    payload = {"worker": "sim:b", "action": "block", "reason": "Too fast."}
    assert api(collaborator).post(_urls(crowd)[1], payload, format="json").status_code == 201
    assert WorkerAction.objects.get().by == collaborator


def test_the_endpoints_are_in_the_openapi_schema(api):
    schema = api().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    paths = schema["paths"]
    assert set(paths["/api/v1/campaigns/{slug}/worker-actions/"]) >= {"get", "post"}
    assert "post" in paths["/api/v1/campaigns/{slug}/worker-actions/{action_id}/undo/"]
    assert "get" in paths["/api/v1/campaigns/{slug}/workers/"]
    kinds = schema["components"]["schemas"]["WorkerActionInput"]["properties"]["action"]
    assert "recollect" in str(kinds) or "ActionEnum" in str(kinds)
