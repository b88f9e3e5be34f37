"""Systems on a live campaign (issue 13): upload, replace and delete through the service, the page and
the API; every row error, all or nothing; the leaderboard equals the engine's on the campaign's matrix;
only the campaign's managers see any of it."""

import json

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from rest_framework.test import APIClient
from scipy import stats

from annotation import services
from annotation.models import Lease
from audits import services as audit_services
from audits.engine.leaderboard import leaderboard as engine_leaderboard
from audits.engine.partitions import modal_labels
from audits.models import System
from audits.selectors import campaign_label_matrix
from audits.selectors.systems import leaderboard
from audits.services.systems import system_delete, system_save, system_upload
from tests.helpers import jsonl, prompts_jsonl, sim_worker

pytestmark = [pytest.mark.django_db]

N_PROMPTS = 20


def label_noisily(campaign, n_workers=5, seed=0):
    """Each of ``n_workers`` workers labels every prompt: gold (p<i>: i % 2), flipped 20 % of the time.
    A flip is drawn per (worker, prompt), so the labels do not depend on the order prompts are served in."""
    for w in range(n_workers):
        worker = sim_worker("sys")
        while isinstance(lease := services.lease_acquire(campaign=campaign, worker=worker), Lease):
            i = int(lease.prompt.external_id[1:])
            truth = i % 2
            value = truth if np.random.default_rng([seed, w, i]).random() > 0.2 else 1 - truth
            services.label_submit(lease_id=lease.pk, worker=worker, value=value, client_token=f"t{lease.pk}")


@pytest.fixture
def labeled(make_campaign):
    campaign = make_campaign(N_PROMPTS, k=5)
    label_noisily(campaign)
    return campaign


def csv_of(predictions: dict, header=("prompt_id", "prediction")) -> bytes:
    return ("\n".join([",".join(header), *(f"{k},{v}" for k, v in predictions.items())]) + "\n").encode()


def truth(i):
    return i % 2


GOOD = {f"p{i}": truth(i) for i in range(N_PROMPTS)}
POOR = {f"p{i}": truth(i) if i < 4 else 1 - truth(i) for i in range(N_PROMPTS)}


def file_errors(exc) -> list[str]:
    return exc.value.message_dict["file"]


# --------------------------------------------------------------------------------------- the service
def test_upload_csv_and_jsonl_replace_and_delete(labeled, researcher):
    system = system_upload(campaign=labeled, name="good", data=csv_of(GOOD), filename="good.csv", by=researcher)
    assert (system.n_predictions, system.predictions, system.uploaded_by) == (N_PROMPTS, GOOD, researcher)
    jsonl = "".join(json.dumps({"prompt_id": k, "prediction": bool(v)}) + "\n" for k, v in POOR.items()).encode()
    system_upload(campaign=labeled, name="poor", data=jsonl, filename="poor.jsonl", by=researcher)
    assert System.objects.get(name="poor").predictions == POOR  # true/false stored as the schema's 1/0
    # Other column names, the campaign's own answer texts, and JSONL found by its content.
    text = csv_of({"p0": labeled.negative_text, "p1": labeled.positive_text.upper()}, header=("id", "value"))
    assert system_upload(campaign=labeled, name="t", data=text, filename="x", by=None).predictions == {"p0": 0, "p1": 1}
    as_content = b'{"id": "p3", "score": 1}\n'
    assert system_upload(campaign=labeled, name="c", data=as_content, filename="upload", by=None).predictions == {
        "p3": 1
    }

    with pytest.raises(ValidationError) as exc:
        system_upload(campaign=labeled, name="good", data=csv_of(POOR), filename="again.csv", by=researcher)
    assert "exists already" in exc.value.message_dict["name"][0]
    system_upload(campaign=labeled, name="good", data=csv_of(POOR), filename="again.csv", by=researcher, replace=True)
    assert System.objects.get(name="good").predictions == POOR and System.objects.filter(name="good").count() == 1

    assert system_delete(campaign=labeled, name="good") is True
    assert system_delete(campaign=labeled, name="good") is False
    assert sorted(System.objects.values_list("name", flat=True)) == ["c", "poor", "t"]


