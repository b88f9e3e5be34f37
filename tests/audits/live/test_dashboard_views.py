"""The dashboard's pages: who may see them, what the JSON feed says, the report downloads."""

import json
from unittest import mock

import pytest
from django.urls import reverse

from annotation.selectors import campaign_progress
from audits import render_markdown, selectors
from audits import services as audit_services
from audits.conf import audit_setting
from audits.engine.glossary import NUMBERS
from audits.models import AuditSnapshot
from tests.audits.live.labeling import label_one_each as _labels
from tests.clock import later

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def audited(make_campaign):
    campaign = make_campaign(4, k=3)
    _labels(campaign, [1, 0, 1, 1, 1, 0, 0, 1])
    audit_services.audit_refresh(campaign_id=campaign.pk)
    audit_services.audit_full(campaign_id=campaign.pk)
    return campaign


def test_only_owners_collaborators_and_staff_see_the_dashboard(client, audited, researcher, make_user):
    page = reverse("audit_dashboard", args=[audited.slug])
    feed = reverse("audit_dashboard_data", args=[audited.slug])
    assert client.get(page).status_code == 302  # sign in first
    assert client.get(feed).status_code == 404
    stranger, colleague, staff = make_user(), make_user(), make_user(is_staff=True)
    audited.collaborators.add(colleague)
    client.force_login(stranger)
    assert client.get(page).status_code == 404 and client.get(feed).status_code == 404
    assert client.get(reverse("audit_report", args=[audited.slug, "json"])).status_code == 404
    for user in (researcher, colleague, staff):
        client.force_login(user)
        assert client.get(page).status_code == 200
        assert client.get(feed).status_code == 200


def test_the_page_has_no_inline_script_and_passes_data_by_attributes(client, audited, researcher):
    client.force_login(researcher)
    html = client.get(reverse("audit_dashboard", args=[audited.slug])).content.decode()
    assert f'data-url="{reverse("audit_dashboard_data", args=[audited.slug])}"' in html
    assert "vendor/chartjs/chart.umd.min.js" in html and "js/dashboard.js" in html
    for chunk in html.split("<script")[1:]:
        assert chunk.lstrip().startswith("src="), chunk[:80]
        assert chunk.split(">", 1)[1].startswith("</script>")
    assert "style=" not in html and "onclick" not in html


def test_the_feed_has_the_numbers_history_workers_and_the_full_report_once(client, audited, researcher):
    client.force_login(researcher)
    url = reverse("audit_dashboard_data", args=[audited.slug])
    d = client.get(url).json()
    quick = AuditSnapshot.objects.get(campaign=audited, kind="quick")
    assert d["quick"]["watermark"] == 8 and d["quick"]["level_noise"] == quick.data["level_noise"]
    progress = campaign_progress(campaign=audited)  # the annotation app's own count, from the prompts
    assert d["quick"]["progress"] == {
        "n_prompts": 4,
        "k": 3,
        "k_max": None,
        "slots": None,
        "labels": 8,
        "labels_wanted": 12,
        "prompts_complete": progress.prompts_complete,
        "percent": 66.67,
    }
    assert d["status"]["stale"] is False and d["status"]["behind"] == 0
    assert [p["watermark"] for p in d["history"]] == [8]
    assert sum(w["labels"] for w in d["workers"]) == 8 and len(d["workers"]) == 8
    assert d["ambiguous"] and d["ambiguous"][0]["labels"]
    report = d["full"]["report"]
    assert set(report["filters"]) == {"min", "max"} and "accuracy" in report and "agreement" in report
    again = client.get(url, {"have_full": d["full"]["watermark"]}).json()
    assert "report" not in again["full"] and again["full"]["watermark"] == 8


def test_the_report_downloads_are_the_engine_report_and_its_markdown(client, audited, researcher):
    client.force_login(researcher)
    full = AuditSnapshot.objects.get(campaign=audited, kind="full")
    as_json = client.get(reverse("audit_report", args=[audited.slug, "json"]))
    assert as_json["Content-Disposition"].endswith('-audit-8.json"')
    assert json.loads(as_json.content) == full.data
    assert as_json.json()["n_labels"] == 8 and as_json.json()["computed_on"]["watermark"] == 8
    as_md = client.get(reverse("audit_report", args=[audited.slug, "md"]))
    assert as_md.content.decode() == render_markdown(full.data)
    as_parquet = client.get(reverse("audit_report", args=[audited.slug, "parquet"]))
    assert as_parquet["Content-Disposition"].endswith('-audit-8.parquet"')
    assert as_parquet.content == selectors.report_parquet(full.data)
    assert client.get(reverse("audit_report", args=[audited.slug, "pdf"])).status_code == 404


