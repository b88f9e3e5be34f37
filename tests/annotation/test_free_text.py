"""Issue 14: the free-text schema (ProtoQA-style answers), collected with every guarantee.

The schema's rules (normalisation, refusals), the campaign's length fields, the task page, controls
with accepted answers, exports and the live audit's guards. The ProtoQA import is in
test_protoqa_import.py; the hammer in test_concurrency.py runs a free-text campaign too.
"""

import csv
import io
import json
import random
import threading
import unicodedata

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from rest_framework.test import APIClient

from annotation import selectors, services
from annotation.crowd import PERSONALITIES, WRONG_ANSWER, SimulatedWorker, _Page
from annotation.exporting import export_chunks
from annotation.importing import PromptFileError
from annotation.models import Campaign, Label, Lease
from annotation.schemas import LabelValueError, answer_normalize
from audits.models import AuditStatsShard
from audits.selectors.full import FREE_TEXT_SKIP_REASON, campaign_label_matrix, full_audit_due, full_audit_skip_reason
from audits.services import audit_refresh
from tests.annotation.test_bad_input import assert_lease_untouched
from tests.helpers import campaign_fields, jsonl, prompts_jsonl

pytestmark = pytest.mark.django_db

QUESTION = "Name something people do before they leave for work."


@pytest.fixture
def make_free_text(researcher):
    """A live free-text campaign with ``n`` prompts (no gold) or the given rows."""

    def make(n: int = 3, *, rows=None, k: int = 3, launch: bool = True, **fields):
        campaign = services.campaign_create(
            owner=researcher, title="Before work", schema=Campaign.Schema.FREE_TEXT, k=k, **fields
        )
        data = jsonl(*rows) if rows is not None else prompts_jsonl(n, gold=False)
        services.prompts_import(campaign=campaign, data=data, filename="questions.jsonl")
        return services.campaign_transition(campaign=campaign, action="launch") if launch else campaign

    return make


def submit(campaign, worker, value, token="tok"):
    lease = services.lease_acquire(campaign=campaign, worker=worker)
    return lease, services.label_submit(lease_id=lease.pk, worker=worker, value=value, client_token=token)


# --- the stored answer ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, stored",
    [
        ("  brush my teeth ", "brush my teeth"),
        ("brush \t my\nteeth", "brush my teeth"),  # tabs and newlines are layout: collapsed like spaces
        ("drink\u00a0coffee\u2028", "drink coffee"),  # no-break space and the line separator too
        ("cafe\u0301", "café"),  # NFD → NFC: one code point, as a precomposed keyboard types it
        ("x²", "x²"),  # NFC, not NFKC: a superscript stays what was typed
        ("Pack LUNCH", "Pack LUNCH"),  # case is kept; only controls compare without it
        ("👩\u200d🔬", "👩\u200d🔬"),  # the zero-width joiner of an emoji sequence is part of it
    ],
)
def test_answers_are_stored_trimmed_collapsed_and_nfc(make_free_text, make_worker, raw, stored):
    campaign = make_free_text(1, k=1)
    _, ack = submit(campaign, make_worker(), raw)
    value = Label.objects.get(pk=ack.label_id).value
    assert value == stored
    assert unicodedata.is_normalized("NFC", value)


BAD_ANSWERS = [
    ("", "The answer is empty: type an answer."),
    ("   \t ", "The answer is empty: type an answer."),
    ("a" * 61, f"The answer must be 1 to 60 characters long; '{'a' * 38}… has 61."),  # quoted back shortened
    ("eat\x00", "The answer holds a non-printing character (U+0000) at position 4; type the answer as plain text."),
    ("a\u200bb", "The answer holds a non-printing character (U+200B) at position 2; type the answer as plain text."),
    ("\u202eevil", "The answer holds a non-printing character (U+202E) at position 1; type the answer as plain text."),
    ("\x1fcoffee", "The answer holds a non-printing character (U+001F) at position 1; type the answer as plain text."),
    (5, "The answer must be text; got 5."),
    (True, "The answer must be text; got true."),
    (None, "The answer must be text; got None."),
    (["coffee"], "The answer must be text; got ['coffee']."),
]


