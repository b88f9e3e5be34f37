"""The dashboard in headless Chromium.

``test_the_dashboard_shows_new_numbers_without_a_reload``: real everything: the page is served by a
live server, the labels come from a separate web-side process (production settings, Redis), the
snapshots from a real Celery worker.

``test_the_dashboard_sorts_flags_outliers_and_draws_the_full_audit``: labels through the real
service path in this process, the task bodies run here (``enqueued`` stands in for the broker), the
page served by a live server; checks what the page draws (Chart.js instances, the tables) against the
snapshots.
"""

import os
import random

import pytest

from annotation import services
from annotation.models import Lease
from audits.models import AuditSnapshot
from audits.tasks import audit_full_task, audit_refresh_task
from tests.audits.live.live import NO_SWEEP, CeleryWorker, Submitter, wait_for
from tests.helpers import page_problems, share_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.services
def test_the_dashboard_shows_new_numbers_without_a_reload(
    chromium, live_server, client, researcher, make_campaign, services_redis, workdir, tmp_path
):
    from playwright.sync_api import expect

    worker = CeleryWorker(services_redis, workdir, **NO_SWEEP)
    worker.start()
    submitter = Submitter(services_redis)
    try:
        campaign = make_campaign(40, k=3)
        client.force_login(researcher)
        context = chromium.new_context()
        share_session(context, client, live_server.url)
        page = context.new_page()
        problems = page_problems(page, http=True)
        page.goto(f"{live_server.url}/audits/{campaign.slug}/")
        expect(page.locator("#freshness")).to_have_text("No labels yet.", timeout=10_000)
        page.evaluate("window.__sameDocument = 42")

        submitter.ask(cmd="submit", campaign=campaign.pk, n=30, workers=8)
        expect(page.locator("#audited-labels")).to_have_text("30", timeout=20_000)
        snapshot = AuditSnapshot.objects.get(campaign=campaign, kind="quick", watermark=30)
        ln = snapshot.data["level_noise"]
        expected = "undefined" if ln is None else f"{ln:.4f}"
        expect(page.locator('[data-number="level_noise"]')).to_have_text(expected)
        expect(page.locator("#progress-text")).to_contain_text("30 of 120 labels")
        expect(page.locator("#workers-body tr")).to_have_count(8)

        # More labels: the numbers move again, still in the same document.
        submitter.ask(cmd="submit", campaign=campaign.pk, n=20, workers=8)
        expect(page.locator("#audited-labels")).to_have_text("50", timeout=20_000)
        # The full audit lands too: its downloads appear and the accuracy chart is drawn.
        wait_for(
            lambda: AuditSnapshot.objects.filter(campaign=campaign, kind="full").exists(),
            timeout=30,
            what="a full audit",
        )
        expect(page.locator("#download-json")).to_be_visible(timeout=10_000)
        assert page.evaluate("window.__sameDocument") == 42, "the page reloaded"
        assert page.evaluate("typeof Chart") == "function"
        assert page.evaluate("Object.keys(Chart.instances).length") >= 2
        page.screenshot(
            path=os.environ.get("CHORUS_DASHBOARD_SCREENSHOT", str(tmp_path / "dashboard.png")), full_page=True
        )
        assert not problems, problems  # no CSP violation, no script error
    finally:
        submitter.stop()
        worker.stop()


# --- sorting, the outlier flag, the full audit's charts ------------------------------------------

