"""Researchers' API: campaigns, their life cycle and progress, prompt import, sharing."""

import io
import json

import pytest
from django.test import override_settings

from annotation.models import Campaign, ImportBatch, Prompt, Slot
from tests.helpers import assert_error, label_one, prompts_jsonl

pytestmark = [pytest.mark.django_db]


def test_create_then_read_a_campaign(researcher, api):
    client = api(researcher)
    response = client.post("/api/v1/campaigns/", {"title": "Moral statements", "k": 4}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["slug"] == "moral-statements" and body["owner"] == "researcher"
    assert body["status"] == "draft" and body["k"] == 4 and body["schema"] == "binary"
    assert client.get("/api/v1/campaigns/moral-statements/").json() == body
    assert [c["slug"] for c in client.get("/api/v1/campaigns/").json()] == ["moral-statements"]


@pytest.mark.parametrize(
    "payload, field",
    [
        ({}, "title"),
        ({"title": "x", "k": 0}, "k"),
        ({"title": "x", "k": "many"}, "k"),
        ({"title": "x", "schema": "free-text"}, "schema"),
        ({"title": "x", "schema": "rating", "scale_min": 5, "scale_max": 1}, "scale_max"),
        ({"title": "x", "schema": "rating", "binarization": {"9": 1}}, "binarization"),
        ({"title": "x", "schema": "rating", "binarization": {"one": 1}}, "binarization"),
        ({"title": "x", "schema": "rating", "binarization": {"1": 2}}, "binarization"),
        ({"title": "x", "schema": "rating", "binarization": [1, 0]}, "binarization"),
        ({"title": "x", "lease_seconds": 1}, "lease_seconds"),
        ({"title": "x", "schema": "rating", "scale_step": 0.4}, "scale_step"),  # 0.4 does not divide 1–4
        ({"title": "x" * 201}, "title"),
    ],
)
def test_bad_settings_are_refused_field_by_field(researcher, api, payload, field):
    response = api(researcher).post("/api/v1/campaigns/", payload, format="json")
    error = assert_error(response, 400, "invalid")
    assert field in error["fields"]
    assert Campaign.objects.count() == 0


def test_other_researchers_campaigns_do_not_exist_for_you(make_campaign, make_user, api):
    campaign = make_campaign(2)
    stranger = api(make_user())
    assert stranger.get("/api/v1/campaigns/").json() == []
    for path in ("", "progress/", "labels/", "labels.csv", "collaborators/"):
        assert_error(stranger.get(f"/api/v1/campaigns/{campaign.slug}/{path}"), 404, "not_found")
    assert_error(
        stranger.patch(f"/api/v1/campaigns/{campaign.slug}/", {"title": "mine"}, format="json"), 404, "not_found"
    )
    assert_error(stranger.post(f"/api/v1/campaigns/{campaign.slug}/close/"), 404, "not_found")
    campaign.refresh_from_db()
    assert campaign.title == "Test campaign" and campaign.status == "live"


def test_update_and_frozen_fields(make_campaign, researcher, api):
    campaign, client = make_campaign(2, launch=False), api(researcher)
    response = client.patch(
        f"/api/v1/campaigns/{campaign.slug}/", {"title": "Renamed", "lease_seconds": 120}, format="json"
    )
    assert response.status_code == 200 and response.json()["title"] == "Renamed"
    assert_error(client.patch(f"/api/v1/campaigns/{campaign.slug}/", {"k": 7}, format="json"), 409, "frozen_field")
    campaign.refresh_from_db()
    assert (campaign.title, campaign.lease_seconds, campaign.k) == ("Renamed", 120, 3)


def test_life_cycle_actions(make_campaign, researcher, api):
    campaign, client = make_campaign(2, launch=False), api(researcher)
    base = f"/api/v1/campaigns/{campaign.slug}"
    assert_error(client.post(f"{base}/resume/"), 409, "bad_transition")
    statuses = [client.post(f"{base}/{action}/").json()["status"] for action in ("launch", "pause", "resume", "close")]
    assert statuses == ["live", "paused", "live", "closed"]
    assert_error(client.post(f"{base}/launch/"), 409, "bad_transition")


def test_progress(make_campaign, make_worker, researcher, api):
    campaign = make_campaign(4, k=2)
    label_one(campaign, make_worker())
    body = api(researcher).get(f"/api/v1/campaigns/{campaign.slug}/progress/").json()
    window = body.pop("window_minutes")
    assert 0 <= window < 1  # launched a moment ago: no pace yet (tests/annotation/test_pace.py)
    assert body == {
        "labels_per_minute": None,
        "eta_seconds": None,
        "n_prompts": 4,
        "k": 2,
        "k_max": None,
        "labels": 1,
        "labels_wanted": 8,
        "prompts_complete": 0,
        "percent": 12.5,
    }


def test_import_a_json_list_of_rows(make_campaign, researcher, api):
    campaign = make_campaign(0, launch=False)
    rows = [{"id": "a", "text": "First", "gold": 1, "group": "g"}, {"id": "b", "text": "Second"}]
    response = api(researcher).post(f"/api/v1/campaigns/{campaign.slug}/prompts/", rows, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["n_prompts"] == 2 and response.json()["filename"] == "request.jsonl"
    assert list(Prompt.objects.order_by("external_id").values_list("external_id", "gold", "group")) == [
        ("a", 1, "g"),
        ("b", None, ""),
    ]
    assert Slot.objects.count() == 2 * campaign.k


def test_import_an_uploaded_csv(make_campaign, researcher, api):
    campaign = make_campaign(0, launch=False)
    upload = io.BytesIO(b'id,text,gold\nq1,Is it raining?,1\nq2,"Quoted, with comma",0\n')
    upload.name = "prompts.csv"
    response = api(researcher).post(f"/api/v1/campaigns/{campaign.slug}/prompts/", {"file": upload}, format="multipart")
    assert response.status_code == 201, response.content
    assert sorted(Prompt.objects.values_list("text", flat=True)) == ["Is it raining?", "Quoted, with comma"]


def test_a_bad_row_imports_nothing_and_names_its_line(make_campaign, researcher, api):
    campaign = make_campaign(0, launch=False)
    rows = [{"id": "a", "text": "Fine"}, {"id": "b", "text": ""}, {"id": "a", "text": "Again"}]
    response = api(researcher).post(f"/api/v1/campaigns/{campaign.slug}/prompts/", rows, format="json")
    error = assert_error(response, 400, "bad_prompt_file")
    assert set(error["fields"]["lines"]) == {"2", "3"}
    assert "duplicate id 'a'" in error["fields"]["lines"]["3"][0]
    assert Prompt.objects.count() == ImportBatch.objects.count() == 0


def test_the_same_file_twice_is_refused(make_campaign, researcher, api):
    campaign = make_campaign(0, launch=False)
    client = api(researcher)
    rows = [{"id": "a", "text": "Fine"}]
    assert client.post(f"/api/v1/campaigns/{campaign.slug}/prompts/", rows, format="json").status_code == 201
    error = assert_error(
        client.post(f"/api/v1/campaigns/{campaign.slug}/prompts/", rows, format="json"), 400, "bad_prompt_file"
    )
    assert "already imported" in error["message"]
    assert Prompt.objects.count() == 1


@override_settings(CHORUS_MAX_IMPORT_BYTES=1000, DATA_UPLOAD_MAX_MEMORY_SIZE=2000)
def test_an_import_over_the_size_limit_is_refused(make_campaign, researcher, api):
    campaign = make_campaign(0, launch=False)
    client = api(researcher)
    upload = io.BytesIO(prompts_jsonl(40))
    upload.name = "big.jsonl"
    assert len(upload.getvalue()) > 1000
    url = f"/api/v1/campaigns/{campaign.slug}/prompts/"
    assert_error(client.post(url, {"file": upload}, format="multipart"), 413, "too_large")  # over the body limit
    upload = io.BytesIO(prompts_jsonl(20))  # under the body limit, over the file limit
    upload.name, size = "big.jsonl", len(upload.getvalue())
    error = assert_error(client.post(url, {"file": upload}, format="multipart"), 413, "too_large")
    assert error["message"] == f"Nothing was imported: the file is {size:,} bytes; the limit is 1,000."  # as on the web
    rows = [json.loads(line) for line in prompts_jsonl(20).splitlines()]  # under the body limit, over the file limit
    assert "limit is 1,000" in assert_error(client.post(url, rows, format="json"), 400, "bad_prompt_file")["message"]
    huge = [json.loads(line) for line in prompts_jsonl(60).splitlines()]
    assert_error(client.post(url, huge, format="json"), 413, "too_large")
    assert Prompt.objects.count() == 0


def test_sharing_with_a_collaborator(make_campaign, researcher, make_user, api):
    campaign = make_campaign(2)
    colleague = make_user("colleague")
    owner, shared = api(researcher), api(colleague)
    base = f"/api/v1/campaigns/{campaign.slug}"
    assert_error(shared.get(f"{base}/"), 404, "not_found")
    response = owner.post(f"{base}/collaborators/", {"username": "colleague"}, format="json")
    assert response.status_code == 201
    assert response.json() == {"owner": "researcher", "collaborators": ["colleague"], "roles": {"colleague": "editor"}}
    assert shared.get(f"{base}/").status_code == 200
    assert shared.post(f"{base}/pause/").json()["status"] == "paused"
    # A collaborator manages the campaign but does not share it further.
    make_user("third")
    assert_error(shared.post(f"{base}/collaborators/", {"username": "third"}, format="json"), 403, "permission_denied")
    assert_error(shared.delete(f"{base}/collaborators/colleague/"), 403, "permission_denied")
    assert_error(owner.post(f"{base}/collaborators/", {"username": "nobody"}, format="json"), 400, "unknown_user")
    assert_error(owner.post(f"{base}/collaborators/", {"username": "researcher"}, format="json"), 400, "is_owner")
    assert owner.delete(f"{base}/collaborators/colleague/").status_code == 204
    assert_error(shared.get(f"{base}/"), 404, "not_found")
    assert list(campaign.collaborators.all()) == []


def test_staff_see_every_campaign(make_campaign, make_user, api):
    campaign = make_campaign(1)
    staff = api(make_user(is_staff=True))
    assert [c["slug"] for c in staff.get("/api/v1/campaigns/").json()] == [campaign.slug]
    assert staff.get(f"/api/v1/campaigns/{campaign.slug}/labels/").status_code == 200