@pytest.mark.parametrize(
    "data, filename, expected",
    [
        (b"prompt_id,prediction\np0,1\nnope,1\n", "f.csv", "line 3: unknown prompt id 'nope'"),
        (
            b"prompt_id,prediction\np0,1\np1,2\n",
            "f.csv",
            "line 3: prediction '2' is not a label of this campaign (expected 1, 0, true or false)",
        ),
        (b"prompt_id,prediction\np0,1\np1,0\np0,0\n", "f.csv", "line 4: duplicate prompt id 'p0' (first at line 2)"),
        (b"prompt_id,prediction\np0,\n", "f.csv", "line 2: empty prediction for prompt id 'p0'"),
        (b"prompt,label\np0,1\n", "f.csv", "line 1: the header needs a column 'prompt_id' or 'id'"),
        (b"", "f.csv", "line 1: the header needs"),
        (b"prompt_id,prediction\n", "f.csv", "the file holds no predictions"),
        (b"prompt_id,prediction\np0,1\np1,\xff\n", "f.csv", "line 3: the file is not UTF-8 (byte 0xff)"),
        (b'{"prompt_id": "p0", "prediction": 1}\n{"prompt_id": "p1"\n', "f.jsonl", "line 2: not valid JSON"),
        (b'{"prompt_id": "p0"}\n', "f.jsonl", "line 1: missing field 'prediction'"),
        (b"[1, 2]\n", "f.jsonl", "line 1: each line must be a JSON object"),
        (b'{"prompt_id": "p0", "prediction": 0.5}\n', "f.jsonl", "line 1: prediction 0.5 is not a label"),
    ],
    ids=[
        "unknown id",
        "outside the schema",
        "duplicate id",
        "empty value",
        "missing columns",
        "empty file",
        "header only",
        "bad encoding",
        "bad JSON",
        "missing field",
        "not an object",
        "graded on binary",
    ],
)
def test_every_row_error_is_named_and_nothing_is_written(labeled, researcher, data, filename, expected):
    system_upload(campaign=labeled, name="kept", data=csv_of(GOOD), filename="kept.csv", by=researcher)
    for name, replace in (("new", False), ("kept", True)):
        with pytest.raises(ValidationError) as exc:
            system_upload(campaign=labeled, name=name, data=data, filename=filename, by=researcher, replace=replace)
        messages = file_errors(exc)
        assert messages[0].startswith("Nothing was uploaded") and any(m.startswith(expected) for m in messages), (
            messages
        )
    assert list(System.objects.values_list("name", flat=True)) == ["kept"]
    assert System.objects.get().predictions == GOOD  # the failed replacement changed nothing


def test_all_row_errors_are_collected_twenty_shown(labeled):
    rows = "".join(f"x{i},1\n" for i in range(25))
    with pytest.raises(ValidationError) as exc:
        system_upload(
            campaign=labeled, name="bad", data=f"id,prediction\np0,1\n{rows}".encode(), filename="b.csv", by=None
        )
    messages = file_errors(exc)
    assert messages[0] == "Nothing was uploaded (25 problems)."
    assert messages[1] == "line 3: unknown prompt id 'x0'" and messages[20] == "line 22: unknown prompt id 'x19'"
    assert messages[-1] == "… and 5 more." and len(messages) == 22
    assert not System.objects.exists()


def test_a_too_large_file_and_bad_names_are_refused(labeled, settings):
    settings.CHORUS_MAX_IMPORT_BYTES = 10
    with pytest.raises(ValidationError) as exc:
        system_upload(campaign=labeled, name="big", data=csv_of(GOOD), filename="g.csv", by=None)
    assert "The file is" in file_errors(exc)[1] and "the limit is 10" in file_errors(exc)[1]
    for name in ("", " ", "a/b", "leaderboard", "x" * 81):
        with pytest.raises(ValidationError) as exc:
            system_save(campaign=labeled, name=name, predictions=GOOD, by=None)
        assert "name" in exc.value.message_dict
    assert not System.objects.exists()


def test_rating_campaigns_take_graded_scores_and_refuse_words(rating):
    system = system_save(campaign=rating, name="graded", predictions={"r0": 0.25, "r1": "3"}, by=None)
    assert system.predictions == {"r0": 0.25, "r1": 3}
    with pytest.raises(ValidationError) as exc:
        system_save(campaign=rating, name="words", predictions={"r0": "high", "r1": True, "zz": 1}, by=None)
    assert exc.value.message_dict["predictions"][1:] == [
        "prompt 'r0': prediction 'high' is not a finite number (expected a rating or a graded score)",
        "prompt 'r1': prediction true is not a finite number (expected a rating or a graded score)",
        "prompt 'zz': unknown prompt id 'zz'",
    ]


def test_per_option_systems_name_units(per_option):
    system = system_save(campaign=per_option, name="units", predictions={"o0#1": 10, "o0#2": 0}, by=None)
    assert system.n_predictions == 2
    with pytest.raises(ValidationError):
        system_save(campaign=per_option, name="bare", predictions={"o0": 10}, by=None)


