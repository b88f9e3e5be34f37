"""Labels out of the API: the researcher's export (paginated, filtered, streamed) and a worker's own labels."""

import csv
import io
import json
from datetime import timedelta

import pandas as pd
import pytest
from django.utils import timezone

from annotation import services
from annotation.exporting import pseudonym
from annotation.models import Label
from tests.helpers import assert_error, csv_export_typed, label_all

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def labeled(make_campaign, make_worker):
    """A campaign of 3 prompts fully labeled (k=2) by two workers; prompt p0's text is a formula."""
    campaign = make_campaign(0, launch=False, k=2)
    rows = [{"id": "p0", "text": '=HYPERLINK("http://evil")', "gold": 1, "group": "@SUM(A1)"}]
    rows += [{"id": f"p{i}", "text": f"Statement {i}", "gold": i % 2} for i in (1, 2)]
    services.prompts_import(
        campaign=campaign, data="".join(json.dumps(r) + "\n" for r in rows).encode(), filename="x.jsonl"
    )
    campaign = services.campaign_transition(campaign=campaign, action="launch")
    workers = [make_worker(), make_worker()]
    for n, worker in enumerate(workers):
        label_all(campaign, worker, value=n)
    return campaign, workers


def test_labels_are_paginated_in_label_order(labeled, researcher, api):
    campaign, _ = labeled
    client = api(researcher)
    page = client.get(f"/api/v1/campaigns/{campaign.slug}/labels/?page_size=4").json()
    rows = page["results"]
    assert len(rows) == 4 and page["next"]
    rest = client.get(page["next"]).json()
    assert rest["next"] is None
    rows += rest["results"]
    assert [r["label_id"] for r in rows] == list(Label.objects.order_by("id").values_list("id", flat=True))
    first = Label.objects.select_related("worker", "prompt").order_by("id").first()
    assert rows[0]["worker"] == first.worker.public_id and rows[0]["prompt"] == first.prompt.external_id
    assert rows[0]["gold"] == first.prompt.gold and rows[0]["value"] == first.value


def test_labels_filtered_by_worker_prompt_and_time(labeled, researcher, api):
    campaign, workers = labeled
    client = api(researcher)
    url = f"/api/v1/campaigns/{campaign.slug}/labels/"
    mine = client.get(url, {"worker": workers[1].public_id}).json()["results"]
    assert (
        len(mine) == 3 and {r["worker"] for r in mine} == {workers[1].public_id} and {r["value"] for r in mine} == {1}
    )
    assert {r["worker"] for r in client.get(url, {"prompt": "p2"}).json()["results"]} == {w.public_id for w in workers}
    assert client.get(url, {"since": (timezone.now() + timedelta(minutes=1)).isoformat()}).json()["results"] == []
    assert len(client.get(url, {"since": "2000-01-01T00:00:00Z"}).json()["results"]) == 6
    assert "since" in assert_error(client.get(url, {"since": "yesterday"}), 400, "invalid")["fields"]
    assert_error(client.get(url, {"cursor": "garbage"}), 404, "not_found")


