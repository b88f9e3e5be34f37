"""Agreement per prompt and per pair of workers on a campaign: the selector the prompts page reads,
the dashboard's CSV download and the API's JSON and CSV (issue 22)."""

import csv
import io

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation import services
from annotation.models import Lease
from audits.selectors.agreement import CSV_COLUMNS, agreement_tables, prompt_agreement
from tests.helpers import sim_worker

pytestmark = [pytest.mark.django_db]

# Three workers label all twelve prompts p0..p11 (k = 3). Worker A says 1 on every prompt with an even
# number, B agrees with A except on p0 and p1, C says 1 everywhere.
ANSWERS = {
    "A": lambda i: 1 - i % 2,
    "B": lambda i: (1 - i % 2) if i >= 2 else i % 2,
    "C": lambda i: 1,
}


@pytest.fixture
def labeled(make_campaign):
    campaign = make_campaign(12, k=3)
    ids = {}
    for name, answer in ANSWERS.items():
        worker = sim_worker(f"agr-{name}-")
        ids[name] = f"sim:{worker.external_id}"
        while isinstance(lease := services.lease_acquire(campaign=campaign, worker=worker), Lease):
            i = int(lease.prompt.external_id[1:])
            services.label_submit(lease_id=lease.pk, worker=worker, value=answer(i), client_token=f"t{lease.pk}")
    return campaign, ids


def test_prompt_agreement_by_prompt_id(labeled):
    campaign, _ = labeled
    rows = prompt_agreement(campaign=campaign)
    assert set(rows) == {f"p{i}" for i in range(12)}
    # p0: A 1, B 0, C 1 → mode share 2/3, entropy −(⅔ log2 ⅔ + ⅓ log2 ⅓) = 0.918296 bits; p2: 1, 1, 1 → 1 and 0;
    # p3: A 0, B 0, C 1 → 2/3 again
    p0 = {"n_labels": 3, "mode_share": pytest.approx(2 / 3), "entropy_bits": pytest.approx(0.9182958340544896)}
    assert rows["p0"] == p0
    assert rows["p2"] == {"n_labels": 3, "mode_share": 1.0, "entropy_bits": 0.0}
    assert rows["p3"]["mode_share"] == pytest.approx(2 / 3)


def test_pairs_kappas_hand_worked(labeled):
    campaign, ids = labeled
    tables = agreement_tables(campaign=campaign)
    kappas = {frozenset((r["worker_a"], r["worker_b"])): (r["n_shared"], r["kappa"]) for r in tables["pairs"]}
    # A–B: agree on 10 of 12 (p_o = 5/6); each says 1 on 6 of 12 → p_e = 0.5; κ = (5/6 − 1/2)/(1/2) = 2/3.
    # A–C and B–C: C says 1 throughout → p_e = share of 1s of the other = 1/2 = p_o; κ = 0.
    assert kappas[frozenset((ids["A"], ids["B"]))] == (12, pytest.approx(2 / 3))
    assert kappas[frozenset((ids["A"], ids["C"]))] == (12, pytest.approx(0.0, abs=1e-12))
    assert kappas[frozenset((ids["B"], ids["C"]))] == (12, pytest.approx(0.0, abs=1e-12))
    assert tables["cohen_kappa_mean"]["value"] == pytest.approx(2 / 9)
    assert tables["n_labels"] == 36 and tables["fleiss_kappa"]["k"] == 3


def test_the_page_download_and_the_api_give_the_same_tables(client, labeled, researcher):
    campaign, ids = labeled
    client.force_login(researcher)
    page = client.get(reverse("audit_agreement_csv", args=[campaign.slug]))
    assert page.status_code == 200 and page["Content-Type"].startswith("text/csv")
    assert page["Content-Disposition"] == f'attachment; filename="{campaign.slug}-agreement-36.csv"'
    rows = list(csv.DictReader(io.StringIO(b"".join(page.streaming_content).decode())))
    assert list(rows[0]) == list(CSV_COLUMNS)
    prompts = [r for r in rows if r["kind"] == "prompt"]
    pairs = [r for r in rows if r["kind"] == "pair"]
    assert len(prompts) == 12 and len(pairs) == 3
    p0 = next(r for r in prompts if r["prompt"] == "p0")
    assert (p0["n_labels"], p0["worker_a"], p0["cohen_kappa"]) == ("3", "", "")
    assert float(p0["mode_share"]) == pytest.approx(2 / 3)
    ab = next(r for r in pairs if {r["worker_a"], r["worker_b"]} == {ids["A"], ids["B"]})
    assert (ab["n_shared"], ab["prompt"]) == ("12", "") and float(ab["cohen_kappa"]) == pytest.approx(2 / 3)

    api = APIClient()
    api.force_authenticate(researcher)
    body = api.get(reverse("api:audit-agreement", args=[campaign.slug])).json()
    assert body["min_shared"] == 10 and len(body["prompts"]) == 12 and len(body["pairs"]) == 3
    assert body["cohen_kappa_mean"]["value"] == pytest.approx(2 / 9)
    api_csv = api.get(reverse("api:audit-agreement-csv", args=[campaign.slug]))
    assert b"".join(api_csv.streaming_content) == b"".join(
        client.get(reverse("audit_agreement_csv", args=[campaign.slug])).streaming_content
    )


def test_a_free_text_campaign_has_no_agreement_table(client, researcher):
    campaign = services.campaign_create(owner=researcher, title="Free", k=3, schema="free_text")
    client.force_login(researcher)
    response = client.get(reverse("audit_agreement_csv", args=[campaign.slug]))
    assert response.status_code == 404
    assert prompt_agreement(campaign=campaign) == {}
