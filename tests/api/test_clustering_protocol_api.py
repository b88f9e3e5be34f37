"""Issue 21: a free-text campaign's clustering protocol through the API. It is a campaign field (set on
create and edit, refused when unknown, logged when changed); under ``single`` the clusterings resource
takes a save as the final clustering, which the answers overview reports as final, without agreement."""

import pytest

from annotation.models import Activity, Label
from tests.audits.live.free_text import free_text_campaign
from tests.helpers import assert_error

pytestmark = [pytest.mark.django_db]


def test_the_protocol_is_set_by_the_campaigns_api_and_a_single_save_is_final(researcher, make_user, api):
    client = api(researcher)
    created = client.post(
        "/api/v1/campaigns/", {"title": "Small lab", "schema": "free_text", "clustering_protocol": "single"}, "json"
    )
    assert created.status_code == 201 and created.json()["clustering_protocol"] == "single"
    assert (
        client.post("/api/v1/campaigns/", {"title": "Default", "schema": "free_text"}, "json").json()[
            "clustering_protocol"
        ]
        == "double_blind"
    )
    campaign = free_text_campaign(researcher, {"q1": ("Name a drink.", ["coffee", "Coffee", "tea"])})
    url = f"/api/v1/campaigns/{campaign.slug}/"
    error = assert_error(client.patch(url, {"clustering_protocol": "solo"}, format="json"), 400, "invalid")
    assert "clustering_protocol" in str(error)
    assert client.get(url).json()["clustering_protocol"] == "double_blind"  # nothing stored
    # Prompts and answers exist: the protocol may still change (it decides only what is final).
    assert client.patch(url, {"clustering_protocol": "single"}, format="json").json()["clustering_protocol"] == "single"
    assert Activity.objects.get(campaign=campaign, verb="campaign.edited").detail == {"clustering_protocol": "single"}

    alice = make_user("alice")
    campaign.collaborators.add(alice)
    solo = api(alice)
    clusterings = f"{url}answers/q1/clusterings/"
    assert solo.get(clusterings).json()["role"] == "adjudicated"
    ids = list(Label.objects.filter(prompt__campaign=campaign).order_by("id").values_list("id", flat=True))
    assignment = {str(pk): "drinks" for pk in ids}
    refused = solo.post(clusterings, {"role": "independent", "base_version": 0, "assignment": assignment}, "json")
    assert "clustering protocol is single" in str(assert_error(refused, 400, "invalid"))
    saved = solo.post(clusterings, {"role": "adjudicated", "base_version": 0, "assignment": assignment}, "json")
    assert saved.status_code == 201 and saved.json()["version"] == 1
    overview = solo.get(f"{url}answers/").json()
    assert (overview["clustering_protocol"], overview["n_final"], overview["mean_blanc"]) == ("single", 1, None)
    [row] = overview["rows"]
    assert (row["final"], row["adjudicated"], row["noise_source"], row["agreement"]) == (True, True, "final", None)
    assert row["noise"]["n_clusters"] == 1