@pytest.mark.parametrize("value, message", BAD_ANSWERS)
def test_bad_answers_are_refused_and_change_nothing(make_free_text, make_worker, value, message):
    campaign = make_free_text(1, k=1)
    worker = make_worker()
    lease = services.lease_acquire(campaign=campaign, worker=worker)
    with pytest.raises(services.LabelRefused) as refused:
        services.label_submit(lease_id=lease.pk, worker=worker, value=value, client_token="tok")
    assert (refused.value.code, refused.value.message) == ("bad_value", message)
    assert_lease_untouched(lease)
    # The same lease then takes a good answer: the refusal left the prompt as it was.
    ack = services.label_submit(lease_id=lease.pk, worker=worker, value="coffee", client_token="tok")
    assert Label.objects.get(pk=ack.label_id).value == "coffee"


def test_the_shortest_answer_counts_after_trimming(make_free_text, make_worker):
    campaign = make_free_text(1, k=2, answer_min_length=3, answer_max_length=5)
    worker = make_worker()
    lease = services.lease_acquire(campaign=campaign, worker=worker)
    with pytest.raises(services.LabelRefused, match=r"must be 3 to 5 characters long; 'ab' has 2\.$"):
        services.label_submit(lease_id=lease.pk, worker=worker, value="  ab   ", client_token="t")
    _, ack = submit(campaign, make_worker(), "  abcde  ")
    assert Label.objects.get(pk=ack.label_id).value == "abcde"


def test_answer_normalize_refuses_what_it_cannot_store():
    with pytest.raises(LabelValueError, match="U\\+0007"):
        answer_normalize("bell\x07")
    assert answer_normalize("  \n ") == ""


# --- the campaign's fields -------------------------------------------------------------------------------


def test_defaults_and_bounds_of_the_length_fields(researcher):
    campaign = services.campaign_create(owner=researcher, title="t", schema="free_text")
    assert (campaign.answer_min_length, campaign.answer_max_length) == (1, 60)
    assert campaign.get_schema_display() == "Free text"
    for fields, field, message in [
        ({"answer_min_length": 10, "answer_max_length": 5}, "answer_max_length", "at least the shortest"),
        ({"answer_max_length": 281}, "answer_max_length", "less than or equal to 280"),
        ({"answer_min_length": 0}, "answer_min_length", "greater than or equal to 1"),
        ({"k": 3, "k_max": 5}, "k_max", "not available for free text"),
    ]:
        with pytest.raises(ValidationError) as error:
            services.campaign_create(owner=researcher, title="t", schema="free_text", **fields)
        assert message in " ".join(error.value.message_dict[field])
    big = services.campaign_create(owner=researcher, title="t", schema="free_text", k=101)
    assert big.k == 101  # ProtoQA's largest question


def test_the_length_limits_freeze_once_prompts_exist(make_free_text):
    campaign = make_free_text(1, launch=False)
    with pytest.raises(services.CampaignStateError, match="answer_max_length cannot change"):
        services.campaign_update(campaign=campaign, answer_max_length=30)


def test_the_campaign_form_creates_a_free_text_campaign(researcher_client):
    page = researcher_client.get(reverse("campaign_create"))
    assert b'name="answer_max_length"' in page.content and b'value="free_text"' in page.content
    response = researcher_client.post(
        reverse("campaign_create"),
        campaign_fields(schema="free_text", answer_min_length=2, answer_max_length=40, k=100),
    )
    assert response.status_code == 302, response.context["form"].errors
    campaign = Campaign.objects.get()
    assert (campaign.schema, campaign.answer_min_length, campaign.answer_max_length, campaign.k) == (
        "free_text",
        2,
        40,
        100,
    )
    assert campaign.binarization == {} and campaign.scale_anchors == []
    detail = researcher_client.get(reverse("campaign_detail", args=[campaign.slug])).content.decode()
    assert "Free text: answers of 2 to 40 characters" in detail


