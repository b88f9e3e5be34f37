"""The prompts API (issue 21): the list with the page's filters and pages, one prompt with its labels and
who gave them, and retiring or bringing back prompts, all or nothing (400 naming the ids at fault)."""

import pytest

from annotation import services
from annotation.models import Activity, Prompt
from tests.helpers import assert_error, label_one, sim_worker

pytestmark = pytest.mark.django_db


def base(campaign) -> str:
    return f"/api/v1/campaigns/{campaign.slug}/prompts/"


def test_the_list_filters_sorts_and_pages(make_campaign, researcher, api):
    campaign = make_campaign(5, k=2)
    label = label_one(campaign, sim_worker())
    client = api(researcher)
    everything = client.get(base(campaign), {"page_size": 2})
    assert everything.status_code == 200
    body = everything.json()
    assert body["count"] == 5 and len(body["results"]) == 2 and body["next"]
    first = body["results"][0]
    assert set(first) >= {"id", "external_id", "text", "group", "gold", "control", "retired", "n_labels"}
    assert (first["labels_wanted"], first["retired"], first["status"]) == (2, False, "open")
    by_labels = client.get(base(campaign), {"order": "-labels"}).json()["results"]
    assert by_labels[0]["id"] == label.prompt_id
    assert (by_labels[0]["n_labels"], by_labels[0]["agreement"], by_labels[0]["contested"]) == (1, 1.0, False)
    assert by_labels[1]["agreement"] is None
    found = client.get(base(campaign), {"search": "p3", "complete": "false", "retired": "false"}).json()
    assert [row["external_id"] for row in found["results"]] == ["p3"]
    error = assert_error(client.get(base(campaign), {"order": "random"}), 400, "invalid")
    assert "order" in error["fields"]


def test_one_prompt_with_its_labels_and_who_gave_them(make_campaign, researcher, api):
    campaign = make_campaign(1, k=2)
    worker = sim_worker()
    label = label_one(campaign, worker, value=0)
    services.label_void(label_id=label.pk, reason="returned")
    label_one(campaign, sim_worker(), value=1)
    body = api(researcher).get(f"{base(campaign)}{label.prompt_id}/").json()
    assert (body["n_labels"], body["status"], body["options"]) == (1, "open", [])
    given = body["labels"]
    assert [row["voided_at"] is not None for row in given] == [True, False]
    assert given[0]["worker"] == worker.public_id and given[0]["worker_external_id"] == worker.external_id
    assert (given[0]["channel"], given[0]["value"], given[0]["void_reason"]) == ("sim", 0, "returned")
    other = Prompt.objects.get(campaign=make_campaign(1))
    assert_error(api(researcher).get(f"{base(campaign)}{other.pk}/"), 404, "not_found")


def test_retire_and_unretire_all_or_nothing(make_campaign, researcher, api):
    campaign = make_campaign(3, k=2)
    labeled = label_one(campaign, sim_worker()).prompt
    free = list(Prompt.objects.filter(campaign=campaign).exclude(pk=labeled.pk).values_list("pk", flat=True))
    client = api(researcher)
    refused = client.post(f"{base(campaign)}retire/", {"prompts": [*free, labeled.pk, 999999]}, format="json")
    error = assert_error(refused, 400, "invalid")
    messages = error["fields"]["prompts"]
    assert len(messages) == 2 and str(labeled.pk) in messages[0] and "999999" in messages[1]
    assert not Prompt.objects.filter(retired_at__isnull=False).exists()

    done = client.post(f"{base(campaign)}retire/", {"prompts": free}, format="json")
    assert done.status_code == 200 and done.json() == {"changed": free, "unchanged": []}
    assert client.get(base(campaign), {"retired": "true"}).json()["count"] == 2
    again = client.post(f"{base(campaign)}unretire/", {"prompts": [free[0], free[0]]}, format="json")
    assert again.json() == {"changed": [free[0]], "unchanged": []}
    assert Activity.objects.filter(campaign=campaign, verb="prompts.unretired").count() == 1
    assert_error(client.post(f"{base(campaign)}retire/", {"prompts": []}, format="json"), 400, "invalid")
    assert_error(client.post(f"{base(campaign)}retire/", {"prompts": ["p0"]}, format="json"), 400, "invalid")
    # Beyond any row's id (a 64-bit integer): refused as input, not left to the database (it was a 500).
    assert_error(client.post(f"{base(campaign)}retire/", {"prompts": [2**64]}, format="json"), 400, "invalid")


def test_a_draft_refuses_with_409(make_campaign, researcher, api):
    campaign = make_campaign(1, launch=False)
    pk = Prompt.objects.get(campaign=campaign).pk
    refused = api(researcher).post(f"{base(campaign)}retire/", {"prompts": [pk]}, format="json")
    assert_error(refused, 409, "not_launched")
