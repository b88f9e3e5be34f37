"""The audit endpoints: what the dashboard shows, snapshot history, reports, recompute; managers only."""

import io

import pandas as pd
import pyarrow.parquet as pq
import pytest

from annotation import services
from audits.models import AuditSnapshot
from audits.services import audit_full, audit_refresh
from tests.helpers import assert_error

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def audited(make_campaign, make_worker):
    campaign = make_campaign(6, k=3)
    workers = [make_worker() for _ in range(3)]
    for n, worker in enumerate(workers):
        while not isinstance(lease := services.lease_acquire(campaign=campaign, worker=worker), services.NothingLeft):
            value = (lease.prompt_id + n) % 2
            services.label_submit(lease_id=lease.pk, worker=worker, value=value, client_token=f"t{lease.pk}")
    audit_refresh(campaign_id=campaign.pk)
    audit_full(campaign_id=campaign.pk)
    return campaign, workers


def test_the_audit_as_the_dashboard_sees_it(audited, researcher, api):
    campaign, _ = audited
    body = api(researcher).get(f"/api/v1/campaigns/{campaign.slug}/audit/").json()
    assert body["campaign"]["slug"] == campaign.slug
    assert body["status"]["labels"] == 18 and body["status"]["behind"] == 0
    assert body["quick"]["watermark"] == 18 and body["quick"]["kind"] == "quick"
    assert body["full"]["watermark"] == 18


def test_the_audit_carries_an_etag_and_answers_304_while_unchanged(audited, researcher, api):
    campaign, _ = audited
    client = api(researcher)
    url = f"/api/v1/campaigns/{campaign.slug}/audit/"
    first = client.get(url)
    assert first.status_code == 200 and first["ETag"]
    unchanged = client.get(url, HTTP_IF_NONE_MATCH=first["ETag"])
    assert unchanged.status_code == 304 and unchanged.content == b""
    # the workers' rows name their flags; the full report's agreement rows their coefficients
    body = first.json()
    assert all(isinstance(row["flags"], list) and "straight_lining" in row for row in body["workers"])
    assert {row["key"] for row in body["full"]["agreement"]} >= {"alpha_nominal", "gwet_ac1"}
    audit_full(campaign_id=campaign.pk)  # the same labels: the same snapshot, nothing new
    assert client.get(url, HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 304
    campaign.title = "Renamed"
    campaign.save()
    assert client.get(url, HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 200


def test_snapshot_history_and_report(audited, researcher, api):
    campaign, _ = audited
    client = api(researcher)
    base = f"/api/v1/campaigns/{campaign.slug}/audit"
    full = client.get(f"{base}/snapshots/?kind=full").json()["results"]
    assert [s["watermark"] for s in full] == [18] and full[0]["kind"] == "full"
    quick = client.get(f"{base}/snapshots/?kind=quick").json()["results"]
    assert [s["watermark"] for s in quick] == [18] and quick[0]["kind"] == "quick"
    assert client.get(f"{base}/snapshots/").json()["results"] == quick  # quick by default
    # The kind's former name still answers: scripts written before the rename keep working.
    assert client.get(f"{base}/snapshots/?kind=cheap").json()["results"] == quick
    stored = AuditSnapshot.objects.get(campaign=campaign, kind="full")
    assert client.get(f"{base}/report.json").json() == stored.data
    markdown = client.get(f"{base}/report.md")
    assert markdown["Content-Type"].startswith("text/markdown") and campaign.slug in markdown.content.decode()
    assert "kind" in assert_error(client.get(f"{base}/snapshots/?kind=everything"), 400, "invalid")["fields"]


def test_the_report_as_parquet_holds_every_value_of_the_json_report(audited, researcher, api):
    campaign, _ = audited
    response = api(researcher).get(f"/api/v1/campaigns/{campaign.slug}/audit/report.parquet")
    assert response.status_code == 200 and response["Content-Type"] == "application/vnd.apache.parquet"
    table = pq.read_table(io.BytesIO(response.content))
    assert {field.name: str(field.type) for field in table.schema} == {
        "section": "string",
        "path": "string",
        "number": "double",
        "text": "string",
        "flag": "bool",
    }
    report = AuditSnapshot.objects.get(campaign=campaign, kind="full").data
    frame = pd.read_parquet(io.BytesIO(response.content)).set_index("path")
    assert frame.loc["/n_labels", "number"] == report["n_labels"] == 18
    assert frame.loc["/computed_on/campaign", "text"] == campaign.slug
    assert frame.loc["/accuracy/0/worker", "text"] == report["accuracy"][0]["worker"]
    assert list(frame["section"].unique()) == [key for key in report if report[key] not in ({}, [])]


def test_no_report_before_a_full_audit(make_campaign, researcher, api):
    campaign = make_campaign(2)
    assert_error(api(researcher).get(f"/api/v1/campaigns/{campaign.slug}/audit/report.json"), 404, "not_found")


def test_recompute_is_queued(audited, researcher, api):
    campaign, _ = audited
    response = api(researcher).post(f"/api/v1/campaigns/{campaign.slug}/audit/recompute/")
    assert response.status_code == 202 and isinstance(response.json()["queued"], bool)


def test_workers_never_see_the_audit(audited, api):
    campaign, workers = audited
    client = api(workers[0].user)
    for path in ("", "snapshots/", "report.json", "report.md", "report.parquet"):
        assert_error(client.get(f"/api/v1/campaigns/{campaign.slug}/audit/{path}"), 404, "not_found")
    assert_error(client.post(f"/api/v1/campaigns/{campaign.slug}/audit/recompute/"), 404, "not_found")
