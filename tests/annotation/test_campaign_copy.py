"""A campaign from a campaign (``campaign_copy``): its settings and prompts, in a new draft of yours."""

import pytest
from django.urls import reverse

from annotation import services
from annotation.models import Activity, Campaign, Label, Prompt, Slot
from annotation.services.campaigns import EDITABLE_FIELDS
from tests.helpers import BINARIZATION, jsonl, label_all, messages_of, sim_worker

pytestmark = pytest.mark.django_db

PROMPT_FIELDS = ("external_id", "text", "options", "gold", "group", "is_control")


@pytest.fixture
def source(researcher):
    """A live rating campaign with every kind of setting and prompt: two imports, a control, groups, labels."""
    campaign = services.campaign_create(
        owner=researcher,
        title="Source",
        instructions="Rate *it*.",
        schema="rating",
        scale_min=1,
        scale_max=4,
        scale_anchors=["bad", "good"],
        binarization=BINARIZATION,
        k=2,
        k_max=4,
        stop_confidence=0.9,
        lease_seconds=120,
        max_labels_per_worker=50,
        policy="fill_first",
        control_rate=0.2,
        control_first=1,
    )
    services.prompts_import(
        campaign=campaign,
        data=jsonl(
            {"id": "a", "text": "A", "gold": 3, "group": "g1"},
            {"id": "c", "text": "Control", "gold": 1, "control": True},
        ),
        filename="one.jsonl",
    )
    services.prompts_import(
        campaign=campaign, data=jsonl({"id": 7, "text": "Seven", "group": "g2"}), filename="2.jsonl"
    )
    campaign = services.campaign_transition(campaign=campaign, action="launch")
    label_all(campaign, sim_worker(), value=4)
    return campaign


def _prompts(campaign):
    return list(campaign.prompts.order_by("external_id").values_list(*PROMPT_FIELDS))


def test_a_copy_is_a_draft_with_the_settings_and_prompts_and_nothing_else(source, make_user):
    owner = make_user("copier")
    copy = services.campaign_copy(campaign=source, owner=owner)

    assert (copy.owner, copy.status, copy.launched_at, copy.title) == (owner, "draft", None, "Source (copy)")
    assert copy.slug != source.slug
    for name in EDITABLE_FIELDS - {"title"}:
        assert getattr(copy, name) == getattr(source, name), name
    assert _prompts(copy) == _prompts(source)
    assert list(copy.prompts.values_list("n_labels", flat=True)) == [0, 0, 0]
    # k slots for each prompt but the control, none filled; no labels, leases, collaborators or publications
    assert Slot.objects.filter(campaign=copy, filled=False).count() == 2 * 2
    assert not Label.objects.filter(campaign=copy).exists() and not copy.leases.exists()
    assert not copy.collaborators.exists() and not copy.publications.exists()
    # one import per import of the source, so the copy, too, refuses the source's files
    assert sorted(copy.imports.values_list("filename", "sha256", "n_prompts")) == sorted(
        source.imports.values_list("filename", "sha256", "n_prompts")
    )
    record = Activity.objects.get(campaign=copy)
    assert (record.verb, record.summary, record.actor) == ("campaign.copied", f"Copied from {source.slug}", owner)
    assert record.detail == {"source": source.slug, "n_prompts": 3}


def test_a_copy_takes_a_title_and_leaves_its_source_alone(source, researcher):
    before = (
        _prompts(source),
        Label.objects.filter(campaign=source).count(),
        Activity.objects.filter(campaign=source).count(),
    )
    copy = services.campaign_copy(campaign=source, owner=researcher, title="Round two")
    assert copy.title == "Round two"
    after = (
        _prompts(source),
        Label.objects.filter(campaign=source).count(),
        Activity.objects.filter(campaign=source).count(),
    )
    assert after == before


def test_a_failed_copy_leaves_nothing(source, researcher, monkeypatch):
    """All or nothing: a failure while creating its prompts leaves no campaign, import or prompt behind."""
    from annotation.services import campaigns

    def broken(**kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(campaigns, "prompts_create", broken)
    before = (Campaign.objects.count(), Prompt.objects.count(), Activity.objects.count())
    with pytest.raises(RuntimeError):
        services.campaign_copy(campaign=source, owner=researcher)
    assert (Campaign.objects.count(), Prompt.objects.count(), Activity.objects.count()) == before


def test_the_page_copies_for_a_researcher_and_opens_the_new_draft(researcher_client, source):
    page = researcher_client.get(reverse("campaign_detail", args=[source.slug])).content.decode()
    assert "New campaign from this one" in page and reverse("campaign_copy", args=[source.slug]) in page
    response = researcher_client.post(reverse("campaign_copy", args=[source.slug]), {"title": "Again"}, follow=True)
    copy = Campaign.objects.get(title="Again")
    assert response.redirect_chain[-1][0] == reverse("campaign_detail", args=[copy.slug])
    assert "A new draft, copied from “Source” with its 3 prompts." in messages_of(response)


def test_the_page_offers_no_copy_to_a_collaborator_who_cannot_create_campaigns(client, source, make_user):
    editor = make_user("editor")
    services.campaign_share(campaign=source, username="editor")
    client.force_login(editor)
    page = client.get(reverse("campaign_detail", args=[source.slug])).content.decode()
    assert "New campaign from this one" not in page
    assert client.post(reverse("campaign_copy", args=[source.slug])).status_code == 403
    assert Campaign.objects.count() == 1


def test_the_instrument_card_offers_a_labeled_copy_for_reproducibility(researcher_client, researcher):
    """Issue: a copy shares its source's prompts (same ids), so the card's reproducibility section offers
    it as the second campaign, and compares the two once the copy has labels."""
    source = services.campaign_create(owner=researcher, title="Binary", k=3)
    services.prompts_import(
        campaign=source, data=jsonl(*({"id": f"p{i}", "text": f"P{i}"} for i in range(6))), filename="p.jsonl"
    )
    copy = services.campaign_copy(campaign=source, owner=researcher)
    for campaign, values in ((source, (1, 1, 0)), (copy, (1, 0, 0))):
        campaign = services.campaign_transition(campaign=campaign, action="launch")
        for value in values:
            label_all(campaign, sim_worker(), value=value)

    card = researcher_client.get(reverse("audit_card", args=[source.slug]), {"compare": copy.slug})
    assert card.status_code == 200
    assert copy in card.context["choices"]
    reproducibility = card.context["card"]["reproducibility"]
    assert (reproducibility["other"]["slug"], reproducibility["n_common"]) == (copy.slug, 6)
