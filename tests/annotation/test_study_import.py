"""Imported studies (annotation.services.studies): a labels file collected elsewhere becomes a closed,
read-only campaign whose audit equals the offline ``audit`` command's on the same file."""

import io
import json
import math

import pytest
from django.core.management import call_command

from annotation import services
from annotation.importing import PromptFileError
from annotation.models import Campaign, Label, Prompt
from annotation.selectors.invariants import invariant_violations
from annotation.services.errors import CampaignStateError
from annotation.services.quality import worker_act
from annotation.services.rules import rule_create
from annotation.services.studies import study_import
from audits import services as audit_services
from audits.engine.noise import NOISE_KEYS
from tests.audits.conftest import comve_labels, tgcsr_labels, wordsim_labels, write_csv  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


def offline(path, *args) -> dict:
    out = io.StringIO()
    call_command("audit", str(path), *map(str, args), "--format", "json", "--sweep", "none", stdout=out)
    return json.loads(out.getvalue())


def assert_close(a, b, *, what):
    if b is None:
        assert a is None, what
    else:
        assert a is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), (what, a, b)


def assert_same_audit(campaign: Campaign, report: dict) -> dict:
    snapshot = audit_services.audit_full(campaign_id=campaign.pk)
    data = snapshot.data
    assert (data["n_workers"], data["n_prompts"], data["n_labels"]) == (
        report["n_workers"],
        report["n_prompts"],
        report["n_labels"],
    )
    for key in NOISE_KEYS:
        assert_close(data[key], report[key], what=key)
    assert data["partitions"] == report["partitions"]
    return data


def test_comve_becomes_a_closed_study_with_the_offline_commands_numbers(researcher, comve_labels):  # noqa: F811
    imported = study_import(
        owner=researcher, title="ComVE (MTurk)", labels_path=comve_labels, labels_name="comve.csv", schema="binary"
    )
    campaign = imported.campaign
    assert (imported.n_prompts, imported.n_workers, imported.n_labels) == (2_000, 244, 10_000)
    assert campaign.status == Campaign.Status.CLOSED and campaign.imported_at is not None and campaign.k == 5
    assert Label.objects.filter(campaign=campaign).count() == 10_000
    assert invariant_violations(campaign=campaign) == []
    assert_same_audit(campaign, offline(comve_labels))


TGCSR = [
    f"{theme}-{kind}"
    for theme in ("bad-weather", "camping", "dental-cleaning", "vacationing-abroad")
    for kind in ("tf", "mc")
]


@pytest.mark.parametrize("sheet", TGCSR)
def test_tgcsr_sheets_import_with_the_offline_commands_numbers(researcher, tmp_path, sheet):
    """The true/false sheets as binary studies; the 1-4 sheets as ratings with the study's map."""
    path = tgcsr_labels(tmp_path, sheet)
    if sheet.endswith("tf"):
        schema, options = {"schema": "binary"}, ()
    else:
        binarization = {"1": 0, "2": 0, "3": 1, "4": 1}
        schema = {"schema": "rating", "scale_min": 1, "scale_max": 4, "binarization": binarization}
        options = ("--binarize", "1:0,2:0,3:1,4:1")
    imported = study_import(
        owner=researcher, title=f"TG-CSR {sheet}", labels_path=path, labels_name=path.name, **schema
    )
    data = assert_same_audit(imported.campaign, offline(path, *options))
    # the file's themes became the prompts' groups
    assert Prompt.objects.filter(campaign=imported.campaign).exclude(group="").exists()
    assert data["n_labels"] == imported.n_labels


def test_a_bad_file_stores_nothing_and_names_each_line(researcher, tmp_path):
    path = write_csv(
        tmp_path / "bad.csv",
        ["worker", "prompt", "value"],
        [("w1", "p1", "1"), ("w1", "p1", "0"), ("w2", "p1", "7"), ("w3", "p2", "yes")],
    )
    before = Campaign.objects.count()
    with pytest.raises(PromptFileError) as exc:
        study_import(owner=researcher, title="Bad", labels_path=path, labels_name="bad.csv", schema="binary")
    message = str(exc.value)
    assert "line 3: worker 'w1' labels prompt 'p1' again (first on line 2)" in message
    assert "line 4: value:" in message and "7" in message
    assert "line 5: value:" in message and "'yes'" in message
    assert Campaign.objects.count() == before


def test_unknown_prompt_ids_against_the_prompts_file_are_refused(researcher, tmp_path):
    labels = write_csv(tmp_path / "l.csv", ["worker", "prompt", "value"], [("w1", "p1", "1"), ("w1", "p9", "0")])
    prompts = write_csv(tmp_path / "p.csv", ["prompt", "text"], [("p1", "The sky is blue.")])
    with pytest.raises(PromptFileError, match="1 labeled prompts are not in the prompts file: p9"):
        study_import(
            owner=researcher, title="X", labels_path=labels, labels_name="l.csv", prompts_path=prompts, schema="binary"
        )
    assert not Campaign.objects.filter(title="X").exists()


