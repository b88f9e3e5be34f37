"""Issue 10 through the REST API: each bad input is refused in the error shape
``{"error": {"code", "message", "fields"}}``, naming what is wrong, and the database is left exactly as
it was. The service-level and web-page checks are in tests/annotation/test_bad_input.py; bad prompt
files (tests/helpers.py's BAD_PROMPT_FILES) go through the API in test_malformed_inputs.py."""

import pytest

from annotation.models import Label, Lease, Slot
from tests.helpers import BINARIZATION, assert_error

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]


@pytest.mark.parametrize("value", ["true", "false"])
def test_a_rating_label_of_true_is_refused_and_the_lease_kept(rating, make_user, api, unchanged, value):
    client = api(make_user())
    lease_id = client.post(f"/api/v1/campaigns/{rating.slug}/next-task/").json()["lease"]["id"]
    unchanged()
    response = client.generic(
        "POST",
        f"/api/v1/leases/{lease_id}/submit/",
        f'{{"value": {value}, "client_token": "t"}}',
        content_type="application/json",
    )
    error = assert_error(response, 409, "bad_value")
    assert error["message"] == f"The label must be one of 1, 2, 3, 4; got {value}, which is not a rating."
    assert Lease.objects.get(pk=lease_id).status == Lease.Status.ACTIVE
    assert not Slot.objects.filter(filled=True).exists()


def test_a_binary_label_of_true_counts_as_1(make_campaign, make_user, api):
    campaign, client = make_campaign(1, k=1), api(make_user())
    lease_id = client.post(f"/api/v1/campaigns/{campaign.slug}/next-task/").json()["lease"]["id"]
    response = client.post(f"/api/v1/leases/{lease_id}/submit/", {"value": True, "client_token": "t"}, format="json")
    assert response.status_code == 201, response.content
    assert Label.objects.get().value == 1


def test_a_json_list_of_rows_with_an_object_id_is_refused(rating, researcher, api, unchanged):
    unchanged()
    response = api(researcher).post(
        f"/api/v1/campaigns/{rating.slug}/prompts/",
        [{"id": "a", "text": "t"}, {"id": {"a": 1}, "text": "t"}],
        format="json",
    )
    error = assert_error(response, 400, "bad_prompt_file")
    assert error["fields"] == {"lines": {"2": ["the id must be a string or a whole number, not an object"]}}


def test_a_json_list_of_rows_keeps_unicode_line_separators(rating, researcher, api):
    """The API writes the rows as JSONL with ensure_ascii=False: a raw U+2028 split the row in two."""
    text = "first\u2028second\u2029third\u0085fourth"
    response = api(researcher).post(
        f"/api/v1/campaigns/{rating.slug}/prompts/",
        [{"id": "u1", "text": text}, {"id": 2, "text": "two", "gold": 4}],
        format="json",
    )
    assert response.status_code == 201, response.content
    assert dict(rating.prompts.values_list("external_id", "text")) == {"r0": "one", "r1": "two", "u1": text, "2": "two"}


@pytest.mark.parametrize(
    "binarization, message",
    [
        ({"1": 1, "01": 0, "4": 1}, "'1' and '01' are both 1: give each value once."),
        ({"²": 1}, "'²': 1 is not of the form value → 0 or 1."),  # int("²") raised: a 500
    ],
)
def test_a_binarization_map_with_a_value_given_twice_is_refused(researcher, api, unchanged, binarization, message):
    unchanged()
    response = api(researcher).post(
        "/api/v1/campaigns/", {"title": "x", "schema": "rating", "binarization": binarization}, format="json"
    )
    error = assert_error(response, 400, "invalid")
    assert error["fields"] == {"binarization": [message]}


def test_a_binarization_change_with_a_value_given_twice_is_refused(rating, researcher, api, unchanged):
    unchanged()
    response = api(researcher).patch(
        f"/api/v1/campaigns/{rating.slug}/", {"binarization": {"3": 1, "03": 0}}, format="json"
    )
    error = assert_error(response, 400, "invalid")
    assert error["fields"] == {"binarization": ["'3' and '03' are both 3: give each value once."]}
    rating.refresh_from_db()
    assert rating.binarization == BINARIZATION
