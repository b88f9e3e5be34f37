"""The instrument card on WordSim-353 imported as a campaign: its numbers against independent
computations, the exports against the page, the bootstrap on request, reproducibility against the
engine, and who may see it."""

import json
import re
from unittest import mock

import krippendorff
import numpy as np
import pytest
from django.template.defaultfilters import floatformat
from django.urls import reverse

from annotation import services as annotation_services
from annotation.selectors import invariant_violations
from audits.engine.instrument import reproducibility
from audits.engine.intervals import alpha_interval, noise_intervals
from audits.models import BootstrapRun
from audits.selectors import campaign_label_matrix
from audits.services import bootstrap_compute, bootstrap_request
from audits.tasks import bootstrap_task
from tests.audits.live.card_campaigns import rating_campaign, wordsim_campaign, wordsim_ratings
from tests.helpers import messages_of, signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def bootstrap_enqueued():
    """The bootstrap task's enqueues (run ids), recorded instead of sent: the edge of the process."""
    calls = []
    with mock.patch.object(bootstrap_task, "apply_async", lambda args=(), **kw: calls.append(args[0])):
        yield calls


@pytest.fixture
def wordsim(researcher):
    return wordsim_campaign(researcher)


def card_page(client, campaign, **query):
    response = client.get(reverse("audit_card", args=[campaign.slug]), query)
    assert response.status_code == 200, response.content[:500]
    return response


def export(client, campaign, fmt, **query):
    response = client.get(reverse("audit_card_export", args=[campaign.slug, fmt]), query)
    assert response.status_code == 200
    assert f"{campaign.slug}-instrument-card.{fmt}" in response["Content-Disposition"]
    return response.content.decode()


def field(html: str, name: str) -> str:
    match = re.search(rf'data-field="{name}">([^<]*)<', html)
    assert match, name
    return match.group(1)


def test_wordsim_card_shows_the_datasets_precision_and_alpha(client, researcher, wordsim):
    """353 pairs × 13 raters: mean item SD 1.7, SD of item SDs 0.54, interval α 0.59 (on the
    integer-rounded ratings 1.718, 0.545, 0.587), each equal to an independent computation."""
    assert invariant_violations(campaign=wordsim, complete=True) == []
    dense = np.array(list(wordsim_ratings().values()), dtype=float)  # prompts × raters
    item_sd = dense.std(axis=1, ddof=1)
    client.force_login(researcher)
    response = card_page(client, wordsim)
    card = response.context["card"]
    precision = card["precision"]
    assert (precision["kind"], precision["n_items"], card["n_labels"]) == ("sd", 353, 4589)
    assert precision["mean"] == pytest.approx(item_sd.mean(), rel=1e-12)
    assert precision["sd_of_dispersion"] == pytest.approx(item_sd.std(ddof=1), rel=1e-12)
    alpha = card["repeatability"]["alpha"]
    assert alpha["level"] == "interval"
    assert alpha["value"] == pytest.approx(
        krippendorff.alpha(reliability_data=dense.T, level_of_measurement="interval")
    )
    assert round(precision["mean"], 1) == 1.7
    assert precision["sd_of_dispersion"] == pytest.approx(0.54, abs=0.01)
    assert alpha["value"] == pytest.approx(0.59, abs=0.01)
    html = response.content.decode()
    assert field(html, "precision_mean") == "1.718" and field(html, "precision_sd") == "0.545"
    assert field(html, "alpha") == "0.587"
    assert field(html, "labels_audited") == "4589" and field(html, "workers_labeling") == "13"
    assert html.count("<svg") == 1 and 'role="img"' in html  # one labels-per-prompt count: no box plot
    # The procedure: the instructions' hash, the k rule, the resolution and the variance components.
    import hashlib

    assert card["procedure"]["instructions_sha256"] == hashlib.sha256(wordsim.instructions.encode()).hexdigest()
    assert card["procedure"]["k_rule"] == "k=13"
    resolution = card["resolution"]["prompts"]
    assert resolution["k"] == 13 and resolution["df"] == 353 * 12
    within = np.sqrt((item_sd**2).mean())  # equal k: the pooled SD is the root mean item variance
    assert resolution["within_sd"] == pytest.approx(within)
    from scipy import stats

    assert resolution["least_significant"] == pytest.approx(stats.t.ppf(0.975, 353 * 12) * within * np.sqrt(2 / 13))
    vc = card["variance_components"]
    assert vc["worker"] + vc["prompt"] + vc["residual"] == pytest.approx(vc["total"])


