"""Issue 21, "Forms that say what they need": the campaign form groups its settings by schema, sums its
errors up above the form, shows the settings fixed once prompts exist with their reason and adaptive k's
consequences before the campaign exists; an owner's campaigns have different names (form, API, copies);
lists show each campaign's slug and date; a worker's first task opens the instructions."""

import re

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation import services
from annotation.adaptive import stop_consequences, stop_posterior
from annotation.forms import CAMPAIGN_FORM_GROUPS, CampaignForm
from annotation.models import Campaign
from tests.helpers import campaign_fields, label_on_page, messages_of

pytestmark = pytest.mark.django_db


# --- adaptive k's consequences ----------------------------------------------------------------------


def test_the_consequences_follow_the_stopping_rule():
    said = stop_consequences(k=3, k_max=5, stop_confidence=0.95)
    assert said.lines == [
        "With k = 3 and 0.95, no prompt stops at 3: even 3 of 3 alike give 0.9375, below 0.95.",
        "At 4 labels a prompt stops when 4 or more of 4 are alike (probability 0.9688 ≥ 0.95).",
        "At 5 labels a prompt stops when 5 or more of 5 are alike (probability 0.9844 ≥ 0.95); otherwise it "
        "stops there anyway, the most labels.",
    ]
    assert not said.pointless and said.warning == ""
    # 5 of 7 gives 0.855, 6 of 7 0.965: the line names the fewest that stop, as the rule computes them
    assert stop_posterior(5, 7) < 0.9 <= stop_posterior(6, 7)
    assert "6 or more of 7" in stop_consequences(k=7, k_max=8, stop_confidence=0.9).lines[0]


@pytest.mark.parametrize(
    "k, k_max, confidence, warning",
    [
        (3, 4, 0.99, "No prompt can stop before k_max = 4 labels, so adaptive k would give every prompt 4"),
        (3, 3, 0.9, "k_max = k = 3: every prompt gets 3 labels, as without adaptive k."),
    ],
)
def test_settings_that_make_adaptive_k_pointless_say_so(k, k_max, confidence, warning):
    said = stop_consequences(k=k, k_max=k_max, stop_confidence=confidence)
    assert said.pointless and said.warning.startswith(warning)


def test_the_form_refuses_pointless_adaptive_k_and_says_what_it_would_do(researcher_client):
    response = researcher_client.post(reverse("campaign_create"), campaign_fields(k=3, k_max=4, stop_confidence=0.99))
    assert response.status_code == 200 and not Campaign.objects.exists()
    assert response.context["form"].errors["k_max"][0].startswith("No prompt can stop before k_max = 4 labels")
    page = response.content.decode()
    assert "With k = 3 and 0.99, no prompt stops at 3" in page
    assert "At 4 labels (the most) every prompt stops, whatever its answers." in page


def test_the_endpoint_answers_the_script_with_the_same_words(researcher_client):
    url = reverse("stop_rule_consequences")
    answer = researcher_client.get(url, {"k": "3", "k_max": "5", "stop_confidence": "0.95"}).json()
    assert answer == {"lines": stop_consequences(k=3, k_max=5, stop_confidence=0.95).lines, "warning": ""}
    default = researcher_client.get(url, {"k": "3", "k_max": "4", "stop_confidence": ""}).json()
    assert default["lines"][0].startswith("With k = 3 and 0.95, no prompt stops at 3")
    for bad in (
        {"k": "3", "k_max": ""},
        {"k": "3", "k_max": "2"},
        {"k": "x", "k_max": "4"},
        {"k": "1", "k_max": "999"},
    ):
        assert researcher_client.get(url, bad).json() == {"lines": [], "warning": ""}, bad


def test_the_endpoint_needs_a_sign_in(client):
    response = client.get(reverse("stop_rule_consequences"), {"k": "3", "k_max": "5"})
    assert response.status_code == 302 and response.url.startswith(reverse("login"))