def test_the_api_creates_a_free_text_campaign_and_refuses_bad_limits(researcher):
    api = APIClient()
    api.force_authenticate(researcher)
    made = api.post(
        "/api/v1/campaigns/", {"title": "Q", "schema": "free_text", "answer_max_length": 30, "k": 50}, format="json"
    )
    assert made.status_code == 201, made.json()
    assert (made.json()["schema"], made.json()["answer_min_length"], made.json()["answer_max_length"]) == (
        "free_text",
        1,
        30,
    )
    bad = api.post(
        "/api/v1/campaigns/",
        {"title": "Q2", "schema": "free_text", "answer_min_length": 9, "answer_max_length": 3},
        format="json",
    )
    assert bad.status_code == 400 and "at least the shortest" in json.dumps(bad.json())
    assert Campaign.objects.count() == 1


# --- the task page ---------------------------------------------------------------------------------------


def test_the_task_page_shows_the_question_and_a_text_box(client, make_user, make_free_text):
    campaign = make_free_text(rows=[{"id": "q1", "text": QUESTION}], k=2, answer_max_length=42)
    client.force_login(make_user())
    task_url = client.get(reverse("worker_next", args=[campaign.slug])).url
    page = client.get(task_url).content.decode()
    assert QUESTION in page
    assert 'type="text" id="answer" name="value"' in page and 'maxlength="42"' in page and "autofocus" in page
    assert "choice-button" not in page
    # An empty answer: a 400 with the message, the prompt again, nothing written.
    empty = client.post(task_url, {"value": "  ", "client_token": "tok-1"})
    assert empty.status_code == 400
    assert empty.context["error"] == "The answer is empty: type an answer."
    assert Label.objects.count() == 0
    assert_lease_untouched(Lease.objects.get())
    # Too long: the refused answer stays in the box to be corrected.
    long = client.post(task_url, {"value": "x" * 43, "client_token": "tok-1"})
    assert long.status_code == 400 and f'value="{"x" * 43}"' in long.content.decode()
    done = client.post(task_url, {"value": " Take a  shower ", "client_token": "tok-1"})
    assert done.status_code == 302
    assert list(Label.objects.values_list("value", flat=True)) == ["Take a shower"]


# --- controls ---------------------------------------------------------------------------------------------


def test_a_control_accepts_any_of_its_answers_ignoring_case_and_spacing(make_free_text, make_worker):
    rows = [
        {"id": "c1", "text": QUESTION, "gold": "Drink coffee| brush  teeth |drink COFFEE", "control": True},
        {"id": "q1", "text": "Name a fruit."},
    ]
    campaign = make_free_text(rows=rows, k=5, control_first=1)
    control = campaign.prompts.get(external_id="c1")
    assert control.gold == ["Drink coffee", "brush teeth"]  # cleaned like answers, once per answer_key
    answers = {"  DRINK   coffee": True, "Brush Teeth": True, "brush my teeth": False, "coffee": False}
    workers = {}
    for answer, _ in answers.items():
        worker = make_worker()
        lease, _ = submit(campaign, worker, answer, token=answer)
        assert lease.prompt_id == control.pk  # the qualification comes first
        workers[worker.pk] = answers[answer]
    results = selectors.worker_control_results(campaign=campaign)
    assert {pk: correct == 1 for pk, (n, correct) in results.items()} == workers
    assert all(n == 1 for n, _ in results.values())


def test_a_free_text_gold_must_hold_valid_answers(researcher):
    campaign = services.campaign_create(owner=researcher, title="t", schema="free_text", answer_max_length=5)
    with pytest.raises(PromptFileError) as refused:
        services.prompts_import(
            campaign=campaign,
            data=jsonl({"id": "c", "text": "Q", "gold": ["ok", "far too long"], "control": True}),
            filename="q.jsonl",
        )
    assert refused.value.errors == [
        (1, "bad gold value: Accepted answer 2 must be 1 to 5 characters long; 'far too long' has 12.")
    ]
    assert campaign.prompts.count() == 0


# --- exports ----------------------------------------------------------------------------------------------


