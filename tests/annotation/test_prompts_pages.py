"""The prompts page and a prompt's page (issue 21): listing with search, filters and sorting, retiring and
bringing back ticked prompts (a refusal changes nothing and says why), a viewer reads and cannot retire,
and the campaign page links to the list."""

import csv
import io

import pytest
from django.urls import reverse

from annotation import services
from annotation.models import Prompt
from tests.helpers import label_one, messages_of, signed_in, sim_worker

pytestmark = pytest.mark.django_db


def pks(campaign, *external_ids) -> list[int]:
    return [Prompt.objects.get(campaign=campaign, external_id=e).pk for e in external_ids]


def test_the_campaign_page_links_to_the_prompts(make_campaign, researcher):
    campaign = make_campaign(2)
    page = signed_in(researcher).get(reverse("campaign_detail", args=[campaign.slug]))
    assert reverse("campaign_prompts", args=[campaign.slug]) in page.content.decode()


def test_the_list_searches_filters_and_pages(make_campaign, researcher):
    campaign = make_campaign(60)
    client = signed_in(researcher)
    url = reverse("campaign_prompts", args=[campaign.slug])
    first = client.get(url)
    assert first.status_code == 200
    assert first.context["page"].paginator.count == 60 and len(first.context["page"]) == 50
    assert "Retire the selected" in first.content.decode()
    found = client.get(url, {"search": "P5", "retired": "false"})
    assert [p.external_id for p in found.context["page"]] == ["p5", *(f"p5{i}" for i in range(10))]
    second = client.get(url, {"page": 2, "order": "-labels"})
    assert len(second.context["page"]) == 10
    bad = client.get(url, {"order": "sideways", "complete": "maybe"})
    assert bad.status_code == 400
    assert set(bad.context["filter_errors"]) == {"order", "complete"}
    assert bad.context["page"].paginator.count == 60


def test_retiring_ticked_prompts_and_a_refusal(make_campaign, researcher):
    campaign = make_campaign(3, k=2)
    labeled = label_one(campaign, sim_worker()).prompt
    free = [p.pk for p in Prompt.objects.filter(campaign=campaign).exclude(pk=labeled.pk).order_by("pk")]
    client = signed_in(researcher)
    url = reverse("prompts_retire", args=[campaign.slug])
    listing = reverse("campaign_prompts", args=[campaign.slug]) + "?retired=true"
    for form in ({"action": "retire"}, {"prompts": free, "action": "delete"}, {"prompts": ["x"], "action": "retire"}):
        nothing = client.post(url, {**form, "next": listing}, follow=True)
        assert any(m.startswith("Tick the prompts") for m in messages_of(nothing)), form
    refused = client.post(url, {"prompts": [free[0], labeled.pk], "action": "retire", "next": listing}, follow=True)
    assert refused.redirect_chain[-1][0] == listing
    assert any("Nothing was changed" in m and "1 counted label" in m for m in messages_of(refused))
    assert not Prompt.objects.filter(retired_at__isnull=False).exists()

    done = client.post(url, {"prompts": free, "action": "retire", "next": listing}, follow=True)
    assert "2 prompts retired." in messages_of(done)
    assert sorted(p.pk for p in done.context["page"]) == free
    assert done.content.decode().count('class="prompt-row retired"') == 2

    back = client.post(url, {"prompts": [free[0]], "action": "unretire", "next": "https://evil.example/"}, follow=True)
    assert back.redirect_chain[-1][0] == reverse("campaign_prompts", args=[campaign.slug])
    assert "1 prompt brought back." in messages_of(back)
    assert Prompt.objects.get(pk=free[0]).retired_at is None


def test_a_draft_shows_no_retire_buttons_and_refuses(make_campaign, researcher):
    campaign = make_campaign(2, launch=False)
    client = signed_in(researcher)
    page = client.get(reverse("campaign_prompts", args=[campaign.slug]))
    assert "Retire the selected" not in page.content.decode()
    assert "remove a whole import instead" in page.content.decode()
    refused = client.post(
        reverse("prompts_retire", args=[campaign.slug]),
        {"prompts": pks(campaign, "p0"), "action": "retire"},
        follow=True,
    )
    assert any("never launched" in m for m in messages_of(refused))