def test_the_exports_agree_with_the_page(client, researcher, wordsim):
    client.force_login(researcher)
    page = card_page(client, wordsim)
    card, html = page.context["card"], page.content.decode()
    data = json.loads(export(client, wordsim, "json"))
    assert data["precision"]["mean"] == card["precision"]["mean"]
    assert data["repeatability"]["alpha"]["value"] == card["repeatability"]["alpha"]["value"]
    assert data["resolution"] == card["resolution"] and data["variance_components"] == card["variance_components"]
    assert [n["value"] for n in data["noise"]["numbers"]] == [n["value"] for n in card["noise"]["numbers"]]
    markdown = export(client, wordsim, "md")
    assert f"- **Mean:** {floatformat(card['precision']['mean'], 3)}" in markdown
    assert f"- **SD:** {floatformat(card['precision']['sd_of_dispersion'], 3)}" in markdown
    assert f"- **Krippendorff's α (interval):** {field(html, 'alpha')}" in markdown
    assert card["procedure"]["instructions_sha256"] in markdown
    for n in card["noise"]["numbers"]:
        assert f"| {n['name']} | {floatformat(n['value'], 4)} |" in markdown
    standalone = export(client, wordsim, "html")
    for name in ("precision_mean", "precision_sd", "alpha", "resolution_prompts", "vc_worker", "vc_residual"):
        assert field(standalone, name) == field(html, name), name
    # Self-contained and printable: no scripts, no forms, nothing fetched, no link out of the page.
    assert "<script" not in standalone and "<form" not in standalone and "<link" not in standalone
    assert "{#" not in html and "{#" not in standalone and "{%" not in markdown  # no template text leaks
    targets = re.findall(r'\b(?:src|href)\s*=\s*"([^"]*)"', standalone)
    assert all(t.startswith("#") for t in targets), targets
    assert "<style>" in standalone and ".instrument-card" in standalone and "@media print" in standalone
    assert standalone.count("<svg") == html.count("<svg") == 1
    response = client.get(reverse("audit_card_export", args=[wordsim.slug, "html"]))
    assert "script-src" not in response["Content-Security-Policy"]  # default-src 'none': no script at all
    assert "default-src 'none'" in response["Content-Security-Policy"]
    assert client.get(reverse("audit_card_export", args=[wordsim.slug, "pdf"])).status_code == 404


def test_the_bootstrap_runs_on_request_shows_progress_and_its_intervals(
    client, researcher, wordsim, bootstrap_enqueued
):
    client.force_login(researcher)
    url = reverse("audit_card_bootstrap", args=[wordsim.slug])
    poll = reverse("audit_card_bootstrap_data", args=[wordsim.slug])
    assert client.get(poll).json()["latest"] is None
    with mock.patch("django.db.transaction.on_commit", lambda f, *a, **k: f()):
        response = client.post(url)
        again = client.post(url, follow=True)
    assert response.status_code == 302 and response.url.endswith("/card/#bootstrap")
    run = BootstrapRun.objects.get(campaign=wordsim)
    assert bootstrap_enqueued == [run.pk]  # the second press found the run waiting: not queued again
    assert any("already waiting" in m for m in messages_of(again))
    assert client.get(poll).json()["latest"]["status"] == "pending"

    seen = {}
    real_alpha = alpha_interval

    def alpha_spy(*args, **kwargs):  # between the two passes: the first half of the progress is written
        seen.update(BootstrapRun.objects.filter(pk=run.pk).values("status", "done_resamples").get())
        seen["poll"] = client.get(poll).json()["latest"]
        return real_alpha(*args, **kwargs)

    with mock.patch("audits.services.bootstrap.alpha_interval", alpha_spy):
        bootstrap_compute(run_id=run.pk)
    assert seen["status"] == "running" and seen["done_resamples"] == 500
    assert seen["poll"]["status"] == "running" and seen["poll"]["done_resamples"] == 500
    run.refresh_from_db()
    assert (run.status, run.done_resamples, run.watermark) == ("done", 1000, 4589)
    assert bootstrap_compute(run_id=run.pk).status == "done"  # a duplicate delivery changes nothing

    matrix, _ = campaign_label_matrix(campaign=wordsim)
    expected_alpha = alpha_interval(matrix, alpha_level="interval", n_resamples=1000, seed=0)
    assert run.data["alpha"]["interval"] == list(expected_alpha.bounds)
    expected_noise = noise_intervals(matrix, n_resamples=1000, seed=0).to_dict()
    assert run.data["noise"]["level_noise"] == expected_noise["level_noise"]
    lo, hi = run.data["alpha"]["interval"]
    assert lo < run.data["alpha"]["estimate"] < hi

    feed = client.get(poll).json()
    assert feed["latest"]["status"] == "done" and feed["shown"]["id"] == run.pk
    page = card_page(client, wordsim)
    html = page.content.decode()
    assert feed["display"]["alpha"] == f"{floatformat(lo, 3)} – {floatformat(hi, 3)}"
    assert f'data-interval="alpha">{feed["display"]["alpha"]}<' in html
    for n in page.context["card"]["noise"]["numbers"]:
        shown = feed["display"]["noise"][n["key"]]
        assert f'data-interval="{n["key"]}">{shown}<' in html
        bounds = run.data["noise"][n["key"]]
        assert bounds[0] <= n["value"] <= bounds[1], n["key"]
    assert feed["display"]["about"].startswith("95 % percentile intervals from 1,000 resamples (seed 0)")
    assert feed["display"]["alpha"] in export(client, wordsim, "md")


