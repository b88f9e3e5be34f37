"""The study's tables and figures in the product (issue 13): the compare table (Table 2), a campaign's
groups side by side, and Figs. 4–6 — their numbers against the engine run independently, a naive
re-implementation, and scipy; and who may see them."""

import csv
import io
import json

import numpy as np
import pytest
from django.urls import reverse
from scipy import stats

from annotation import services
from audits import services as audit_services
from audits.engine.accuracy import gold_accuracy, loo_accuracy
from audits.engine.figures import TABLE_KEYS, table_row
from audits.engine.filters import volume_sweep
from audits.engine.label_files import read_labels
from audits.engine.noise import NOISE_KEYS
from audits.engine.report import full_report
from audits.selectors import campaign_label_matrix
from audits.selectors.figures import TABLE_COLUMNS, figures_data
from tests.audits import naive
from tests.audits.conftest import dataset, tgcsr_labels
from tests.audits.live.free_text import free_text_campaign
from tests.audits.live.labeling import label_one_each
from tests.helpers import signed_in

pytestmark = [pytest.mark.django_db]

# A TG-CSR sheet without a missing cell (every one of the six annotators labels every pair), and
# the smallest: 224 pairs, 1,344 labels through the services.
SHEET = "dental-cleaning-tf"


def _tgcsr_campaign(owner, name: str):
    """One TG-CSR sheet as a campaign, labeled through the real services: its pairs as prompts (the
    category as the group), annotators A–F as workers answering as in the sheet; then both audits."""
    path = dataset("mcs-noise-audit", "csv", f"{name}.csv")
    with open(path, newline="", encoding="utf-8-sig") as fh:
        rows = list(csv.DictReader(fh))
    answers = {f"q{r['questionID']}-a{r['answerID']}": r for r in rows}
    prompts = "\n".join(
        json.dumps({"id": pid, "text": f"Pair {pid}", "group": r["category"]}) for pid, r in answers.items()
    )
    campaign = services.campaign_create(owner=owner, title=f"TG-CSR {name}", k=6)
    services.prompts_import(campaign=campaign, data=prompts.encode(), filename=f"{name}.jsonl")
    campaign = services.campaign_transition(campaign=campaign, action="launch")
    ext = dict(campaign.prompts.values_list("pk", "external_id"))
    for rater in "ABCDEF":
        worker = services.worker_get_or_create(channel="sim", external_id=f"{name}-{rater}")
        while not isinstance(lease := services.lease_acquire(campaign=campaign, worker=worker), services.NothingLeft):
            value = int(answers[ext[lease.prompt_id]][rater])
            services.label_submit(lease_id=lease.pk, worker=worker, value=value, client_token=f"t{lease.pk}")
    audit_services.audit_refresh(campaign_id=campaign.pk)
    audit_services.audit_full(campaign_id=campaign.pk)
    return campaign


def _labels(m) -> dict:
    """A matrix as the naive implementation's ``{(worker, prompt): value}``."""
    return {(w, p): v for w, p, v in zip(m.worker_ids[m.worker], m.prompt_ids[m.prompt], m.value)}


def _close(got, want, what):
    for k in want:
        if want[k] is None:
            assert got[k] is None, (what, k, got[k])
        else:
            assert got[k] == pytest.approx(want[k], rel=1e-9, abs=1e-12), (what, k, got[k], want[k])