def test_free_text_systems_are_ranked_lists_scored_against_final_clusters(researcher):
    """A free-text system is ranked answers per prompt (tests/audits/live/test_answer_systems_live.py
    scores them); a label-style mapping is refused, and with no final clustering nothing is ranked."""
    campaign = services.campaign_create(owner=researcher, title="Free", schema="free_text", k=3)
    services.prompts_import(campaign=campaign, data=prompts_jsonl(2, gold=False), filename="q.jsonl")
    with pytest.raises(ValidationError) as exc:
        system_save(campaign=campaign, name="s", predictions={"p0": "a"}, by=None)
    assert "answers must be a list of strings" in " ".join(exc.value.message_dict["predictions"])
    system_save(campaign=campaign, name="s", predictions={"p0": ["a", "b"]}, by=None)
    board = leaderboard(campaign=campaign)
    assert board["kind"] == "answers" and board["ranking"] == []
    assert board["reason"] == "no prompt has a final (adjudicated) clustering of its answers yet"


# --------------------------------------------------------------------------------------- the leaderboard
def test_leaderboard_equals_the_engine_on_the_campaigns_matrix(labeled, enqueued):
    system_save(campaign=labeled, name="good", predictions=GOOD, by=None)
    system_save(campaign=labeled, name="poor", predictions=POOR, by=None)
    run, _ = audit_services.ground_truths_request(campaign=labeled, methods=["majority"])
    audit_services.ground_truths_compute(run_id=run.pk)
    board = leaderboard(campaign=labeled)
    matrix, watermark = campaign_label_matrix(campaign=labeled)
    truths = {"majority": dict(zip(matrix.prompt_ids.tolist(), modal_labels(matrix).tolist()))}
    expected = json.loads(json.dumps(engine_leaderboard(matrix, {"good": GOOD, "poor": POOR}, k=5, truths=truths)))
    assert board["watermark"] == watermark == 5 * N_PROMPTS
    for key in ("metric", "ranking", "pairs"):
        assert board[key] == expected[key]
    for name in ("good", "poor"):
        got, want = board["systems"][name], expected["systems"][name]
        for key in ("overall", "partitions", "tests", "per_rater", "per_rater_scores", "rank"):
            assert got[key] == want[key], key
        # majority vote with no ties (k = 5, binary) is the modal label
        assert got["truths"]["majority"]["score"] == pytest.approx(got["overall"]["modal"]["score"])
    assert board["ranking"] == ["good", "poor"]

    # By hand: accuracy against the modal label, McNemar and the paired t-test across raters.
    modal = modal_labels(matrix)
    ids = matrix.prompt_ids.tolist()
    right = {n: np.array([p[i] == m for i, m in zip(ids, modal)]) for n, p in (("good", GOOD), ("poor", POOR))}
    assert board["systems"]["good"]["overall"]["modal"]["score"] == pytest.approx(right["good"].mean())
    pair = board["pairs"][0]["across_prompts"]
    only_a, only_b = int((right["good"] & ~right["poor"]).sum()), int((~right["good"] & right["poor"]).sum())
    assert (pair["only_a"], pair["only_b"]) == (only_a, only_b)
    assert pair["p"] == pytest.approx(stats.binomtest(only_a, only_a + only_b, 0.5).pvalue)
    raters = board["pairs"][0]["across_raters"]
    good_r, poor_r = board["systems"]["good"]["per_rater_scores"], board["systems"]["poor"]["per_rater_scores"]
    workers = sorted(good_r)
    ttest = stats.ttest_rel([good_r[w] for w in workers], [poor_r[w] for w in workers])
    assert raters["t"] == pytest.approx(ttest.statistic) and raters["p"] == pytest.approx(ttest.pvalue)
    assert board["pairs"][0]["across_prompts"]["verdict"].startswith(
        "the instrument separates good and poor: good scores higher (exact McNemar"
    )


def test_leaderboard_without_systems_or_labels_says_why(make_campaign):
    campaign = make_campaign(3)
    assert leaderboard(campaign=campaign)["reason"] == "no systems uploaded yet"
    system_save(campaign=campaign, name="s", predictions={"p0": 1}, by=None)
    assert leaderboard(campaign=campaign)["reason"] == "no audited labels yet"


