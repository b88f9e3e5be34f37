"""Scale anchors ("1 = bad fit … 4 = very good fit"): set by the researcher on the web form or through the
API, checked against the scale, shown to workers with the rating buttons."""

import json

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from rest_framework.test import APIClient

from annotation import services
from annotation.models import Campaign
from tests.helpers import BINARIZATION, campaign_fields

pytestmark = pytest.mark.django_db

FOUR = ["bad fit", "poor fit", "good fit", "very good fit"]


def rating(researcher, **fields):
    fields = {"schema": "rating", "binarization": BINARIZATION, **fields}
    return services.campaign_create(owner=researcher, title="Fit", **fields)


@pytest.mark.parametrize("anchors", [FOUR, ["bad fit", "very good fit"], []])
def test_one_anchor_per_point_two_for_the_ends_or_none(researcher, anchors):
    assert rating(researcher, scale_anchors=anchors).scale_anchors == anchors


@pytest.mark.parametrize(
    "fields, message",
    [
        (
            {"scale_anchors": ["bad", "so-so", "good"]},
            "Give one anchor per point of the scale 1–4 (4), or two (the lowest and the highest point); got 3.",
        ),
        ({"scale_anchors": ["bad"]}, "got 1."),
        ({"scale_anchors": ["bad", "  "]}, "Each anchor is 1 to 60 characters; anchor 2 has 0."),
        ({"scale_anchors": ["bad", "x" * 61]}, "anchor 2 has 61."),
        ({"scale_anchors": "bad, good"}, "Scale anchors are a list of texts, lowest point first."),
        ({"scale_anchors": ["bad", 4]}, "Scale anchors are a list of texts"),
        # Twelve points are a slider, whose anchors name its two ends.
        (
            {"scale_min": 0, "scale_max": 11, "scale_anchors": ["low", "middle", "high"]},
            "A slider takes two anchors (its two ends); got 3.",
        ),
    ],
)
def test_anchors_that_do_not_fit_the_scale_are_refused_with_a_clear_error(researcher, fields, message):
    with pytest.raises(ValidationError) as refused:
        rating(researcher, **fields)
    assert any(message in text for texts in refused.value.message_dict.values() for text in texts)
    assert not Campaign.objects.exists()


def test_a_binary_campaign_keeps_no_anchors_and_texts_are_trimmed(researcher):
    assert services.campaign_create(owner=researcher, title="Yes/no", scale_anchors=["a", "b"]).scale_anchors == []
    assert rating(researcher, scale_anchors=[" bad fit ", "very good fit"]).scale_anchors == [
        "bad fit",
        "very good fit",
    ]


def test_two_anchors_name_the_ends_of_the_scale(researcher):
    schema = rating(
        researcher, scale_min=0, scale_max=4, binarization={"0": 0, "4": 1}, scale_anchors=["never", "always"]
    ).label_schema
    assert [(c.value, c.anchor) for c in schema.choices] == [(0, "never"), (1, ""), (2, ""), (3, ""), (4, "always")]
    assert [c.value for c in schema.anchored_choices] == [0, 4]


def test_the_web_form_takes_one_anchor_per_line(client, researcher):
    client.force_login(researcher)
    fields = campaign_fields(
        schema="rating",
        binarization="1=0, 2=0, 3=1, 4=1",
        scale_anchors="bad fit\n\npoor fit\r\ngood fit\n very good fit \n",
    )
    client.post(reverse("campaign_create"), fields)
    campaign = Campaign.objects.get()
    assert campaign.scale_anchors == FOUR
    edit = client.get(reverse("campaign_edit", args=[campaign.slug]))
    assert "bad fit\npoor fit\ngood fit\nvery good fit</textarea>" in edit.content.decode()
    detail = client.get(reverse("campaign_detail", args=[campaign.slug])).content.decode()
    assert "1 = bad fit · 2 = poor fit · 3 = good fit · 4 = very good fit" in detail


def test_the_web_form_shows_a_count_that_does_not_match_under_the_field(client, researcher):
    client.force_login(researcher)
    fields = campaign_fields(schema="rating", binarization="1=0, 4=1", scale_anchors="bad\nso-so\ngood")
    response = client.post(reverse("campaign_create"), fields)
    assert response.status_code == 200
    assert response.context["form"].errors["scale_anchors"] == [
        "Give one anchor per point of the scale 1–4 (4), or two (the lowest and the highest point); got 3."
    ]
    assert not Campaign.objects.exists()


def test_the_api_reads_and_writes_anchors(researcher):
    api = APIClient()
    api.force_authenticate(researcher)
    payload = {"title": "Fit", "schema": "rating", "binarization": {"1": 0, "4": 1}, "scale_anchors": FOUR}
    created = api.post("/api/v1/campaigns/", payload, format="json")
    assert created.status_code == 201 and created.json()["scale_anchors"] == FOUR
    url = f"/api/v1/campaigns/{created.json()['slug']}/"
    refused = api.patch(url, {"scale_anchors": ["bad", "so-so", "good"]}, format="json")
    assert refused.status_code == 400
    assert refused.json()["error"]["fields"]["scale_anchors"] == [
        "Give one anchor per point of the scale 1–4 (4), or two (the lowest and the highest point); got 3."
    ]
    assert "scale_anchors" in api.patch(url, {"scale_anchors": ["bad", ""]}, format="json").json()["error"]["fields"]
    assert api.patch(url, {"scale_anchors": ["bad", "good"]}, format="json").json()["scale_anchors"] == ["bad", "good"]
    schema = api.get("/api/schema/", {"format": "json"}).json()
    anchors = schema["components"]["schemas"]["CampaignInput"]["properties"]["scale_anchors"]
    assert anchors["type"] == "array" and anchors["items"]["maxLength"] == 60


@pytest.mark.parametrize("schema", ["rating", "option_rating"])
def test_workers_see_the_anchors_on_the_task_page(client, researcher, make_worker, schema):
    campaign = rating(researcher, schema=schema, k=1, scale_anchors=["bad fit", "very good fit"])
    row = {"id": "q1", "text": "Does the answer fit?", "options": ["red", "green"] if schema == "option_rating" else []}
    services.prompts_import(campaign=campaign, data=json.dumps(row).encode(), filename="q.jsonl")
    services.campaign_transition(campaign=campaign, action="launch")
    worker = make_worker()
    client.force_login(worker.user)
    page = client.get(client.get(reverse("worker_next", args=[campaign.slug])).url).content.decode()
    assert '<ul class="scale-anchors scale-ends" aria-label="What the ratings mean">' in page
    assert "<li><strong>1</strong> = bad fit</li><li><strong>4</strong> = very good fit</li>" in page


def test_no_legend_without_anchors(client, make_campaign, make_worker):
    campaign = make_campaign(1, k=1)
    client.force_login(make_worker().user)
    page = client.get(client.get(reverse("worker_next", args=[campaign.slug])).url)
    assert page.status_code == 200 and b"scale-anchors" not in page.content
