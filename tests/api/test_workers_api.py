"""The workers API beside the audit (issue 21): each worker's audit numbers and flags, filtered by flag and
status; a worker's labels; acting on several workers at once, all or nothing (one bad id: nobody is
acted on, nothing is stored), and unflagging; the single-worker form unchanged."""

import pytest

from annotation import services
from annotation.models import Participation, WorkerAction
from audits import services as audit_services
from tests.api.conftest import row_counts
from tests.clock import paced
from tests.helpers import GOLD, assert_error, label_all

pytestmark = [pytest.mark.django_db]
WHY = "Answers 1 to everything."


@pytest.fixture
def crowd(make_campaign):
    """24 prompts, k = 2: ``sim:careful`` answers the gold, ``sim:spammer`` 1 to everything; the quick audit."""
    campaign = make_campaign(24, k=2)
    careful = services.worker_get_or_create(channel="sim", external_id="careful")
    spammer = services.worker_get_or_create(channel="sim", external_id="spammer")
    with paced() as clock:  # one pace for both: no speed flag from this machine's timing
        label_all(campaign, careful, GOLD, clock=clock)
        label_all(campaign, spammer, value=1, clock=clock)
    audit_services.audit_refresh(campaign_id=campaign.pk)
    return campaign, careful, spammer


def test_the_workers_list_carries_the_audit_and_filters(crowd, researcher, api):
    campaign, careful, spammer = crowd
    client = api(researcher)
    url = f"/api/v1/campaigns/{campaign.slug}/workers/"
    listed = {w["worker"]: w for w in client.get(url).json()["results"]}
    assert listed["sim:spammer"]["id"] == spammer.pk
    assert listed["sim:spammer"]["top_share"] == 1.0 and listed["sim:spammer"]["top_value"] == 1.0
    assert [f["kind"] for f in listed["sim:spammer"]["flags"]] == ["straight_lining"]
    assert listed["sim:careful"]["flags"] == [] and listed["sim:careful"]["control_accuracy"] is None

    assert [w["worker"] for w in client.get(url, {"flag": "straight_lining"}).json()["results"]] == ["sim:spammer"]
    assert client.get(url, {"flag": "too_fast"}).json()["results"] == []
    client.post(
        f"/api/v1/campaigns/{campaign.slug}/worker-actions/",
        {"worker": "sim:careful", "action": "flag", "reason": WHY},
        format="json",
    )
    assert [w["worker"] for w in client.get(url, {"status": "flagged"}).json()["results"]] == ["sim:careful"]
    assert [w["worker"] for w in client.get(url, {"status": "active"}).json()["results"]] == [
        "sim:careful",
        "sim:spammer",
    ]
    error = assert_error(client.get(url, {"status": "gone"}), 400, "invalid")
    assert "status" in error["fields"]


def test_a_workers_labels(crowd, researcher, api):
    campaign, careful, spammer = crowd
    client = api(researcher)
    url = f"/api/v1/campaigns/{campaign.slug}/workers/{spammer.pk}/labels/"
    first = client.get(url, {"page_size": 5}).json()
    assert len(first["results"]) == 5 and first["next"]
    rows = first["results"]
    while first["next"]:
        first = client.get(first["next"]).json()
        rows += first["results"]
    assert len(rows) == 24 and len({r["label_id"] for r in rows}) == 24
    assert {r["correct"] for r in rows} == {True, False}  # gold alternates; the spammer always says 1
    assert all(r["value"] == 1 and r["voided_at"] is None and r["control"] is False for r in rows)
    assert all(r["correct"] == (r["prompt"] in {f"p{i}" for i in range(1, 24, 2)}) for r in rows)

    other = services.worker_get_or_create(channel="sim", external_id="elsewhere")
    for worker_id in (other.pk, 10**30):  # not in the campaign; beyond any id the database stores
        assert client.get(f"/api/v1/campaigns/{campaign.slug}/workers/{worker_id}/labels/").status_code == 404


def test_bulk_actions_are_all_or_nothing(crowd, researcher, api):
    campaign, careful, spammer = crowd
    client = api(researcher)
    url = f"/api/v1/campaigns/{campaign.slug}/worker-actions/"
    before = row_counts()
    refused = client.post(
        url, {"workers": ["sim:spammer", "sim:nobody"], "action": "block", "reason": WHY}, format="json"
    )
    error = assert_error(refused, 400, "invalid")
    assert "sim:nobody" in str(error["fields"]["workers"])
    refused = client.post(url, {"workers": ["sim:spammer", "sim:careful"], "action": "include", "reason": WHY})
    assert refused.status_code == 409 and "not excluded" in refused.json()["error"]["message"]
    refused = client.post(url, {"workers": ["sim:spammer"], "action": "recollect", "reason": WHY}, format="json")
    assert "action" in assert_error(refused, 400, "invalid")["fields"]
    both = {"worker": "sim:spammer", "workers": ["sim:spammer"], "action": "block", "reason": WHY}
    assert "worker" in assert_error(client.post(url, both, format="json"), 400, "invalid")["fields"]
    assert row_counts() == before

    done = client.post(
        url, {"workers": ["sim:spammer", "sim:careful"], "action": "block", "reason": WHY}, format="json"
    )
    assert done.status_code == 201, done.content
    actions = done.json()["actions"]
    assert [(a["worker"], a["kind"], a["by"]) for a in actions] == [
        ("sim:careful", "block", "researcher"),
        ("sim:spammer", "block", "researcher"),
    ]
    assert Participation.objects.filter(campaign=campaign, blocked_at__isnull=False).count() == 2
    again = client.post(url, {"workers": ["sim:spammer"], "action": "block", "reason": WHY}, format="json")
    assert again.status_code == 200 and again.json()["actions"][0]["id"] == actions[1]["id"]

    flagged = client.post(url, {"workers": ["sim:spammer", "sim:careful"], "action": "flag", "reason": WHY})
    assert flagged.status_code == 201
    unflagged = client.post(url, {"worker": "sim:spammer", "action": "unflag", "reason": "Fine."}, format="json")
    assert unflagged.status_code == 201 and unflagged.json()["undone_by"] == "researcher"
    assert list(
        WorkerAction.objects.filter(campaign=campaign, kind="flag", undone_at__isnull=True).values_list(
            "worker_id", flat=True
        )
    ) == [careful.pk]