# --------------------------------------------------------------------------------------- the page
def test_the_page_uploads_lists_shows_errors_and_deletes(client, labeled, researcher, make_user):
    url = reverse("audit_systems", args=[labeled.slug])
    assert client.get(url).status_code == 302  # to the sign-in page
    client.force_login(make_user("stranger"))
    assert client.get(url).status_code == 404
    client.force_login(researcher)
    page = client.post(url, {"name": "good", "file": upload("good.csv", csv_of(GOOD))}, follow=True)
    assert f"System “good”: {N_PROMPTS} predictions stored." in page.content.decode()
    client.post(url, {"name": "poor", "file": upload("poor.csv", csv_of(POOR))})
    html = client.get(url).content.decode()
    assert 'id="leaderboard-table"' in html and "the instrument separates good and poor" in html
    bad = client.post(url, {"name": "bad", "file": upload("bad.csv", b"prompt_id,prediction\np0,1\nzz,1\n")})
    assert bad.status_code == 400
    assert "line 3: unknown prompt id &#x27;zz&#x27;" in bad.content.decode()
    taken = client.post(url, {"name": "good", "file": upload("g.csv", csv_of(POOR))})
    assert taken.status_code == 400 and "exists already" in taken.content.decode()
    replaced = client.post(url, {"name": "good", "replace": "1", "file": upload("g.csv", csv_of(POOR))})
    assert replaced.status_code == 302 and System.objects.get(name="good").predictions == POOR
    client.post(reverse("audit_system_delete", args=[labeled.slug, "good"]))
    assert list(System.objects.values_list("name", flat=True)) == ["poor"]


def upload(name, data):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data)


# --------------------------------------------------------------------------------------- the API
def test_the_api_creates_reads_replaces_deletes_and_ranks(labeled, researcher, make_user):
    api = APIClient()
    base = f"/api/v1/campaigns/{labeled.slug}/systems/"
    assert api.get(base).status_code == 401
    api.force_authenticate(make_user("stranger"))
    assert api.get(base).status_code == 404 and api.get(base + "leaderboard/").status_code == 404
    api.force_authenticate(researcher)
    created = api.post(base, {"name": "good", "file": upload("good.csv", csv_of(GOOD))}, format="multipart")
    assert created.status_code == 201 and created.json()["n_predictions"] == N_PROMPTS
    assert api.post(base, {"name": "poor", "predictions": POOR}, format="json").status_code == 201
    assert [s["name"] for s in api.get(base).json()] == ["good", "poor"]
    assert api.get(base + "good/").json()["predictions"] == GOOD
    refused = api.post(base, {"name": "bad", "predictions": {"p0": 7, "zz": 1}}, format="json")
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["fields"]["predictions"][1:] == [
        "prompt 'p0': prediction 7 is not a label of this campaign (expected 1, 0, true or false)",
        "prompt 'zz': unknown prompt id 'zz'",
    ]
    bad_file = api.post(base, {"name": "x", "file": upload("x.csv", b"id\np0\n")}, format="multipart")
    assert bad_file.status_code == 400 and "fields" in bad_file.json()["error"]
    assert api.put(base + "good/", {"predictions": POOR}, format="json").status_code == 200
    assert api.put(base + "third/", {"predictions": GOOD}, format="json").status_code == 201
    assert System.objects.get(name="good").predictions == POOR
    board = api.get(base + "leaderboard/").json()
    assert board == json.loads(json.dumps(leaderboard(campaign=labeled), default=str)) | {
        "duration_ms": board["duration_ms"]
    }
    assert api.delete(base + "third/").status_code == 204 and api.delete(base + "third/").status_code == 404
    assert api.get(base + "nothing/").status_code == 404


def test_systems_are_scored_per_group_of_the_import(researcher):
    """The import's group column reaches the leaderboard: each group's accuracy against the modal label
    equals a count by hand over that group's prompts."""
    campaign = services.campaign_create(owner=researcher, title="Grouped", k=5)
    rows = [
        {"id": f"p{i}", "text": f"Statement {i}.", "gold": i % 2, "group": "odd" if i % 2 else "even"}
        for i in range(N_PROMPTS)
    ]
    services.prompts_import(campaign=campaign, data=jsonl(*rows), filename="grouped.jsonl")
    campaign = services.campaign_transition(campaign=campaign, action="launch")
    label_noisily(campaign)
    system_save(campaign=campaign, name="poor", predictions=POOR, by=None)
    board = leaderboard(campaign=campaign)
    groups = board["systems"]["poor"]["groups"]
    assert set(groups) == {"odd", "even"}
    matrix, _ = campaign_label_matrix(campaign=campaign)
    modal = dict(zip(matrix.prompt_ids, modal_labels(matrix), strict=True))
    for name, parity in (("even", 0), ("odd", 1)):
        ids = [f"p{i}" for i in range(N_PROMPTS) if i % 2 == parity]
        correct = sum(POOR[p] == modal[p] for p in ids)
        assert (groups[name]["modal"]["correct"], groups[name]["modal"]["n"]) == (correct, len(ids))
