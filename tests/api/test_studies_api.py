"""POST /api/v1/studies/: a labels file collected elsewhere as an imported study, all or nothing."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from annotation.models import Campaign, Label

pytestmark = pytest.mark.django_db

LABELS = b"worker,prompt,value,created_at\nw1,p1,3,2024-05-01T10:00:00Z\nw2,p1,4,2024-05-01T10:01:00\nw1,p2,1,\n"


@pytest.fixture
def api(researcher):
    client = APIClient()
    client.force_authenticate(researcher)
    return client


def post(api, labels: bytes, name="study.csv", **fields):
    return api.post("/api/v1/studies/", {"labels": SimpleUploadedFile(name, labels), **fields}, format="multipart")


def test_a_rating_study_with_its_map_becomes_a_closed_campaign(api):
    response = post(
        api,
        LABELS,
        title="Old lab study",
        schema="rating",
        scale_min="1",
        scale_max="4",
        binarization=json.dumps({"1": 0, "2": 0, "3": 1, "4": 1}),
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "closed" and body["imported_at"] and body["k"] == 2
    campaign = Campaign.objects.get(slug=body["slug"])
    values = sorted(Label.objects.filter(campaign=campaign).values_list("prompt__external_id", "value"))
    assert values == [("p1", 3), ("p1", 4), ("p2", 1)]
    times = sorted(Label.objects.filter(campaign=campaign).values_list("created_at", flat=True))
    assert times[0].isoformat() == "2024-05-01T10:00:00+00:00"  # the file's time, naive read as UTC
    activity = api.get(f"/api/v1/campaigns/{campaign.slug}/activity/").json()
    assert "study.imported" in json.dumps(activity)


def test_a_prompts_file_gives_the_texts(api):
    prompts = SimpleUploadedFile("prompts.jsonl", b'{"prompt": "p1", "text": "One"}\n{"prompt": "p2", "text": "Two"}\n')
    response = post(
        api,
        LABELS.replace(b",3,", b",1,").replace(b",4,", b",0,").replace(b",1,\n", b",0,\n"),
        title="T",
        prompts=prompts,
    )
    assert response.status_code == 201, response.content
    campaign = Campaign.objects.get(slug=response.json()["slug"])
    assert sorted(campaign.prompts.values_list("text", flat=True)) == ["One", "Two"]


def test_a_bad_row_is_a_400_naming_its_line_and_stores_nothing(api):
    before = Campaign.objects.count()
    response = post(api, b"worker,prompt,value\nw1,p1,1\nw2,p1,5\n", title="Bad", schema="binary")
    assert response.status_code == 400
    assert "line 3" in json.dumps(response.json())
    assert Campaign.objects.count() == before


def test_a_missing_column_names_it(api):
    response = post(api, b"worker,item,value\nw1,p1,1\n", title="Bad")
    assert response.status_code == 400
    assert "missing required column 'prompt'" in json.dumps(response.json())


def test_an_account_that_may_not_create_campaigns_is_refused(make_user):
    client = APIClient()
    client.force_authenticate(make_user("newcomer"))
    response = client.post(
        "/api/v1/studies/", {"labels": SimpleUploadedFile("s.csv", LABELS), "title": "X"}, format="multipart"
    )
    assert response.status_code == 403
    assert not Campaign.objects.filter(title="X").exists()