# --- grouping and the error summary -------------------------------------------------------------------


def test_every_group_shows_under_its_heading_without_script(researcher_client):
    page = researcher_client.get(reverse("campaign_create")).content.decode()
    for _key, legend, schemas, names in CAMPAIGN_FORM_GROUPS:
        assert f"<legend>{legend}</legend>" in page
        if schemas:
            assert f'data-schemas="{" ".join(schemas)}"' in page
        for name in names:
            assert f'name="{name}"' in page
    assert 'data-schemas="rating option_rating"' in page and "js/campaign_form.js" in page
    form_fields = [name for _key, _legend, _schemas, names in CAMPAIGN_FORM_GROUPS for name in names]
    assert sorted(form_fields) == sorted(CampaignForm._meta.fields)  # every field in exactly one group


def test_errors_are_summed_up_above_the_form_linking_to_each_field(researcher_client):
    response = researcher_client.post(
        reverse("campaign_create"), campaign_fields(title="", k=3, k_max=2, control_rate="2")
    )
    page = response.content.decode()
    summary = page[page.index('class="error-summary"') : page.index('class="form campaign-form"')]
    assert '<a href="#id_title">Title: This field is required.</a>' in summary
    assert '<a href="#id_k_max">Most labels per prompt (adaptive k): ' in summary
    assert summary.index("id_title") < summary.index("id_k_max")
    assert page.count("This field is required.") == 2  # at the top and beside the field


# --- fields fixed once prompts exist ---------------------------------------------------------------------


def test_fixed_settings_do_not_make_an_old_pointless_rule_an_error(researcher_client, make_campaign):
    """A campaign whose adaptive k is already pointless (made through the API or before the check) keeps
    it once prompts exist, and its other settings still save."""
    campaign = make_campaign(2, k=3, k_max=3, launch=False)
    url = reverse("campaign_edit", args=[campaign.slug])
    page = researcher_client.get(url).content.decode()
    assert "k_max = k = 3: every prompt gets 3 labels" in page  # the consequence is shown all the same
    response = researcher_client.post(url, campaign_fields(title="Renamed", k=3, k_max=3))
    assert response.status_code == 302
    campaign.refresh_from_db()
    assert campaign.title == "Renamed"


def test_a_draft_without_prompts_has_no_fixed_field(researcher_client, make_campaign):
    campaign = make_campaign(0, launch=False)
    page = researcher_client.get(reverse("campaign_edit", args=[campaign.slug])).content.decode()
    assert "disabled" not in page and "Fixed once prompts are imported" not in page


# --- names: one per owner -----------------------------------------------------------------------------


def test_the_form_refuses_an_owner_s_second_campaign_of_a_name(researcher_client, researcher, make_user):
    first = services.campaign_create(owner=researcher, title="Plausible or not")
    services.campaign_create(owner=make_user("other"), title="Same name elsewhere")
    response = researcher_client.post(reverse("campaign_create"), campaign_fields(title="  PLAUSIBLE or NOT "))
    error = response.context["form"].errors["title"][0]
    assert error.startswith(f"researcher already has a campaign called “Plausible or not” ({first.slug}, created ")
    assert Campaign.objects.filter(owner=researcher).count() == 1
    # another owner's name is free
    response = researcher_client.post(reverse("campaign_create"), campaign_fields(title="Same name elsewhere"))
    assert response.status_code == 302


def test_an_edit_keeps_its_own_name_even_one_shared_before_the_rule(researcher_client, researcher):
    """Old databases may hold two campaigns of one owner with one name: each keeps it until renamed."""
    old = services.campaign_create(owner=researcher, title="Twin")
    Campaign.objects.create(owner=researcher, title="twin", slug="twin-2")  # as before the rule
    response = researcher_client.post(
        reverse("campaign_edit", args=[old.slug]), campaign_fields(title="Twin", instructions="Changed")
    )
    assert response.status_code == 302
    other = services.campaign_create(owner=researcher, title="Third")
    response = researcher_client.post(reverse("campaign_edit", args=[other.slug]), campaign_fields(title="TWIN"))
    assert "already has a campaign called “Twin”" in response.context["form"].errors["title"][0]