def test_tgcsr_compare_table_and_groups_equal_the_engine_on_the_files(client, researcher, make_campaign, tmp_path):
    sheet = _tgcsr_campaign(researcher, SHEET)
    small = make_campaign(6, k=3, title="A small one")
    label_one_each(small, [1, 0, 1, 1, 1, 0, 0, 1, 1, 1])
    audit_services.audit_full(campaign_id=small.pk)
    client.force_login(researcher)
    url = reverse("audit_compare") + f"?campaigns={sheet.slug},{small.slug}"
    response = client.get(url)
    assert response.status_code == 200
    rows = response.context["rows"]
    assert [r["campaign"].slug for r in rows] == [sheet.slug, small.slug]  # in the order asked
    csv_rows = list(csv.DictReader(io.StringIO(client.get(url + "&format=csv").content.decode())))
    # Each campaign's own report, computed independently: the engine on the sheet's file, and on the
    # small campaign's label matrix.
    matrix = read_labels(tgcsr_labels(tmp_path, SHEET))
    matrices = (matrix, campaign_label_matrix(campaign=small)[0])
    for campaign, row, line, m in zip((sheet, small), rows, csv_rows, matrices):
        want = table_row(full_report(m, sweeps=()).to_dict())
        _close(row["row"], want, campaign.slug)
        assert set(row["row"]) == set(TABLE_KEYS)
        assert row["cells"] == [row["row"][k] for k, _ in TABLE_COLUMNS]
        # … and the six numbers by the naive re-implementation (no shared code).
        by_hand = naive.six_numbers(_labels(m))
        _close(row["row"], {k: by_hand[k] for k in (*NOISE_KEYS, "n_workers", "n_prompts", "n_labels")}, campaign.slug)
        # the CSV says the same, to full precision
        assert line["campaign"] == campaign.slug
        for k in (*(k for k, _ in TABLE_COLUMNS), "mean_others", "mean_gold"):
            assert (line[k] == "") if want[k] is None else float(line[k]) == pytest.approx(want[k], rel=1e-12), k
    # The study's system noise sqrt(LN² + PN_orig²) beside the specification's on the page; last in the CSV
    # (its columns are a contract: the column came after the others).
    header = client.get(url + "&format=csv").content.decode().splitlines()[0].split(",")
    assert header[3:] == [k for k, _ in TABLE_COLUMNS if k != "system_noise_study"] + [
        "mean_others",
        "mean_gold",
        "system_noise_study",
    ]
    keys = [k for k, _ in TABLE_COLUMNS]
    assert keys.index("system_noise_study") == keys.index("system_noise_orig") + 1
    for r in rows:
        by_hand = np.sqrt(r["row"]["level_noise"] ** 2 + r["row"]["pattern_noise_orig"] ** 2)
        assert r["row"]["system_noise_study"] == pytest.approx(by_hand, rel=1e-12)
    row = rows[0]["row"]
    assert row["n_labels"] == 6 * row["n_prompts"] == 6 * 224
    # the study's range for TG-CSR (glossary.REFERENCE): PN_orig 0.38–0.41, α nominal 0.63–0.67
    assert 0.375 <= row["pattern_noise_orig"] <= 0.415
    assert 0.625 <= row["alpha_nominal"] <= 0.675
    assert row["accuracy_gold"] is None and rows[1]["row"]["accuracy_gold"] is not None  # the release has no gold
    html = response.content.decode()
    assert "TG-CSR dental-cleaning-tf" in html and "A small one" in html and "style=" not in html

    # The sheet's groups (its categories): each row equals the engine's full report on that category's labels.
    labels = _labels(matrix)
    page = client.get(reverse("audit_groups", args=[sheet.slug]))
    assert page.status_code == 200
    table = page.context["table"]
    group = matrix.group
    names = sorted(set(group.tolist()))
    assert [r["group"] for r in table["rows"]] == names and len(names) == 9
    _close(table["whole"], table_row(full_report(matrix, sweeps=()).to_dict()), "whole")
    loo = naive.loo(labels)
    cat = {p: g for p, g in zip(matrix.prompt_ids[matrix.prompt], group)}
    for r in table["rows"]:
        sub = matrix.take(group == r["group"])
        _close(r, table_row(full_report(sub, sweeps=()).to_dict()), r["group"])
        # the z-test of the group's pooled accuracy against the rest: Pearson's chi-square of the 2×2 table
        counts = np.zeros((2, 2))
        for (_w, p), outcome in loo.items():
            if outcome in ("correct", "wrong"):
                counts[int(cat[p] != r["group"]), int(outcome == "wrong")] += 1
        chi2, p_value, _, _ = stats.chi2_contingency(counts, correction=False)
        assert r["test_others"]["z"] ** 2 == pytest.approx(chi2, rel=1e-9)
        assert r["test_others"]["p"] == pytest.approx(p_value, rel=1e-9)
        assert r["test_gold"]["z"] is None and r["test_gold"]["reason"]
    html = page.content.decode()
    assert "Physical Entities" in html and "style=" not in html


def _naive_band(x, y, at, level=0.95):
    """The OLS mean-response band in matrix form: se(ŷ₀)² = x₀ᵀ σ²(XᵀX)⁻¹ x₀, t from scipy.stats."""
    X = np.column_stack([np.ones_like(x), x])
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    n = len(x)
    sigma2 = np.sum((y - X @ beta) ** 2) / (n - 2)
    X0 = np.column_stack([np.ones_like(at), at])
    se = np.sqrt(np.einsum("ij,jk,ik->i", X0, sigma2 * np.linalg.inv(X.T @ X), X0))
    t = stats.t.ppf((1 + level) / 2, n - 2)
    fit = X0 @ beta
    return fit, fit - t * se, fit + t * se


