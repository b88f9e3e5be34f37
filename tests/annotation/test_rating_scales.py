"""Ratings as numbers (issue 22): a rating scale's step (or none: continuous), its validation, a 0–10
campaign in half points collected through the labeling page and the REST API without a binarization
map, audited on the unit scale (live and full audit equal to the offline engine on the export) and
exported with the raw values; a map adds the binarized view beside the unit scale."""

import json
import math
from decimal import Decimal

import pandas as pd
import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from rest_framework.test import APIClient

from annotation import services
from annotation.models import Campaign, Label
from annotation.schemas import LabelSchema, LabelValueError, scale_point, scale_step_problem
from annotation.selectors import label_export_rows
from audits import LabelMatrix, noise_audit
from audits import selectors as audit_selectors
from audits import services as audit_services
from audits.engine.markdown import render_markdown
from audits.engine.noise import NOISE_KEYS
from audits.selectors.card import instrument_card
from audits.views.card import card_document
from tests.helpers import sim_worker

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]

HALVES = {"schema": "rating", "scale_min": 0, "scale_max": 10, "scale_step": 0.5}


@pytest.fixture
def worker_client(client, make_user):
    client.force_login(make_user("wanda"))
    return client


@pytest.fixture
def api():
    def make(user):
        client = APIClient()
        client.force_authenticate(user)
        return client

    return make


def _schema(**fields) -> LabelSchema:
    campaign = Campaign(**{"schema": "rating", "scale_min": 1, "scale_max": 4, **fields})
    campaign.clean()
    return campaign.label_schema


def _launched(researcher, n_prompts=6, **fields):
    campaign = services.campaign_create(owner=researcher, title="Similarity", k=3, **{**HALVES, **fields})
    data = "".join(json.dumps({"id": f"p{i}", "text": f"Pair {i}"}) + "\n" for i in range(n_prompts)).encode()
    services.prompts_import(campaign=campaign, data=data, filename="pairs.jsonl")
    return services.campaign_transition(campaign=campaign, action="launch")


# ---------------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("value", "stored"),
    [(7.5, 7.5), ("7.5", 7.5), (7, 7), ("10", 10), (0, 0), (7.499999999999999, 7.5), (0.1 + 0.2 + 7.2, 7.5)],
)
def test_a_half_point_scale_takes_its_steps_without_float_drift(value, stored):
    schema = _schema(**HALVES)
    cleaned = schema.clean(value)
    assert cleaned == stored and type(cleaned) is type(stored)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (7.3, "The label must be a number from 0 to 10 in steps of 0.5; got 7.3, which is not on a step."),
        (10.5, "The label must be a number from 0 to 10 in steps of 0.5; got 10.5."),
        (-0.5, "got -0.5."),
        ("seven", "got 'seven'."),
        (float("nan"), "got nan."),
        (True, "got true, which is not a rating."),
        ("", "The label is missing: move the slider or type a number (a number from 0 to 10 in steps of 0.5)"),
        (None, "The label is missing: move the slider"),
    ],
)
def test_a_value_off_the_scale_or_off_its_step_is_refused_clearly(value, message):
    with pytest.raises(LabelValueError) as refused:
        _schema(**HALVES).clean(value)
    assert message in str(refused.value)


def test_integer_scales_store_ints_and_refuse_as_before():
    schema = _schema(binarization={"1": 0, "2": 0, "3": 1, "4": 1})
    assert schema.input == "buttons" and [c.value for c in schema.choices] == [1, 2, 3, 4]
    assert schema.clean("3") == 3 and type(schema.clean(3.0)) is int
    for value in (5, 2.5, "3.5", None):
        with pytest.raises(LabelValueError) as refused:
            schema.clean(value)
        assert str(refused.value) == f"The label must be one of 1, 2, 3, 4; got {value!r}."


def test_a_continuous_scale_keeps_values_to_its_resolution():
    schema = _schema(scale_min=0, scale_max=100, scale_step=None)
    assert (schema.input, schema.grid, schema.intervals) == ("slider", Decimal("0.1"), 1000)
    assert schema.clean(37.283) == 37.3 and schema.clean(100) == 100
    assert scale_point(9.75, lo=0, hi=10, step=None) == (975, 9.75)  # WordSim's quarters, on 0–10
    assert schema.unit_value(37.5) == 0.375