def test_the_api_refuses_a_clashing_name_on_create_and_rename(researcher):
    api = APIClient()
    api.force_authenticate(researcher)
    first = api.post("/api/v1/campaigns/", {"title": "Round one"}, format="json").json()
    second = api.post("/api/v1/campaigns/", {"title": "Round two"}, format="json").json()
    clash = api.post("/api/v1/campaigns/", {"title": "round ONE"}, format="json")
    assert clash.status_code == 400
    assert "already has a campaign called “Round one”" in clash.json()["error"]["fields"]["title"][0]
    rename = api.patch(f"/api/v1/campaigns/{second['slug']}/", {"title": "Round one "}, format="json")
    assert rename.status_code == 400 and first["slug"] in rename.json()["error"]["fields"]["title"][0]
    same = api.patch(f"/api/v1/campaigns/{first['slug']}/", {"title": "Round one", "k": 4}, format="json")
    assert same.status_code == 200


def test_copies_are_named_copy_then_copy_2(researcher_client, researcher):
    source = services.campaign_create(owner=researcher, title="Source")
    names = [services.campaign_copy(campaign=source, owner=researcher).title for _ in range(3)]
    assert names == ["Source (copy)", "Source (copy 2)", "Source (copy 3)"]
    page = researcher_client.get(reverse("campaign_detail", args=[source.slug])).content.decode()
    assert 'value="Source (copy 4)"' in page  # the copy form offers the next free name
    response = researcher_client.post(
        reverse("campaign_copy", args=[source.slug]), {"title": "source (COPY)"}, follow=True
    )
    assert any("already has a campaign called “Source (copy)”" in m for m in messages_of(response))
    assert Campaign.objects.count() == 4
    long = services.campaign_create(owner=researcher, title="x" * 200)
    assert services.campaign_copy(campaign=long, owner=researcher).title == "x" * 193 + " (copy)"


def test_the_home_page_shows_each_campaign_s_slug_and_date(researcher_client, researcher):
    campaign = services.campaign_create(owner=researcher, title="Dated")
    page = researcher_client.get("/").content.decode()
    assert f'<code class="campaign-slug">{campaign.slug}</code>' in page
    assert f"{campaign.created_at:%Y-%m-%d}</time>" in page


# --- the worker's first task ------------------------------------------------------------------------------


def test_the_instructions_are_open_on_a_worker_s_first_task_only(client, make_user, make_campaign):
    worker_client = client
    worker_client.force_login(make_user("wanda"))
    campaign = make_campaign(5, k=1, instructions="Read **this**.")
    task_url = worker_client.get(reverse("worker_next", args=[campaign.slug])).url
    first = worker_client.get(task_url).content.decode()
    assert re.search(r'<details class="card instructions-toggle" open>', first)
    label_on_page(worker_client, campaign)
    task_url = worker_client.get(reverse("worker_next", args=[campaign.slug])).url
    later = worker_client.get(task_url).content.decode()
    assert '<details class="card instructions-toggle">' in later


def test_a_field_in_no_group_still_shows(researcher, monkeypatch):
    """A setting added to the form but not to CAMPAIGN_FORM_GROUPS is shown for every schema, not lost."""
    from annotation import forms

    groups = tuple(group for group in CAMPAIGN_FORM_GROUPS if group[0] != "workers")
    monkeypatch.setattr(forms, "CAMPAIGN_FORM_GROUPS", groups)
    last = CampaignForm(owner=researcher).groups()[-1]
    assert (last.legend, last.schemas) == ("More settings", ())
    assert [field.name for field in last.fields] == CAMPAIGN_FORM_GROUPS[-1][3]