def test_figures_band_boxes_and_gold_vs_others(client, researcher, demo):
    campaign, _ = demo
    data = figures_data(campaign=campaign)
    matrix, _ = campaign_label_matrix(campaign=campaign)
    # Fig. 6: every panel with a fit; its line and band equal the naive OLS computation.
    fitted = [r for r in data["regressions"] if r["line"]]
    assert {r["reference"] for r in fitted} == {"loo_mode", "gold"} and len(fitted) >= 8
    for r in fitted:
        x = np.array([p[0] for p in r["points"]])
        y = np.array([p[1] for p in r["points"]])
        assert len(x) == r["fit"]["n"]
        ref = stats.linregress(x, y)
        assert r["fit"]["slope"] == pytest.approx(ref.slope, rel=1e-9)
        assert r["fit"]["intercept"] == pytest.approx(ref.intercept, rel=1e-9, abs=1e-12)
        at = np.array([b[0] for b in r["band"]])
        fit, lo, hi = _naive_band(x, y, at)
        assert at[0] == x.min() and at[-1] == x.max()
        np.testing.assert_allclose([p[1] for p in r["line"]], fit, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose([b[1] for b in r["band"]], lo, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose([b[2] for b in r["band"]], hi, rtol=1e-9, atol=1e-12)
        assert np.all(hi > fit) and np.all(lo < fit)
    # Fig. 5: each box holds the accuracies of the workers the engine's minimum sweep keeps.
    sweep = volume_sweep(matrix, "min")
    for boxes, acc in ((data["boxes"], loo_accuracy(matrix)), (data["boxes_gold"], gold_accuracy(matrix))):
        assert [t for t, _ in boxes] == data["thresholds"] and data["thresholds"][0] == 0 and len(boxes) > 2
        for t, values in boxes:
            kept = matrix.worker_counts >= t
            assert int(kept.sum()) == sweep.at(t)["workers_kept"]
            want = acc.accuracy[kept & (acc.n_scored > 0)]
            assert sorted(values) == pytest.approx(sorted(want.tolist()), rel=1e-12)
            assert len(values) >= 3
    # Fig. 4: one point per worker scored against both.
    both = (loo_accuracy(matrix).n_scored > 0) & (gold_accuracy(matrix).n_scored > 0)
    assert len(data["gold_vs_others"]) == int(both.sum())
    # The page draws them all as inline SVG.
    client.force_login(researcher)
    html = client.get(reverse("audit_figures", args=[campaign.slug])).content.decode()
    assert html.count("<svg") == 2 + 1 + len(data["regressions"])
    assert "<script" not in html.split("<main", 1)[-1].split("</main>")[0] and "style=" not in html


def test_pages_before_the_full_audit_and_without_groups(client, researcher, make_campaign):
    campaign = make_campaign(4, k=3)
    client.force_login(researcher)
    assert "No full audit yet" in client.get(reverse("audit_figures", args=[campaign.slug])).content.decode()
    compare = client.get(reverse("audit_compare") + f"?campaigns={campaign.slug}")
    assert compare.context["rows"][0]["row"] is None and "No full audit yet" in compare.content.decode()
    label_one_each(campaign, [1, 0, 1, 1, 1, 0])
    groups = client.get(reverse("audit_groups", args=[campaign.slug]))
    assert groups.context["table"]["rows"] == [] and "No prompt has a group" in groups.content.decode()
    assert groups.context["table"]["whole"]["n_labels"] == 6


def test_a_campaign_the_user_may_not_see_is_refused_without_leaking(client, researcher, make_campaign, make_user):
    mine = make_campaign(4, k=3, title="Mine")
    theirs = make_campaign(4, k=3, title="Theirs")
    stranger = make_user()
    other = services.campaign_create(owner=stranger, title="Stranger's")
    compare = reverse("audit_compare")
    assert client.get(compare).status_code == 302  # sign in first
    client.force_login(researcher)
    page = client.get(compare)
    assert page.status_code == 200
    assert [c.slug for c in page.context["visible"]] == [mine.slug, theirs.slug]  # sorted by title
    assert "Stranger" not in page.content.decode()
    # Another's campaign, alone or among one's own, is refused exactly as a slug that does not exist.
    refused = [
        client.get(compare + f"?campaigns={other.slug}"),
        client.get(compare + f"?campaigns={mine.slug},{other.slug}"),
        client.get(compare + f"?campaigns={mine.slug}&campaigns={other.slug}&format=csv"),
        client.get(compare + "?campaigns=no-such-campaign"),
    ]
    assert [r.status_code for r in refused] == [404] * 4
    assert len({r.content for r in refused}) == 1
    for name in ("audit_groups", "audit_figures"):
        assert client.get(reverse(name, args=[other.slug])).status_code == 404
        assert client.get(reverse(name, args=[mine.slug])).status_code == 200
    # the stranger sees their own and not ours
    client.force_login(stranger)
    assert client.get(compare + f"?campaigns={other.slug}").status_code == 200
    assert client.get(compare + f"?campaigns={mine.slug}").status_code == 404


def test_the_dashboard_links_the_new_pages(client, researcher, make_campaign):
    campaign = make_campaign(4, k=3)
    client.force_login(researcher)
    html = client.get(reverse("audit_dashboard", args=[campaign.slug])).content.decode()
    for path in (
        reverse("audit_figures", args=[campaign.slug]),
        reverse("audit_groups", args=[campaign.slug]),
        reverse("audit_compare") + f"?campaigns={campaign.slug}",
        f"/audits/{campaign.slug}/systems/",
        f"/audits/{campaign.slug}/card/",
    ):
        assert f'href="{path}' in html, path
    assert 'id="acc-others"' in html and 'id="acc-gold"' in html


def test_the_engine_modules_doctests_run():
    import doctest

    import audits.engine.figures

    result = doctest.testmod(audits.engine.figures)
    assert result.failed == 0 and result.attempted >= 5


def test_a_free_text_campaigns_groups_page_says_why_it_has_none(researcher):
    campaign = free_text_campaign(researcher, {"q1": ("Name a pet.", ["dog", "cat"])})
    page = signed_in(researcher).get(f"/audits/{campaign.slug}/groups/")
    assert page.status_code == 200
    assert "free-text answers are audited by their clusters" in page.content.decode()
