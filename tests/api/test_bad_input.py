"""Issue 10 through the REST API: each bad input is refused in the error shape
``{"error": {"code", "message", "fields"}}``, naming what is wrong, and the database is left exactly as
it was. The service-level and web-page checks are in tests/annotation/test_bad_input.py."""
import io
import json

import pytest

from annotation import services
from annotation.models import Label, Lease, Slot
from tests.api.test_malformed_inputs import unchanged  # noqa: F401 (a fixture: every table's row count)
from tests.api.test_worker_loop import assert_error

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]

BINARIZATION = {"1": 0, "2": 0, "3": 1, "4": 1}


@pytest.fixture
def rating(researcher):
    campaign = services.campaign_create(
        owner=researcher, title="Rating", schema="rating", scale_min=1, scale_max=4, k=2, binarization=BINARIZATION
    )
    services.prompts_import(campaign=campaign, data=b'{"id": "r0", "text": "one"}\n', filename="seed.jsonl")
    return services.campaign_transition(campaign=campaign, action="launch")


def upload(client, campaign, data: bytes, name: str):
    file = io.BytesIO(data)
    file.name = name
    return client.post(f"/api/v1/campaigns/{campaign.slug}/prompts/", {"file": file}, format="multipart")


@pytest.mark.parametrize("value", ["true", "false"])
def test_a_rating_label_of_true_is_refused_and_the_lease_kept(rating, make_user, api, unchanged, value):  # noqa: F811
    client = api(make_user())
    lease_id = client.post(f"/api/v1/campaigns/{rating.slug}/next-task/").json()["lease"]["id"]
    unchanged()
    response = client.generic("POST", f"/api/v1/leases/{lease_id}/submit/",
                              f'{{"value": {value}, "client_token": "t"}}', content_type="application/json")
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


FILES = {
    # name: (file name, content, {line: [messages]})
    "rating gold true": ("p.jsonl", b'{"id": "x1", "text": "t", "gold": true}\n',
                         {"1": ["bad gold value: The label must be one of 1, 2, 3, 4; got true, which is not a rating."]}),
    "an id that is an object": ("p.jsonl", b'{"id": "ok", "text": "t"}\n{"id": {"a": 1}, "text": "t"}\n',
                                {"2": ["the id must be a string or a whole number, not an object"]}),
    "an id that is a list": ("p.jsonl", b'{"id": [1, 2], "text": "t"}\n',
                             {"1": ["the id must be a string or a whole number, not a list"]}),
    "a repeated column": ("p.csv", b"id,text,gold,gold\nx1,t,1,2\n",
                          {"1": ["column 'gold' appears more than once in the header"]}),
    "a line number past a U+2028": ("p.jsonl", '{"id": "a", "text": "x\u2028y"}\n{"id": "b"}\n'.encode(),
                                    {"2": ["missing field 'text'"]}),
}


@pytest.mark.parametrize("case", list(FILES))
def test_a_bad_prompt_file_is_refused_naming_its_line(case, rating, researcher, api, unchanged):  # noqa: F811
    name, data, lines = FILES[case]
    unchanged()
    error = assert_error(upload(api(researcher), rating, data, name), 400, "bad_prompt_file")
    assert error["fields"] == {"lines": lines}


def test_a_json_list_of_rows_with_an_object_id_is_refused(rating, researcher, api, unchanged):  # noqa: F811
    unchanged()
    response = api(researcher).post(f"/api/v1/campaigns/{rating.slug}/prompts/",
                                    [{"id": "a", "text": "t"}, {"id": {"a": 1}, "text": "t"}], format="json")
    error = assert_error(response, 400, "bad_prompt_file")
    assert error["fields"] == {"lines": {"2": ["the id must be a string or a whole number, not an object"]}}


def test_a_json_list_of_rows_keeps_unicode_line_separators(rating, researcher, api):
    """The API writes the rows as JSONL with ensure_ascii=False: a raw U+2028 split the row in two."""
    text = "first\u2028second\u2029third\u0085fourth"
    response = api(researcher).post(f"/api/v1/campaigns/{rating.slug}/prompts/",
                                    [{"id": "u1", "text": text}, {"id": 2, "text": "two", "gold": 4}], format="json")
    assert response.status_code == 201, response.content
    assert dict(rating.prompts.values_list("external_id", "text")) == {"r0": "one", "u1": text, "2": "two"}


@pytest.mark.parametrize("binarization, message", [
    ({"1": 1, "01": 0, "4": 1}, "'1' and '01' are both 1: give each value once."),
    ({"²": 1}, "'²': 1 is not of the form value → 0 or 1."),  # int("²") raised: a 500
])
def test_a_binarization_map_with_a_value_given_twice_is_refused(researcher, api, unchanged, binarization, message):  # noqa: F811
    unchanged()
    response = api(researcher).post("/api/v1/campaigns/", {"title": "x", "schema": "rating",
                                                           "binarization": binarization}, format="json")
    error = assert_error(response, 400, "invalid")
    assert error["fields"] == {"binarization": [message]}


def test_a_binarization_change_with_a_value_given_twice_is_refused(rating, researcher, api, unchanged):  # noqa: F811
    unchanged()
    response = api(researcher).patch(f"/api/v1/campaigns/{rating.slug}/",
                                     {"binarization": {"3": 1, "03": 0}}, format="json")
    error = assert_error(response, 400, "invalid")
    assert error["fields"] == {"binarization": ["'3' and '03' are both 3: give each value once."]}
    rating.refresh_from_db()
    assert rating.binarization == BINARIZATION
