"""The API of imports (list, remove before launch) and of a campaign's copy, with token clients."""

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation import services
from annotation.models import Activity, Campaign
from annotation.permissions import CREATE_REFUSAL
from tests.helpers import assert_error, import_counts, prompts_jsonl

pytestmark = pytest.mark.django_db


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def test_imports_are_listed_newest_first(researcher, binary_draft):
    second = services.prompts_import(campaign=binary_draft, data=prompts_jsonl(3, prefix="q"), filename="q.jsonl")
    response = token_client(researcher).get(f"/api/v1/campaigns/{binary_draft.slug}/imports/")
    assert response.status_code == 200
    rows = response.json()
    assert [(row["id"], row["filename"], row["n_prompts"]) for row in rows] == [
        (second.pk, "q.jsonl", 3),
        (binary_draft.imports.get(filename="prompts.jsonl").pk, "prompts.jsonl", 2),
    ]
    assert rows[0]["sha256"] == second.sha256 and set(rows[0]) == {
        "id",
        "filename",
        "n_prompts",
        "created_at",
        "sha256",
    }


def test_deleting_an_import_removes_it_and_the_file_imports_again(researcher, binary_draft):
    client = token_client(researcher)
    batch = binary_draft.imports.get()
    response = client.delete(f"/api/v1/campaigns/{binary_draft.slug}/imports/{batch.pk}/")
    assert response.status_code == 204
    assert not binary_draft.prompts.exists()
    assert Activity.objects.filter(campaign=binary_draft, verb="prompts.import_removed").exists()
    again = client.post(
        f"/api/v1/campaigns/{binary_draft.slug}/prompts/",
        [{"id": "p0", "text": "again"}],
        format="json",
    )
    assert again.status_code == 201


def test_deleting_an_import_after_launch_is_a_409_and_changes_nothing(researcher, make_campaign):
    campaign = make_campaign(2)
    before = import_counts()
    response = token_client(researcher).delete(
        f"/api/v1/campaigns/{campaign.slug}/imports/{campaign.imports.get().pk}/"
    )
    error = assert_error(response, 409, "launched")
    assert "launched" in error["message"]
    assert import_counts() == before


def test_an_unknown_import_is_a_404(researcher, binary_draft, make_campaign):
    other = make_campaign(1, launch=False, title="Other")
    response = token_client(researcher).delete(
        f"/api/v1/campaigns/{binary_draft.slug}/imports/{other.imports.get().pk}/"
    )
    assert_error(response, 404, "not_found")
    assert other.prompts.count() == 1


def test_copy_makes_a_draft_of_the_requester(researcher, make_campaign):
    source = make_campaign(4, k=2, title="Source")
    response = token_client(researcher).post(f"/api/v1/campaigns/{source.slug}/copy/", {"title": "Second round"})
    assert response.status_code == 201
    body = response.json()
    assert (body["title"], body["status"], body["owner"], body["k"]) == ("Second round", "draft", "researcher", 2)
    copy = Campaign.objects.get(slug=body["slug"])
    assert copy.prompts.count() == 4
    default = token_client(researcher).post(f"/api/v1/campaigns/{source.slug}/copy/", format="json")
    assert default.json()["title"] == "Source (copy)"
    again = token_client(researcher).post(f"/api/v1/campaigns/{source.slug}/copy/", format="json")
    assert again.json()["title"] == "Source (copy 2)"
    clash = token_client(researcher).post(f"/api/v1/campaigns/{source.slug}/copy/", {"title": " second ROUND "})
    assert clash.status_code == 400
    assert "already has a campaign called “Second round”" in clash.json()["error"]["fields"]["title"][0]


def test_copy_needs_the_right_to_create_campaigns_and_to_see_the_source(make_user, make_campaign):
    source = make_campaign(2)
    viewer, stranger = make_user("viewer"), make_user("stranger")
    services.campaign_share(campaign=source, username="viewer", role="viewer")
    before = Campaign.objects.count()
    error = assert_error(token_client(viewer).post(f"/api/v1/campaigns/{source.slug}/copy/"), 403, "permission_denied")
    assert error["message"] == CREATE_REFUSAL
    assert_error(token_client(stranger).post(f"/api/v1/campaigns/{source.slug}/copy/"), 404, "not_found")
    assert Campaign.objects.count() == before


def test_a_viewer_who_is_a_researcher_may_copy(make_user, make_campaign):
    """Copying changes nothing in the source: seeing it is enough, with the right to create campaigns."""
    from annotation.services.accounts import researcher_set

    source = make_campaign(2)
    viewer = make_user("viewer")
    researcher_set(user=viewer)
    services.campaign_share(campaign=source, username="viewer", role="viewer")
    response = token_client(viewer).post(f"/api/v1/campaigns/{source.slug}/copy/", {"title": "Mine now"})
    assert response.status_code == 201 and response.json()["owner"] == "viewer"


def test_a_bad_title_names_the_field(researcher, make_campaign):
    source = make_campaign(1)
    response = token_client(researcher).post(f"/api/v1/campaigns/{source.slug}/copy/", {"title": "x" * 201})
    assert "title" in assert_error(response, 400, "invalid")["fields"]