def test_a_broker_outage_never_fails_the_page(client, researcher, wordsim):
    client.force_login(researcher)
    with (
        mock.patch.object(bootstrap_task, "apply_async", side_effect=ConnectionError("broker down")),
        mock.patch("django.db.transaction.on_commit", lambda f, *a, **k: f()),
    ):
        response = client.post(reverse("audit_card_bootstrap", args=[wordsim.slug]), follow=True)
    assert response.status_code == 200
    assert BootstrapRun.objects.get(campaign=wordsim).status == "pending"


def test_a_run_without_labels_fails_with_its_reason(client, make_campaign):
    campaign = make_campaign(5)
    run, created = bootstrap_request(campaign=campaign)
    assert created and bootstrap_compute(run_id=run.pk).status == "failed"
    run.refresh_from_db()
    assert run.error == "no audited labels yet: nothing to resample" and run.data is None
    client.force_login(campaign.owner)
    html = card_page(client, campaign).content.decode()
    assert "No audited labels yet" in html and "bootstrap-button" not in html  # nothing to resample yet
    latest = client.get(reverse("audit_card_bootstrap_data", args=[campaign.slug])).json()["latest"]
    assert (latest["status"], latest["error"]) == ("failed", run.error)


def test_reproducibility_against_a_second_campaign_equals_the_engines(client, researcher, make_user, wordsim):
    second = rating_campaign(researcher, wordsim_ratings(offset=0.5), title="WordSim again")
    unrelated = rating_campaign(researcher, {"x1": [1, 2], "x2": [3, 3]}, title="Other prompts")
    stranger = rating_campaign(make_user("stranger"), wordsim_ratings(offset=-0.5), title="Not yours")
    client.force_login(researcher)
    page = card_page(client, wordsim)
    assert [c.slug for c in page.context["choices"]] == [second.slug]  # shares prompts, and is visible
    assert unrelated.slug not in page.content.decode() and stranger.slug not in page.content.decode()
    page = card_page(client, wordsim, compare=second.slug)
    shown = page.context["card"]["reproducibility"]
    a, _ = campaign_label_matrix(campaign=wordsim)
    b, _ = campaign_label_matrix(campaign=second)
    engine = reproducibility(a, b, level="interval", top=10).to_dict()
    assert {k: shown[k] for k in engine} == engine
    assert shown["n_common"] == 353 and shown["spearman_means"] > 0.95 and len(shown["moved"]) == 10
    html = page.content.decode()
    assert field(html, "spearman_means") == floatformat(engine["spearman_means"], 3)
    assert json.loads(export(client, wordsim, "json", compare=second.slug))["reproducibility"] == shown
    assert f"Against **{second.title}**" in export(client, wordsim, "md", compare=second.slug)
    for slug in (stranger.slug, unrelated.slug, "no-such-campaign"):
        assert client.get(reverse("audit_card", args=[wordsim.slug]), {"compare": slug}).status_code == 404


def test_permissions(client, researcher, make_user, make_campaign):
    campaign = make_campaign(3)
    collaborator, other = make_user("collab"), make_user("other")
    annotation_services.campaign_share(campaign=campaign, username=collaborator.username)
    urls = [
        reverse("audit_card", args=[campaign.slug]),
        reverse("audit_card_bootstrap_data", args=[campaign.slug]),
        *(reverse("audit_card_export", args=[campaign.slug, fmt]) for fmt in ("md", "json", "html")),
    ]
    post = reverse("audit_card_bootstrap", args=[campaign.slug])
    for url in urls:
        assert signed_in(researcher).get(url).status_code == 200, url
        assert signed_in(collaborator).get(url).status_code == 200, url
        assert signed_in(other).get(url).status_code == 404, url
        # the polled feed answers 404 to a lost session; pages send to the sign-in page
        assert client.get(url).status_code == (404 if url.endswith("bootstrap.json") else 302), url
    assert signed_in(other).post(post).status_code == 404
    assert signed_in(researcher).get(post).status_code == 405
    assert client.post(post).status_code == 302 and not BootstrapRun.objects.exists()
    assert signed_in(collaborator).post(post).status_code == 302
    assert BootstrapRun.objects.get(campaign=campaign).requested_by == collaborator