def test_an_eleven_point_scale_has_digit_keys_and_t_for_ten():
    schema = _schema(scale_min=0, scale_max=10, scale_step=1)
    assert [c.key for c in schema.choices] == [*"0123456789", "t"] and schema.ten_key == "t"
    assert _schema(scale_min=0, scale_max=11).input == "slider"  # twelve points: a slider


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"scale_step": 0.4}, "scale_step", "A step of 0.4 does not divide the scale 1–4 into whole steps."),
        ({"scale_step": 0}, "scale_step", "The step must be above 0; got 0."),
        ({"scale_step": 0.0001}, "scale_step", "A scale has at most 10,000 steps; 1–4 in steps of 0.0001 has 30,000"),
        ({"scale_min": 5, "scale_max": 5, "scale_step": None}, "scale_max", "must be above the lowest"),
        ({"scale_step": 0.5, "binarization": {"1": 0, "4": 1}}, "binarization", "A binarization maps whole points"),
        ({"scale_step": None, "scale_anchors": ["a", "b", "c", "d"]}, "scale_anchors", "A slider takes two anchors"),
        ({"schema": "option_rating", "scale_step": None}, "scale_step", "Rating each answer option takes buttons"),
        ({"scale_step": 0.5, "k_max": 7}, "k_max", "the binarization must map every point"),
    ],
)
def test_a_scale_that_cannot_be_is_refused_naming_its_field(fields, field, message):
    campaign = Campaign(**{"schema": "rating", "scale_min": 1, "scale_max": 4, "k": 3, **fields})
    with pytest.raises(ValidationError) as refused:
        campaign.clean()
    assert any(message in text for text in refused.value.message_dict[field]), refused.value.message_dict


def test_step_problem_compares_decimals_not_floats():
    assert scale_step_problem(0, 1, 0.1) is None  # 1 % 0.1 in floats is 0.09999…
    assert scale_step_problem(0, 10, None) is None


# ---------------------------------------------------------------------------------- collection
def test_a_half_point_campaign_collects_through_the_task_page(worker_client, researcher):
    campaign = _launched(researcher)
    task_url = worker_client.get(reverse("worker_next", args=[campaign.slug])).url
    page = worker_client.get(task_url).content.decode()
    assert 'type="range"' in page and 'name="value"' in page and 'step="0.5"' in page
    untouched = worker_client.post(task_url, {"value": "", "client_token": "a"})
    assert untouched.status_code == 400
    assert "The label is missing: move the slider or type a number" in untouched.content.decode()
    off_step = worker_client.post(task_url, {"value": "7.3", "client_token": "b"})
    assert "which is not on a step" in off_step.content.decode() and not Label.objects.exists()
    assert worker_client.post(task_url, {"value": "7.5", "client_token": "c"}).status_code == 302
    assert Label.objects.get().value == 7.5


def test_a_half_point_campaign_collects_through_the_api(researcher, make_user, api):
    campaign = _launched(researcher)
    client = api(make_user())
    lease_id = client.post(f"/api/v1/campaigns/{campaign.slug}/next-task/").json()["lease"]["id"]
    refused = client.post(f"/api/v1/leases/{lease_id}/submit/", {"value": 7.3, "client_token": "x"}, format="json")
    assert refused.status_code == 409 and "not on a step" in json.dumps(refused.json())  # the API's bad_value
    done = client.post(f"/api/v1/leases/{lease_id}/submit/", {"value": 6.5, "client_token": "y"}, format="json")
    assert done.status_code == 201 and Label.objects.get().value == 6.5


def test_the_api_creates_a_continuous_scale_without_a_map(researcher, api):
    body = {"title": "Slider", "slug": "slider", "schema": "rating", "scale_min": 0, "scale_max": 100}
    created = api(researcher).post("/api/v1/campaigns/", {**body, "scale_step": None}, format="json")
    assert created.status_code == 201, created.json()
    assert (created.json()["scale_step"], created.json()["binarization"]) == (None, {})
    refused = (
        api(researcher)
        .post("/api/v1/campaigns/", {**body, "title": "Bad slider", "scale_step": 0.3}, format="json")
        .json()
    )
    assert "does not divide the scale 0–100" in json.dumps(refused, ensure_ascii=False)


# ---------------------------------------------------------------------------------- audit and export
VALUES = [0, 2.5, 5, 7.5, 10, 6.5, 3]


def _label_all(campaign, values, n_workers=5):
    """Each worker labels what they are given until nothing is left, values taken in turn."""
    for i, worker in enumerate(sim_worker() for _ in range(n_workers)):
        for j in range(campaign.prompts.count()):
            lease = services.lease_acquire(campaign=campaign, worker=worker)
            if not hasattr(lease, "prompt"):
                break
            value = values[(i * 3 + j) % len(values)]
            services.label_submit(lease_id=lease.pk, worker=worker, value=value, client_token=f"{i}-{j}")


def _close(a, b):
    return (a is None and b is None) or (a is not None and b is not None and math.isclose(a, b, abs_tol=1e-12))


