"""Alternative ground truths on the dashboard: asked for by a researcher, computed by a Celery task,
shown beside the other audits and carried by the report downloads."""

import json
from unittest import mock

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from audits import render_markdown
from audits import services as audit_services
from audits.engine.truths import ground_truths
from audits.models import AuditSnapshot, GroundTruthRun
from tests.audits.live.labeling import label_one_each

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def audited(make_campaign):
    """Four prompts with three labels each, every label from a new worker, both audits computed."""
    campaign = make_campaign(4, k=3)
    label_one_each(campaign, [1, 0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0])
    audit_services.audit_refresh(campaign_id=campaign.pk)
    audit_services.audit_full(campaign_id=campaign.pk)
    return campaign


def ask(client, campaign, *methods):
    return client.post(reverse("audit_ground_truths", args=[campaign.slug]), {"methods": list(methods)}, follow=True)


def feed(client, campaign):
    return client.get(reverse("audit_dashboard_data", args=[campaign.slug])).json()


def test_a_request_is_queued_once_and_computed_by_the_task(
    client, audited, researcher, enqueued, django_capture_on_commit_callbacks
):
    client.force_login(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        page = ask(client, audited, "majority", "dawid_skene", "mace")
    assert "Ground truths by Majority vote, Dawid–Skene, MACE requested" in page.content.decode()
    run = GroundTruthRun.objects.get(campaign=audited)
    assert (run.status, run.methods, run.requested_by) == ("pending", ["majority", "dawid_skene", "mace"], researcher)
    assert ("audits.ground_truths", run.pk, None) in enqueued
    again = ask(client, audited, "glad")
    assert "already waiting" in again.content.decode() and GroundTruthRun.objects.count() == 1
    assert feed(client, audited)["ground_truths"]["latest"]["status"] == "pending"

    audit_services.ground_truths_compute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "done" and run.watermark == 12 and run.computed_at is not None
    from audits.selectors import campaign_label_matrix

    matrix, _ = campaign_label_matrix(campaign=audited)
    assert run.data == json.loads(json.dumps(ground_truths(matrix, methods=run.methods)))  # the engine's, as stored
    shown = feed(client, audited)["ground_truths"]["shown"]
    assert [row["method"] for row in shown["rows"]] == ["majority", "dawid_skene", "mace"]
    assert shown["rows"][1]["changes"] == run.data["dawid_skene"]["changes"]
    skill = {entry["worker"]: entry["skill"] for entry in run.data["dawid_skene"]["workers"]}
    workers = feed(client, audited)["workers"]
    assert workers and all(row["ds_skill"] == pytest.approx(skill[row["worker"]]) for row in workers)
    # Computing a finished run again changes nothing.
    assert audit_services.ground_truths_compute(run_id=run.pk).computed_at == run.computed_at


def test_the_feeds_etag_changes_when_the_ground_truths_do(client, audited, researcher, enqueued):
    client.force_login(researcher)
    url = reverse("audit_dashboard_data", args=[audited.slug])
    etag = client.get(url)["ETag"]
    assert client.get(url, HTTP_IF_NONE_MATCH=etag).status_code == 304
    ask(client, audited, "majority")
    pending = client.get(url, HTTP_IF_NONE_MATCH=etag)
    assert pending.status_code == 200
    audit_services.ground_truths_compute(run_id=GroundTruthRun.objects.get().pk)
    assert client.get(url, HTTP_IF_NONE_MATCH=pending["ETag"]).status_code == 200


def test_the_report_downloads_carry_the_latest_ground_truths(client, audited, researcher, enqueued):
    client.force_login(researcher)
    full = AuditSnapshot.objects.get(campaign=audited, kind="full")
    ask(client, audited, "majority", "dawid_skene")
    run = GroundTruthRun.objects.get()
    audit_services.ground_truths_compute(run_id=run.pk)
    run.refresh_from_db()
    report = client.get(reverse("audit_report", args=[audited.slug, "json"])).json()
    assert report["ground_truths"] == run.data and report["ground_truths_on"]["watermark"] == 12
    assert {k: v for k, v in report.items() if not k.startswith("ground_truths")} == full.data
    markdown = client.get(reverse("audit_report", args=[audited.slug, "md"])).content.decode()
    assert "## Alternative ground truths" in markdown
    assert markdown == render_markdown(report)


def test_bad_requests_are_refused_and_write_nothing(client, audited, researcher, make_user, enqueued):
    client.force_login(researcher)
    for methods in ([], ["majority", "oracle"]):
        page = ask(client, audited, *methods)
        assert "Tick one or more methods: Majority vote, Dawid–Skene, GLAD, MACE." in page.content.decode()
    with pytest.raises(ValidationError, match="not oracle"):
        audit_services.ground_truths_request(campaign=audited, methods=["oracle"], by=researcher)
    assert not GroundTruthRun.objects.exists()
    client.force_login(make_user("stranger"))
    url = reverse("audit_ground_truths", args=[audited.slug])
    assert client.post(url, {"methods": ["majority"]}).status_code == 404
    assert client.get(url).status_code in (404, 405)
    assert not GroundTruthRun.objects.exists()


def test_an_engine_error_marks_the_run_failed_and_the_dashboard_says_why(client, audited, researcher, enqueued):
    client.force_login(researcher)
    ask(client, audited, "majority")
    with mock.patch("audits.services.truths.ground_truths", side_effect=ValueError("no labels to infer from")):
        audit_services.ground_truths_compute(run_id=GroundTruthRun.objects.get().pk)
    shown = feed(client, audited)["ground_truths"]["shown"]
    assert (shown["status"], shown["error"], shown["rows"]) == ("failed", "no labels to infer from", [])
    # A later request is queued (the failed one is not waiting any more).
    ask(client, audited, "majority")
    assert GroundTruthRun.objects.filter(status="pending").count() == 1