# (external id, labels wanted, probability of answering against the prompt's gold label). "bad" labels
# first, every prompt: it has the most labels (top of the table's default order) and the lowest accuracy.
CROWD = [("bad", 40, 0.9), ("g1", 36, 0.0), ("g2", 34, 0.05), ("g3", 32, 0.1), ("g4", 30, 0.1), ("g5", 26, 0.15)]
# Chart.js instances by canvas id: type, axis titles, dataset types and lengths (JSON-safe).
CHARTS_JS = """() => Object.fromEntries(Object.values(Chart.instances).map(c => [c.canvas.id, {
  type: c.config.type,
  x: c.options.scales.x && c.options.scales.x.title.display ? c.options.scales.x.title.text : null,
  y: c.options.scales.y && c.options.scales.y.title.display ? c.options.scales.y.title.text : null,
  labels: (c.data.labels || []).length,
  datasets: c.data.datasets.map(d => ({type: d.type || c.config.type, label: d.label, n: d.data.length,
    values: d.data.filter(v => v !== null && (typeof v !== "object" || v.y !== null)).length}))
}]))"""
# One Chart.js instance by its canvas id.
CHART_JS = "(id => Object.values(Chart.instances).find(c => c.canvas.id === id))"
NAMES = {
    "level_noise": "LN",
    "pattern_noise_orig": "PN orig",
    "pattern_noise_mod": "PN mod",
    "system_noise_orig": "SN orig",
    "system_noise_mod": "SN mod",
    "residual": "residual",
}


def _label_the_campaign(campaign):
    """Through the real lease and submit path: "bad" labels every prompt, nearly always against its
    gold label; then the others, in turn, until each has its labels (or nothing is left for it)."""
    rng = random.Random(7)
    gold = dict(campaign.prompts.values_list("pk", "gold"))
    crowd = [
        (services.worker_get_or_create(channel="sim", external_id=name), wanted, error) for name, wanted, error in CROWD
    ]
    done = {worker.pk: 0 for worker, _, _ in crowd}

    def label(worker, error):
        lease = services.lease_acquire(campaign=campaign, worker=worker)
        if not isinstance(lease, Lease):
            return False
        value = 1 - gold[lease.prompt_id] if rng.random() < error else gold[lease.prompt_id]
        services.label_submit(lease_id=lease.pk, worker=worker, value=value, client_token=f"b{lease.pk}")
        done[worker.pk] += 1
        return True

    (bad, wanted, error), others = crowd[0], crowd[1:]
    while done[bad.pk] < wanted and label(bad, error):
        pass
    assert done[bad.pk] == wanted
    active = list(others)
    while active:
        active = [(w, wanted, error) for w, wanted, error in active if done[w.pk] < wanted and label(w, error)]
    return done


def _column(page, index):
    """The column's values: a cell's value, without the detail on its second line (interval, N)."""
    return page.locator("#workers-body tr").evaluate_all(
        f"rows => rows.map(r => (r.children[{index}].querySelector('.value') || r.children[{index}]).textContent)"
    )


def _detail(page, index):
    return page.locator("#workers-body tr").evaluate_all(
        f"rows => rows.map(r => (r.children[{index}].querySelector('.detail') || {{textContent: ''}}).textContent)"
    )


def _number(cell):
    return float(cell.split()[0]) if cell.strip() not in ("", "—") else None