def test_exports_carry_the_answers(make_free_text, make_worker):
    rows = [{"id": "q1", "text": QUESTION}, {"id": "c1", "text": "Q2", "gold": "tea|coffee", "control": True}]
    campaign = make_free_text(rows=rows, k=3, control_first=1)
    for answer in ["=HYPERLINK(1)", 'Brush, then "floss"', "café"]:
        worker = make_worker()
        submit(campaign, worker, "tea", token="control")  # the qualification comes first
        submit(campaign, worker, answer, token="answer")
    lines = [json.loads(line) for line in "".join(export_chunks(campaign=campaign, fmt="jsonl")).splitlines()]
    by_prompt = {}
    for row in lines:
        by_prompt.setdefault(row["prompt"], []).append(row["value"])
    assert sorted(by_prompt["q1"]) == sorted(["=HYPERLINK(1)", 'Brush, then "floss"', "café"])
    assert {row["prompt"]: row["gold"] for row in lines}["c1"] == ["tea", "coffee"]
    table = list(csv.DictReader(io.StringIO("".join(export_chunks(campaign=campaign, fmt="csv")))))
    values = sorted(row["value"] for row in table if row["prompt"] == "q1")
    assert values == sorted(["'=HYPERLINK(1)", 'Brush, then "floss"', "café"])  # the formula defused
    assert {row["gold"] for row in table if row["prompt"] == "c1"} == {'["tea", "coffee"]'}


# --- the live audit ---------------------------------------------------------------------------------------


@pytest.mark.both_dbs
def test_the_quick_audit_counts_and_the_full_audit_is_skipped(make_free_text, make_worker):
    campaign = make_free_text(2, k=2)
    for answer in ["coffee", "shower", "coffee", "news"]:
        submit(campaign, make_worker(), answer)
    snapshot = audit_refresh(campaign_id=campaign.pk)
    assert snapshot is not None and snapshot.watermark == 4
    # Answers are counted, never scaled: no unit, so none is "invalid" either.
    shards = AuditStatsShard.objects.filter(campaign=campaign)
    assert sum(s.n_labels for s in shards) == 4 and sum(s.n_units + s.n_invalid for s in shards) == 0
    assert selectors.campaign_progress(campaign=campaign).labels == 4
    assert (
        full_audit_skip_reason(campaign) == FREE_TEXT_SKIP_REASON == "free-text answers are audited by their clusters"
    )
    assert full_audit_due(campaign.pk, 4, campaign.created_at) is False
    with pytest.raises(ValueError, match="has no label matrix: free-text answers are audited by their clusters"):
        campaign_label_matrix(campaign=campaign)


def test_a_binary_campaign_still_gets_its_full_audit(make_campaign, make_worker):
    campaign = make_campaign(1, k=1)
    submit(campaign, make_worker(), 1)
    assert full_audit_skip_reason(campaign) is None
    assert full_audit_due(campaign.pk, 1, campaign.created_at) is True


# --- the demo's simulated crowd ---------------------------------------------------------------------------


def test_the_simulated_crowd_types_an_accepted_answer_or_a_shrug(client, make_user, make_free_text):
    campaign = make_free_text(rows=[{"id": "q1", "text": QUESTION}], k=1)
    client.force_login(make_user())
    html = client.get(client.get(reverse("worker_next", args=[campaign.slug])).url).content.decode()
    assert "{#" not in html and "#}" not in html  # no template comment leaks onto the worker's page
    page = _Page(html)
    form = page.form("label-form")
    assert form.texts == ["value"] and page.prompt_text == QUESTION

    def answers(personality, n=200):
        worker = SimulatedWorker(
            base_url="http://testserver/",
            slug=campaign.slug,
            username="sim",
            password="pw",
            personality=personality,
            truth={QUESTION: ["drink coffee", "shower"]},
            stop=threading.Event(),
            pause_scale=0.0,
            rng=random.Random(1),
        )
        return [worker._fields(form, page.prompt_text)["value"] for _ in range(n)]

    careful = answers(PERSONALITIES[0])  # accuracy 0.96: the first accepted answer, else a shrug
    assert set(careful) <= {"drink coffee", "shower", WRONG_ANSWER}
    assert 0.9 <= careful.count("drink coffee") / len(careful) <= 1.0
    same = answers(next(p for p in PERSONALITIES if p.same_answer))
    assert set(same) == {"drink coffee"}