def test_a_viewer_reads_and_cannot_retire(make_campaign, make_user):
    campaign = make_campaign(2)
    viewer = make_user("viewer")
    services.campaign_share(campaign=campaign, username="viewer", role="viewer")
    client = signed_in(viewer)
    page = client.get(reverse("campaign_prompts", args=[campaign.slug]))
    assert page.status_code == 200 and "Retire the selected" not in page.content.decode()
    refused = client.post(reverse("prompts_retire", args=[campaign.slug]), {"prompts": pks(campaign, "p0")})
    assert refused.status_code == 403
    assert not Prompt.objects.filter(retired_at__isnull=False).exists()


def test_a_prompts_page_shows_its_labels_and_who_gave_them(make_campaign, researcher):
    campaign = make_campaign(1, k=2)
    worker = sim_worker()
    label = label_one(campaign, worker, value=0)
    services.label_void(label_id=label.pk, reason="returned on MTurk")
    label_one(campaign, sim_worker(), value=1)
    client = signed_in(researcher)
    page = client.get(reverse("campaign_prompt", args=[campaign.slug, label.prompt_id]))
    html = page.content.decode()
    assert page.status_code == 200
    assert worker.external_id in html and "void since" in html and "returned on MTurk" in html
    assert page.context["status"] == "open" and "It has counted labels, so it stays" in html
    other = make_campaign(1)
    stranger = Prompt.objects.get(campaign=other)
    assert client.get(reverse("campaign_prompt", args=[campaign.slug, stranger.pk])).status_code == 404


def test_a_prompt_without_labels_is_retired_from_its_page(make_campaign, researcher):
    campaign = make_campaign(1)
    (pk,) = pks(campaign, "p0")
    client = signed_in(researcher)
    url = reverse("campaign_prompt", args=[campaign.slug, pk])
    assert "Retire" in client.get(url).content.decode()
    done = client.post(
        reverse("prompts_retire", args=[campaign.slug]), {"prompts": [pk], "action": "retire", "next": url}, follow=True
    )
    assert done.context["status"] == "retired" and "Bring it back" in done.content.decode()


def test_the_prompts_csv_lists_retired_prompts_with_a_column_saying_so(researcher_client, make_campaign):
    campaign = make_campaign(3)
    retired = campaign.prompts.get(external_id="p1")
    services.prompts_retired_set(campaign=campaign, prompt_ids=[retired.pk], retired=True)
    response = researcher_client.get(f"/campaigns/{campaign.slug}/prompts.csv")
    assert response.status_code == 200 and response["Content-Type"] == "text/csv"
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [r["id"] for r in rows] == ["p0", "p1", "p2"]
    assert {r["id"]: r["retired"] for r in rows} == {"p0": "False", "p1": "True", "p2": "False"}
    assert {r["id"]: r["status"] for r in rows}["p1"] == "retired"
    only = researcher_client.get(f"/campaigns/{campaign.slug}/prompts.csv?retired=true")
    assert [r["id"] for r in csv.DictReader(io.StringIO(b"".join(only.streaming_content).decode()))] == ["p1"]


def test_the_prompts_page_and_api_give_each_prompts_entropy(researcher_client, make_campaign):
    campaign = make_campaign(1, k=4)
    for value in (1, 1, 0, 0):  # an even split of two values: 1 bit
        label_one(campaign, sim_worker(), value=value)
    page = researcher_client.get(f"/campaigns/{campaign.slug}/prompts/")
    [prompt] = page.context["page"]
    assert prompt.entropy_bits == pytest.approx(1.0) and "1.00 bits" in page.content.decode()
    listed = researcher_client.get(f"/api/v1/campaigns/{campaign.slug}/prompts/").json()
    assert [p["entropy_bits"] for p in listed["results"]] == [pytest.approx(1.0)]
    one = researcher_client.get(f"/api/v1/campaigns/{campaign.slug}/prompts/{prompt.pk}/").json()
    assert one["entropy_bits"] == pytest.approx(1.0)