def test_recompute_now_queues_a_full_run(client, audited, researcher, enqueued):
    client.force_login(researcher)
    response = client.post(reverse("audit_recompute", args=[audited.slug]))
    assert response.status_code == 302
    assert ("audits.full", audited.pk, 0) in enqueued
    assert client.get(reverse("audit_recompute", args=[audited.slug])).status_code == 405


def test_the_campaign_page_links_to_its_dashboard(client, audited, researcher):
    client.force_login(researcher)
    html = client.get(reverse("campaign_detail", args=[audited.slug])).content.decode()
    assert f'href="{reverse("audit_dashboard", args=[audited.slug])}"' in html


def test_an_unchanged_feed_answers_304_without_a_body_and_a_new_snapshot_200(client, audited, researcher):
    client.force_login(researcher)
    url = reverse("audit_dashboard_data", args=[audited.slug])
    first = client.get(url, {"have_full": 8})
    assert first.status_code == 200 and first["ETag"].startswith('"')
    tag = first["ETag"]
    again = client.get(url, {"have_full": 8}, HTTP_IF_NONE_MATCH=tag)
    assert again.status_code == 304 and again.content == b"" and again["ETag"] == tag
    assert "no-store" in again["Cache-Control"]  # never cached by the browser: the page revalidates itself
    # the tag covers what the client already has: without the full report it is another response
    assert client.get(url, {"have_full": -1}, HTTP_IF_NONE_MATCH=tag).status_code == 200
    # a new label: not audited yet (the status says "recomputing"), then a new snapshot
    _labels(audited, [1])
    behind = client.get(url, {"have_full": 8}, HTTP_IF_NONE_MATCH=tag)
    assert behind.status_code == 200 and behind.json()["status"]["behind"] == 1 and behind["ETag"] != tag
    audit_services.audit_refresh(campaign_id=audited.pk)
    fresh = client.get(url, {"have_full": 8}, HTTP_IF_NONE_MATCH=behind["ETag"])
    assert fresh.status_code == 200 and fresh.json()["quick"]["watermark"] == 9
    assert client.get(url, {"have_full": 8}, HTTP_IF_NONE_MATCH=fresh["ETag"]).status_code == 304


def test_the_feed_turns_stale_by_the_clock_alone(client, audited, researcher):
    client.force_login(researcher)
    url = reverse("audit_dashboard_data", args=[audited.slug])
    _labels(audited, [0])  # a label the audit has not seen (its task is only recorded here)
    tag = client.get(url)["ETag"]
    assert client.get(url, HTTP_IF_NONE_MATCH=tag).status_code == 304
    with later(audit_setting("STALE_AFTER") + 1):
        stale = client.get(url, HTTP_IF_NONE_MATCH=tag)
    assert stale.status_code == 200 and stale.json()["status"]["stale"] is True


def test_a_changed_feed_reads_the_audit_status_once(client, audited, researcher):
    client.force_login(researcher)
    url = reverse("audit_dashboard_data", args=[audited.slug])
    with mock.patch.object(selectors, "audit_status", wraps=selectors.audit_status) as status:
        response = client.get(url, HTTP_IF_NONE_MATCH='"an older tag"')
    assert response.status_code == 200 and status.call_count == 1  # for the ETag and the feed alike
    assert response.json()["status"]["labels"] == 8 and response.json()["status"]["behind"] == 0


def test_the_feed_names_the_six_numbers_as_the_glossary_does(client, audited, researcher):
    client.force_login(researcher)
    numbers = client.get(reverse("audit_dashboard_data", args=[audited.slug])).json()["numbers"]
    assert [n["key"] for n in numbers] == [m.key for m in NUMBERS]
    assert [n["name"] for n in numbers] == [m.name for m in NUMBERS]
    assert [n["short"] for n in numbers] == ["LN", "PN orig", "PN mod", "SN orig", "SN mod", "residual"]