def test_texts_gold_and_groups_come_from_a_prompts_file(researcher, tmp_path):
    labels = write_csv(
        tmp_path / "l.csv", ["worker", "prompt", "value"], [("w1", "p1", "1"), ("w2", "p1", "0"), ("w1", "p2", "0")]
    )
    prompts = write_csv(
        tmp_path / "p.csv",
        ["prompt", "text", "gold", "group"],
        [("p1", "The sky is blue.", "1", "colours"), ("p2", "Fish fly.", "0", "animals")],
    )
    campaign = study_import(
        owner=researcher, title="Small", labels_path=labels, labels_name="l.csv", prompts_path=prompts, schema="binary"
    ).campaign
    rows = sorted(
        Prompt.objects.filter(campaign=campaign).values_list("external_id", "text", "gold", "group", "n_labels")
    )
    assert rows == [("p1", "The sky is blue.", 1, "colours", 2), ("p2", "Fish fly.", 0, "animals", 1)]
    assert campaign.k == 2


def test_a_study_is_read_only(researcher, tmp_path):
    labels = write_csv(tmp_path / "l.csv", ["worker", "prompt", "value"], [("w1", "p1", "1")])
    campaign = study_import(
        owner=researcher, title="RO", labels_path=labels, labels_name="l.csv", schema="binary"
    ).campaign
    with pytest.raises(PromptFileError, match="closed"):
        services.prompts_import(campaign=campaign, data=b'{"id": "p2", "text": "t"}\n', filename="more.jsonl")
    with pytest.raises(CampaignStateError):
        services.campaign_transition(campaign=campaign, action="launch")
    worker = Label.objects.get(campaign=campaign).worker
    with pytest.raises(CampaignStateError, match="read-only"):
        worker_act(kind="exclude", campaign=campaign, worker=worker, by=researcher, reason="spam")
    with pytest.raises(CampaignStateError, match="read-only"):
        rule_create(
            campaign=campaign, by=researcher, metric="control_accuracy", threshold=0.5, min_labels=5, action="flag"
        )


def test_the_page_imports_a_study_and_names_a_bad_line(researcher_client):
    from django.core.files.uploadedfile import SimpleUploadedFile

    def post(title: str, content: bytes):
        form = {"title": title, "schema": "binary", "positive_text": "True", "negative_text": "False"}
        labels = SimpleUploadedFile(f"{title}.csv", content)
        return researcher_client.post(
            "/campaigns/new/study/", {**form, "scale_min": 1, "scale_max": 4, "labels": labels}, follow=True
        )

    page = researcher_client.get("/campaigns/new/study/")
    assert page.status_code == 200 and b"Import a study" in page.content
    response = post("Bad", b"worker,prompt,value\nw1,p1,1\nw1,p1,0\n")
    assert response.status_code == 200 and not response.redirect_chain
    assert "line 3: worker &#x27;w1&#x27; labels prompt &#x27;p1&#x27; again" in response.content.decode()
    assert not Campaign.objects.filter(title="Bad").exists()
    response = post("Good", b"worker,prompt,value,text\nw1,p1,1,The sky is blue.\nw2,p1,0,\n")
    campaign = Campaign.objects.get(title="Good")
    assert response.redirect_chain[-1][0] == f"/campaigns/{campaign.slug}/"
    page = response.content.decode()
    assert "An imported study" in page and "Imported 2 labels of 2 workers" in page
    assert campaign.prompts.get().text == "The sky is blue."


def test_wordsim353_set1_as_a_continuous_study_has_the_offline_commands_alpha_and_precision(researcher, tmp_path):
    """Issue 22's acceptance case: 153 pairs × 13 raters on the real 0–10 scale (9.75, 8.25, 6.8 among the
    ratings), no binarization: the card's interval α is 0.666374, and its precision and the six numbers
    equal the offline command's on the same file (--rescale 0:10)."""
    from audits.selectors.card import instrument_card

    path = wordsim_labels(tmp_path, sets=("set1",))
    imported = study_import(
        owner=researcher,
        title="WordSim-353, set 1",
        labels_path=path,
        labels_name=path.name,
        schema="rating",
        scale_min=0,
        scale_max=10,
        scale_step=None,
    )
    assert (imported.n_prompts, imported.n_workers, imported.n_labels) == (153, 13, 153 * 13)
    values = set(Label.objects.filter(campaign=imported.campaign).values_list("value", flat=True))
    assert {9.75, 8.25, 6.8} <= values
    report = offline(path, "--rescale", "0:10", "--alpha-level", "interval")
    assert_same_audit(imported.campaign, report)
    card = instrument_card(campaign=imported.campaign)
    alpha = card["repeatability"]["alpha"]
    assert alpha["level"] == "interval" and round(alpha["value"], 6) == 0.666374
    assert alpha["value"] == pytest.approx(report["agreement"]["alpha_interval"]["value"], abs=1e-9)
    precision = card["precision"]
    assert precision["n_items"] == report["precision"]["n_items_with_sd"] == 153
    assert precision["mean"] == pytest.approx(report["precision"]["mean_item_sd"], abs=1e-9)