def test_streamed_files_take_the_same_filters(labeled, researcher, api):
    campaign, workers = labeled
    client = api(researcher)
    base = f"/api/v1/campaigns/{campaign.slug}"
    worker = workers[1].public_id
    listed = client.get(f"{base}/labels/?worker={worker}&prompt=p2").json()["results"]
    assert [(r["worker"], r["prompt"]) for r in listed] == [(worker, "p2")]
    streamed = list(
        csv.DictReader(
            io.StringIO(b"".join(client.get(f"{base}/labels.csv?worker={worker}&prompt=p2").streaming_content).decode())
        )
    )
    assert [(r["worker"], r["prompt"], r["label_id"]) for r in streamed] == [(worker, "p2", str(listed[0]["label_id"]))]
    lines = b"".join(client.get(f"{base}/labels.jsonl?worker={worker}").streaming_content).decode().splitlines()
    assert len(lines) == 3 and {json.loads(line)["worker"] for line in lines} == {worker}
    future = (timezone.now() + timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    empty = b"".join(client.get(f"{base}/labels.jsonl", {"since": future}).streaming_content)
    assert empty == b""
    assert_error(client.get(f"{base}/labels.csv?since=yesterday"), 400, "invalid")


def test_pseudonymized_labels_name_nobody(labeled, researcher, api):
    campaign, workers = labeled
    rows = api(researcher).get(f"/api/v1/campaigns/{campaign.slug}/labels/?pseudonymize=1").json()["results"]
    assert {r["worker"] for r in rows} == {pseudonym(w.public_id) for w in workers}
    assert not any(w.public_id in json.dumps(rows) for w in workers)


def test_csv_export_streams_and_defuses_formulas(labeled, researcher, api):
    campaign, workers = labeled
    response = api(researcher).get(f"/api/v1/campaigns/{campaign.slug}/labels.csv?pseudonymize=1")
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert f"{campaign.slug}-labels.csv" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert len(rows) == 6
    formula_rows = [r for r in rows if r["prompt"] == "p0"]
    assert {r["prompt_text"] for r in formula_rows} == {'\'=HYPERLINK("http://evil")'}
    assert {r["group"] for r in formula_rows} == {"'@SUM(A1)"}
    assert {r["worker"] for r in rows} == {pseudonym(w.public_id) for w in workers}


def test_jsonl_export_keeps_the_data_as_is(labeled, researcher, api):
    campaign, workers = labeled
    response = api(researcher).get(f"/api/v1/campaigns/{campaign.slug}/labels.jsonl")
    rows = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert len(rows) == 6 and {r["worker"] for r in rows} == {w.public_id for w in workers}
    assert {r["prompt_text"] for r in rows if r["prompt"] == "p0"} == {'=HYPERLINK("http://evil")'}


def test_the_api_streams_parquet_to_a_token_client_with_the_csv_filters(labeled, researcher, api):
    campaign, workers = labeled
    token = api().post("/api/v1/auth/token/", {"username": researcher.username, "password": "pw-for-tests-123"})
    client = api()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.json()['token']}")
    base = f"/api/v1/campaigns/{campaign.slug}/labels"
    query = {"worker": workers[1].public_id, "pseudonymize": "yes"}
    response = client.get(f"{base}.parquet", query)
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "application/vnd.apache.parquet"
    frame = pd.read_parquet(io.BytesIO(b"".join(response.streaming_content)))
    assert set(frame.loc[frame["prompt"] == "p0", "group"]) == {"@SUM(A1)"}  # not defused: data for programs
    as_csv = b"".join(client.get(f"{base}.csv", query).streaming_content).decode()
    assert len(frame) == 3 and set(frame["worker"]) == {pseudonym(workers[1].public_id)}
    pd.testing.assert_frame_equal(frame, csv_export_typed(as_csv))


@pytest.mark.parametrize(
    "flag, pseudonymized",
    [
        ("1", True),
        ("TRUE", True),
        ("Yes", True),
        ("on", True),
        ("0", False),
        ("False", False),
        ("no", False),
        ("OFF", False),
        ("", False),
        (None, False),
    ],
)
@pytest.mark.parametrize("path", ["labels/", "labels.csv", "labels.jsonl"])
def test_the_pseudonymize_flag_follows_the_web_rules(labeled, researcher, api, path, flag, pseudonymized):
    campaign, workers = labeled
    query = {} if flag is None else {"pseudonymize": flag}
    response = api(researcher).get(f"/api/v1/campaigns/{campaign.slug}/{path}", query)
    assert response.status_code == 200
    body = b"".join(response.streaming_content).decode() if response.streaming else response.content.decode()
    assert all((w.public_id in body) is not pseudonymized for w in workers)
    assert all((pseudonym(w.public_id) in body) is pseudonymized for w in workers)


@pytest.mark.parametrize("flag", ["t", "y", "f", "2", "ture"])
@pytest.mark.parametrize("path", ["labels/", "labels.csv", "labels.jsonl", "labels.parquet"])
def test_an_unknown_pseudonymize_flag_is_a_400(labeled, researcher, api, path, flag):
    campaign, _ = labeled
    response = api(researcher).get(f"/api/v1/campaigns/{campaign.slug}/{path}", {"pseudonymize": flag})
    error = assert_error(response, 400, "invalid")
    assert error["message"].startswith("pseudonymize must be 1, true, yes or on")
    assert error["fields"] == {"pseudonymize": [error["message"]]}


def test_a_worker_sees_only_their_own_labels_and_no_gold(labeled, api):
    campaign, workers = labeled
    client = api(workers[0].user)
    rows = client.get(f"/api/v1/campaigns/{campaign.slug}/my-labels/").json()["results"]
    assert [r["label_id"] for r in rows] == list(
        Label.objects.filter(worker=workers[0]).order_by("id").values_list("id", flat=True)
    )
    assert all(set(r) == {"label_id", "prompt", "value", "created_at"} and r["value"] == 0 for r in rows)
    for path in ("labels/", "labels.csv", "labels.jsonl", "labels.parquet", ""):
        assert_error(client.get(f"/api/v1/campaigns/{campaign.slug}/{path}"), 404, "not_found")