def test_the_dashboard_sorts_flags_outliers_and_draws_the_full_audit(
    page, live_server, client, researcher, make_campaign, enqueued
):
    from playwright.sync_api import expect

    campaign = make_campaign(40, k=5)
    done = _label_the_campaign(campaign)
    n_labels = campaign.labels.count()
    assert n_labels == sum(done.values()) > 180
    audit_refresh_task.run(campaign.pk)  # the quick run only, for now
    assert AuditSnapshot.objects.get(campaign=campaign, kind="quick").watermark == n_labels

    client.force_login(researcher)
    share_session(page.context, client, live_server.url)
    problems = page_problems(page, http=True)
    page.goto(f"{live_server.url}/audits/{campaign.slug}/")
    expect(page.locator("#audited-labels")).to_have_text(str(n_labels), timeout=10_000)
    expect(page.locator("#workers-body tr")).to_have_count(len(CROWD))
    # No full audit yet: only the history chart, no accuracy, no flag, nothing in the agreement table.
    assert sorted(page.evaluate(CHARTS_JS)) == ["chart-history"]
    assert page.locator("#workers-body .flag-outlier").count() == 0
    for chart_id in ("chart-accuracy", "chart-scatter", "chart-min-noise", "chart-max-prompts"):  # said, not blank
        expect(page.locator(f'.chart-empty[data-chart="{chart_id}"]')).to_contain_text("Waiting for the full audit")
    expect(page.locator('.chart-empty[data-chart="chart-history"]')).to_be_hidden()
    expect(page.locator("#agreement-body")).to_have_text("Computed by the full audit.")
    page.evaluate("window.__sameDocument = 42")

    # The full audit lands; the page picks it up on its next poll.
    audit_full_task.run(campaign.pk)
    full = AuditSnapshot.objects.get(campaign=campaign, kind="full")
    report = full.data
    assert full.watermark == n_labels
    expect(page.locator("#download-json")).to_be_visible(timeout=10_000)
    page.wait_for_function("() => Object.keys(Chart.instances).length >= 7", timeout=10_000)

    # --- the outlier flag: exactly the worker whose Wilson interval lies below the pooled accuracy
    pooled = report["accuracy_summary"]["pooled_accuracy"]
    accuracy = {row["worker"]: row for row in report["accuracy"]}
    assert accuracy["sim:bad"]["ci_wilson"][1] < pooled, (accuracy["sim:bad"], pooled)  # the data make it an outlier
    assert all(row["ci_wilson"][1] >= pooled for name, row in accuracy.items() if name != "sim:bad")
    flagged = page.locator("#workers-body tr", has=page.locator(".flag-outlier"))
    expect(flagged).to_have_count(1)
    expect(flagged.locator("td").first).to_have_text("sim:bad")
    row = accuracy["sim:bad"]
    expect(flagged.locator("td.flags")).to_have_text(
        f"outlier: agrees with the others on {row['accuracy'] * 100:.0f} % of {row['n_scored']} prompts; its 95 % "
        f"interval ends at {row['ci_wilson'][1]:.2f}, below the crowd's {pooled:.2f}"
    )
    assert row["accuracy"] < 0.5 and page.locator("#workers-body .flag-outlier").count() == 1
    assert page.locator("#workers-body .flag-straight-lining").count() == 0  # nobody here answers one thing
    # gold exists: accuracy against it stands next to the agreement with the others
    expect(page.locator("th.gold-only")).to_be_visible()
    gold = {r["worker"]: r for r in report["accuracy_gold"]}
    shown_gold = dict(zip(_column(page, 0), zip(_column(page, 4), _detail(page, 4))))
    assert shown_gold == {name: (f"{r['accuracy']:.3f}", f" (N = {r['n_scored']})") for name, r in gold.items()}
    expect(page.locator("#min-scored")).to_have_text(str(report["accuracy_summary"]["min_scored_for_power"]))
    assert report["accuracy_summary"]["min_scored_for_power"] == 10  # 40 prompts: the floor

    # --- sorting by a column header: descending on the first click, ascending on the second
    expect(page.locator("#workers-body tr td:nth-child(4)").first).not_to_have_text("—")
    workers = _column(page, 0)
    labels = [int(c) for c in _column(page, 1)]
    assert labels == sorted(labels, reverse=True) and workers[0] == "sim:bad"  # the default order: most labels first
    acc = [_number(c) for c in _column(page, 3)]
    assert None not in acc and acc != sorted(acc, reverse=True), acc  # "bad" on top: not sorted by accuracy
    button = page.locator('button.sort[data-sort="accuracy"]')
    button.click()
    acc_desc = [_number(c) for c in _column(page, 3)]
    assert acc_desc == sorted(acc, reverse=True) and acc_desc != acc, acc_desc
    assert _column(page, 0)[-1] == "sim:bad"
    button.click()
    acc_asc = [_number(c) for c in _column(page, 3)]
    assert acc_asc == sorted(acc) and acc_asc != acc_desc, acc_asc
    assert _column(page, 0)[0] == "sim:bad"
    # The cell values are the report's, row by row.
    shown = dict(zip(_column(page, 0), zip(_column(page, 3), _detail(page, 3))))
    for name, row in accuracy.items():
        lo, hi = row["ci_wilson"]
        expected = (f"{row['accuracy']:.3f}", f" (N = {row['n_scored']}) 95 %: {lo:.3f}–{hi:.3f}")
        assert shown[name] == expected, (name, shown[name], row)
    # Another column: worker names, ascending first (text), then descending.
    page.locator('button.sort[data-sort="worker"]').click()
    assert _column(page, 0) == sorted(workers)
    page.locator('button.sort[data-sort="worker"]').click()
    assert _column(page, 0) == sorted(workers, reverse=True)
    page.locator('button.sort[data-sort="labels"]').click()  # a new key: descending
    assert [int(c) for c in _column(page, 1)] == sorted(labels, reverse=True)
    page.locator('button.sort[data-sort="labels"]').click()
    assert [int(c) for c in _column(page, 1)] == sorted(labels)
    # The order survives the next poll (the table is redrawn from new data every 2 s).
    page.wait_for_timeout(2500)
    assert [int(c) for c in _column(page, 1)] == sorted(labels)

    # --- the charts: every one of the full audit's, with labelled axes and non-empty data
    charts = page.evaluate(CHARTS_JS)
    assert sorted(charts) == sorted(
        [
            "chart-history",
            "chart-accuracy",
            "chart-scatter",
            "chart-min-noise",
            "chart-min-prompts",
            "chart-max-noise",
            "chart-max-prompts",
        ]
    ), sorted(charts)
    for chart_id, c in charts.items():
        assert c["x"] and c["y"], (chart_id, c)  # both axes titled
        assert c["datasets"] and all(d["n"] for d in c["datasets"]), (chart_id, c)
    for kind, word in (("min", "at least"), ("max", "at most")):
        sweep = report["filters"][kind]
        noise = charts[f"chart-{kind}-noise"]
        assert (noise["type"], noise["x"], noise["y"]) == (
            "line",
            f"threshold t: keep workers with {word} t labels",
            "noise (SD)",
        )
        assert [d["label"] for d in noise["datasets"]] == list(NAMES.values())
        assert all(d["n"] == len(sweep["threshold"]) for d in noise["datasets"])
        assert noise["datasets"][0]["values"] > 0  # LN is defined at some threshold
        prompts = charts[f"chart-{kind}-prompts"]
        assert (prompts["type"], prompts["x"], prompts["y"]) == ("bar", "threshold t", "prompts")
        assert len(prompts["datasets"]) == len(sweep["prompt_distribution"]) >= 2
        assert all(d["n"] == len(sweep["threshold"]) for d in prompts["datasets"])
        # the pair shares its threshold axis: same bounds, same ticks, same place on the page
        axes = page.evaluate(f"""() => ['noise', 'prompts'].map(k => {{
            const x = {CHART_JS}('chart-{kind}-' + k).scales.x;
            return [x.min, x.max, x.ticks.map(t => t.value), Math.round(x.left), Math.round(x.right)];
        }})""")
        assert axes[0] == axes[1], axes
        assert axes[0][:2] == [sweep["threshold"][0] - 0.5, sweep["threshold"][-1] + 0.5]
    bars = charts["chart-accuracy"]
    assert (bars["type"], bars["x"], bars["y"]) == ("bar", "worker (most labels first)", "leave-one-out accuracy")
    assert bars["labels"] == len(report["accuracy"]) == len(CROWD)
    assert [(d["type"], d["n"]) for d in bars["datasets"]] == [("bar", len(CROWD)), ("line", len(CROWD))]
    order = page.evaluate(f"() => {CHART_JS}('chart-accuracy').data.labels")
    per_worker = dict(zip(workers, labels))
    assert [per_worker[name] for name in order] == sorted(labels, reverse=True), order  # most labels first
    scatter = charts["chart-scatter"]
    reg = report["noise_vs_accuracy"]["loo_mode"]["system_noise_orig"]  # the selected noise
    assert reg["slope"] is not None, reg
    assert (scatter["x"], scatter["y"]) == ("SN orig on the worker's prompts", "leave-one-out accuracy")
    assert [(d["type"], d["label"]) for d in scatter["datasets"]] == [("scatter", "workers"), ("line", "least squares")]
    assert scatter["datasets"][0]["n"] == len(CROWD) and scatter["datasets"][1]["n"] == 2
    expect(page.locator("#regression-text")).to_contain_text(f"n = {reg['n']} workers")
    # The points are the report's workers (per-worker noise, accuracy); the line is the fit at their ends.
    points, line = page.evaluate(f"() => {CHART_JS}('chart-scatter').data.datasets.map(d => d.data)")
    noise = {row["worker"]: row["system_noise_orig"] for row in report["worker_noise"]}
    assert sorted((p["worker"], p["x"], p["y"]) for p in points) == sorted(
        (name, noise[name], row["accuracy"]) for name, row in accuracy.items()
    )
    assert [end["x"] for end in line] == [min(noise.values()), max(noise.values())]
    for end in line:
        assert abs(end["y"] - (reg["intercept"] + reg["slope"] * end["x"])) < 1e-9
    # Another noise in the selector: the scatter is redrawn on it, its x axis says which.
    page.select_option("#scatter-noise", "level_noise")
    x_title = f"() => {CHART_JS}('chart-scatter').options.scales.x.title.text"
    assert page.evaluate(x_title) == "LN on the worker's prompts"
    page.select_option("#scatter-noise", "system_noise_orig")
    # The min filter's LN line is the sweep's, point by point.
    ln = page.evaluate(f"() => {CHART_JS}('chart-min-noise').data.datasets[0].data")
    assert [(p["x"], p["y"]) for p in ln] == list(
        zip(report["filters"]["min"]["threshold"], report["filters"]["min"]["level_noise"])
    )
    history = charts["chart-history"]
    assert history["x"] == "labels audited" and len(history["datasets"]) == 8 and history["datasets"][0]["values"] == 1
    # α and AC1 of the full audit, dashed beside the six numbers (dashboard_agreement.js): one point, at its labels
    assert [d["label"] for d in history["datasets"][6:]] == ["α (nominal)", "AC1"]
    drawn = page.evaluate(f"() => {CHART_JS}('chart-history').data.datasets.slice(6).map(d => d.data)")
    agreement = report["agreement"]
    assert drawn == [
        [{"x": n_labels, "y": agreement["alpha_nominal"]["value"]}],
        [{"x": n_labels, "y": agreement["gwet_ac1"]["value"]}],
    ]

    # --- the agreement table: human names, the value (3 decimals), its reading and what it was computed on.
    # Binary labels: every alpha level equals the nominal one and AC2 equals AC1, so α, AC1, the κs and a note.
    ag = report["agreement"]
    for k in ("alpha_ordinal", "alpha_interval"):
        assert ag[k]["value"] == pytest.approx(ag["alpha_nominal"]["value"], abs=1e-12)
    for k in (k for k in ag if k.startswith("gwet_ac2")):
        assert ag[k]["value"] == pytest.approx(ag["gwet_ac1"]["value"], abs=1e-12)
    from audits.engine.glossary import agreement_name, agreement_reading

    # α and AC1, then the κs (Cohen's mean over pairs of workers sharing 10 prompts; Fleiss' on the modal k)
    expected = [
        (
            agreement_name(k),
            f"{ag[k]['value']:.3f}" if ag[k]["value"] is not None else f"undefined: {ag[k]['reason']}",
            agreement_reading(ag[k]["value"]) or "—",
            f"{ag[k]['n_units']} prompts, {ag[k]['n_labels']} labels",
        )
        for k in ("alpha_nominal", "gwet_ac1", "cohen_kappa_mean", "fleiss_kappa")
    ]
    assert ag["fleiss_kappa"]["value"] is not None
    rows = page.locator("#agreement-body tr").evaluate_all(
        "rows => rows.map(r => [...r.children].map(td => td.textContent))"
    )
    assert [tuple(r) for r in rows] == expected
    assert ag["alpha_nominal"]["n_units"] == 40 and ag["alpha_nominal"]["n_labels"] == n_labels
    expect(page.locator("#agreement-note")).to_contain_text("two values")

    assert page.evaluate("window.__sameDocument") == 42, "the page reloaded"
    assert not problems, problems  # no CSP violation, no script error