def test_without_a_map_every_audit_is_on_the_unit_scale_and_equals_the_offline_engine(researcher):
    campaign = _launched(researcher)
    _label_all(campaign, VALUES)
    audit_services.audit_refresh(campaign_id=campaign.pk)
    full = audit_services.audit_full(campaign_id=campaign.pk).data
    quick = audit_selectors.latest_snapshot(campaign=campaign).data

    # The export carries the raw values; the offline engine rescales them as the spec says.
    frame = pd.DataFrame(list(label_export_rows(campaign=campaign)))
    assert set(frame["value"]) <= set(VALUES) and 7.5 in set(frame["value"])
    offline = noise_audit(LabelMatrix.from_frame(frame, gold=None, rescale=(0, 10)))
    for key in NOISE_KEYS:
        assert _close(quick[key], getattr(offline, key)), (key, quick[key])
        assert _close(full[key], getattr(offline, key)), (key, full[key])
    assert "unit_scale" not in full  # one view: it is the unit scale

    card = instrument_card(campaign=campaign)
    assert card["noise"]["scale"] == "unit scale, (value − 0) / (10 − 0)" and card["noise_unit_scale"] is None
    assert card["repeatability"]["alpha"]["level"] == "interval"  # half points: interval, on the raw scale
    assert card["variance_components"]["values"] == "raw" and card["scales"]["precision"].startswith("raw labels")
    raw = LabelMatrix.from_frame(frame, gold=None, rescale=(0, 10)).raw
    assert max(card["precision"]["points"]["mean"]) <= 10 and raw.max() == 10  # raw scale, not 0–1


def test_with_a_map_the_report_and_card_add_the_unit_scale_view(researcher, client):
    fields = {"scale_min": 0, "scale_max": 10, "scale_step": 1, "binarization": {str(v): int(v > 5) for v in range(11)}}
    campaign = _launched(researcher, **fields)
    _label_all(campaign, [0, 2, 5, 7, 10, 6, 3])
    audit_services.audit_refresh(campaign_id=campaign.pk)
    full = audit_services.audit_full(campaign_id=campaign.pk).data
    frame = pd.DataFrame(list(label_export_rows(campaign=campaign)))
    binarized = noise_audit(LabelMatrix.from_frame(frame, gold=None, binarize=campaign.binarization))
    unit = noise_audit(LabelMatrix.from_frame(frame, gold=None, rescale=(0, 10)))
    for key in NOISE_KEYS:
        assert _close(full[key], getattr(binarized, key)), key  # the existing fields: the binarized view
        assert _close(full["unit_scale"][key], getattr(unit, key)), key
    assert full["unit_scale"]["view"] == "unit scale"
    card = instrument_card(campaign=campaign)
    assert card["noise"]["scale"] == "0/1, binarized by the map"
    assert [n["key"] for n in card["noise"]["numbers"]][:1] and card["noise_unit_scale"]["n_labels"] == len(frame)
    assert card["repeatability"]["alpha"]["level"] == "interval"
    # The Markdown report and the card's Markdown export label both views.
    markdown = render_markdown(full)
    assert (
        "## The six numbers\n" in markdown
        and "## The six numbers on the unit scale: (value − 0) / (10 − 0)" in markdown
    )
    client.force_login(researcher)
    page = client.get(f"/audits/{campaign.slug}/card/").content.decode()
    assert 'id="noise-unit-scale"' in page and "unit scale: (value − 0) / (10 − 0)" in page
    ln = full["unit_scale"]["level_noise"]
    assert f'data-unit-number="level_noise">{ln:.4f}<' in page
    card_md = card_document(campaign, card, "md").content.decode()
    assert "SD, 0/1, binarized by the map)" in card_md and "SD, unit scale: (value − 0) / (10 − 0))" in card_md


def test_the_campaign_page_states_the_step_and_the_unit_scale(client, researcher):
    campaign = _launched(researcher)
    client.force_login(researcher)
    body = client.get(f"/campaigns/{campaign.slug}/").content.decode()
    assert "0–10 in steps of 0.5" in body and "none: audited on the unit scale, (value − 0) / (10 − 0)" in body


def test_a_slider_of_whole_points_names_its_range_not_a_list_of_points():
    schema = _schema(scale_min=0, scale_max=100)
    assert schema.input == "slider" and schema.clean("42") == 42
    with pytest.raises(LabelValueError) as refused:
        schema.clean(42.5)
    assert str(refused.value) == "The label must be a whole number from 0 to 100; got 42.5, which is not on a step."


def test_removing_the_map_rebuilds_the_live_audit_onto_the_unit_scale(researcher):
    campaign = _launched(
        researcher, scale_min=1, scale_max=4, scale_step=1, binarization={"1": 0, "2": 0, "3": 1, "4": 1}
    )
    _label_all(campaign, [1, 2, 3, 4, 4, 2, 3])
    audit_services.audit_refresh(campaign_id=campaign.pk)
    campaign = services.campaign_update(campaign=campaign, binarization={})
    audit_services.audit_refresh(campaign_id=campaign.pk)  # the map changed: rebuilt, then audited
    quick = audit_selectors.latest_snapshot(campaign=campaign).data
    frame = pd.DataFrame(list(label_export_rows(campaign=campaign)))
    offline = noise_audit(LabelMatrix.from_frame(frame, gold=None, rescale=(1, 4)))
    for key in NOISE_KEYS:
        assert _close(quick[key], getattr(offline, key)), (key, quick[key])
    assert quick["n_labels"] == len(frame) and quick["straight_lining"] is None