def test_the_feed_names_the_agreement_coefficients_with_their_reading_and_sample_size(client, audited, researcher):
    client.force_login(researcher)
    full = client.get(reverse("audit_dashboard_data", args=[audited.slug])).json()["full"]
    rows = {row["key"]: row for row in full["agreement"]}
    alpha = rows["alpha_nominal"]
    assert alpha["name"] == "Krippendorff's α (nominal)" and rows["gwet_ac1"]["name"] == "Gwet's AC1"
    stored = AuditSnapshot.objects.get(campaign=audited, kind="full").data["agreement"]["alpha_nominal"]
    counts = [n for n in (p.labels.count() for p in audited.prompts.all()) if n >= 2]  # alpha pairs labels of a prompt
    assert alpha["value"] == stored["value"] and alpha["n_units"] == stored["n_units"] == len(counts)
    assert alpha["n_labels"] == sum(counts) and alpha["n_categories"] == 2
    assert alpha["reading"] in ("reliable", "tentative", "not reliable")
    # Binary answers: the rows that would repeat these two are left out, and the note says why.
    report = AuditSnapshot.objects.get(campaign=audited, kind="full").data["agreement"]
    assert {"alpha_ordinal", "gwet_ac2_linear"} <= set(report)  # the report keeps them all
    assert set(rows) == {"alpha_nominal", "gwet_ac1", "cohen_kappa_mean", "fleiss_kappa"}
    assert "two values" in full["agreement_note"]
    assert rows["fleiss_kappa"]["name"] == "Fleiss' κ"
    assert rows["fleiss_kappa"]["value"] == report["fleiss_kappa"]["value"]


def test_the_guide_explains_every_number_and_the_dashboard_links_to_it(client, audited, researcher):
    from django.utils.html import escape

    from audits.engine.glossary import AGREEMENT, NUMBERS

    guide = reverse("audit_guide")
    assert guide == "/audits/guide/"
    html = client.get(guide).content.decode()  # public: it shows no campaign's data
    for m in NUMBERS:
        assert f'id="{m.anchor}"' in html and escape(m.definition) in html
    for name, _ in AGREEMENT.values():
        assert escape(name) in html
    assert "α ≥ 0.8</strong> reliable" in html and "0.667 to 0.8</strong>" in html
    assert "min( 60, max( 10, ⌈<var>m</var> / 4⌉ ) )" in html
    assert "<script" not in html and "style=" not in html
    client.force_login(researcher)
    page = client.get(reverse("audit_dashboard", args=[audited.slug])).content.decode()
    for m in NUMBERS:
        assert f'href="{guide}#{m.anchor}"' in page and escape(m.direction) in page and escape(m.typical) in page
    assert f'href="{guide}#agreement"' in page and f'href="{guide}#workers"' in page


def test_alpha_and_ac1_over_time_one_point_per_full_audit_in_the_feed_and_the_snapshots_api(
    client, audited, researcher
):
    from rest_framework.test import APIClient

    _labels(audited, [1, 0, 0, 1])  # new labels, and a second full audit on them
    audit_services.audit_full(campaign_id=audited.pk)
    fulls = list(AuditSnapshot.objects.filter(campaign=audited, kind="full").order_by("watermark"))
    assert [s.watermark for s in fulls] == [8, 12]
    client.force_login(researcher)
    feed = client.get(reverse("audit_dashboard_data", args=[audited.slug])).json()
    history = feed["agreement_history"]
    assert [p["watermark"] for p in history] == [8, 12]
    for point, snapshot in zip(history, fulls):
        ag = snapshot.data["agreement"]
        # binary answers: α nominal (the interval α would be the same number)
        assert point["alpha_level"] == "nominal" and point["alpha"] == ag["alpha_nominal"]["value"]
        assert point["ac1"] == ag["gwet_ac1"]["value"]
    assert history[0]["alpha"] != history[1]["alpha"]  # the labels moved it
    assert len(feed["history"]) >= 1 and "alpha" not in feed["history"][0]  # the six numbers' series unchanged

    api = APIClient()
    api.force_authenticate(researcher)
    url = reverse("api:audit-snapshots", args=[audited.slug])
    rows = api.get(url, {"kind": "full"}).json()["results"]
    assert [r["agreement"] for r in rows] == [
        {k: p[k] for k in ("alpha", "alpha_level", "ac1")} for p in reversed(history)
    ]
    assert all(r["agreement"] is None for r in api.get(url).json()["results"])  # quick runs compute no α


def test_the_agreement_point_of_a_rating_is_the_interval_alpha():
    from audits.selectors import agreement_point

    report = {
        "alpha_nominal": {"value": 0.2, "n_categories": 4},
        "alpha_interval": {"value": 0.6, "n_categories": 4},
        "gwet_ac1": {"value": 0.3},
    }
    assert agreement_point(report) == {"alpha": 0.6, "alpha_level": "interval", "ac1": 0.3}
    assert agreement_point(None) == {"alpha": None, "alpha_level": "nominal", "ac1": None}
