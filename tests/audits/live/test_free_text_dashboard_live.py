"""The dashboard of a free-text campaign: the skip reason instead of a full audit, the answer noise of
``answers_overview`` in its feed (checked against hand-worked values), an ETag that moves with labels and
clustering saves, and a binary campaign's dashboard left as it was."""

import math

import pytest
from django.urls import reverse
from scipy.stats import entropy

from annotation import services
from annotation.models import Label
from audits import selectors
from audits import services as audit_services
from audits.models import AnswerClustering
from audits.selectors.full import FREE_TEXT_SKIP_REASON
from audits.services import clustering as clustering_services
from tests.audits.live.free_text import free_text_campaign
from tests.audits.live.labeling import label_one_each
from tests.helpers import jsonl

pytestmark = pytest.mark.django_db

Role = AnswerClustering.Role
QUESTIONS = {
    "q1": ("Name something you drink in the morning.", ["coffee", "Coffee", "tea", "juice"]),
    "q2": ("Name a pet.", ["dog", "cat", "dog", "hamster"]),
    "q3": ("Name a colour.", ["red", "blue", "green", "pink"]),
}


def _ids(campaign, external_id):
    prompt = campaign.prompts.get(external_id=external_id)
    return prompt, list(Label.objects.filter(prompt=prompt).order_by("id").values_list("id", flat=True))


def _save(prompt, by, groups, invalid=(), *, role, base=0):
    assignment = {str(pk): name for name, pks in groups.items() for pk in pks}
    return clustering_services.clustering_save(
        prompt=prompt, by=by, role=role, assignment=assignment, invalid=invalid, base_version=base
    )


@pytest.fixture
def clustered(researcher, make_user):
    """q1 adjudicated (coffee ×2, tea; juice invalid) after two independent clusterings, q2 only proposed
    (the engine's proposal), q3 not clustered."""
    campaign = free_text_campaign(researcher, QUESTIONS)
    alice, bob, carol = make_user("alice"), make_user("bob"), make_user("carol")
    campaign.collaborators.add(alice, bob, carol)
    q1, (c1, c2, t, j) = _ids(campaign, "q1")
    _save(q1, alice, {"coffee": [c1, c2], "tea": [t], "juice": [j]}, role=Role.INDEPENDENT)
    _save(q1, bob, {"coffee": [c1, c2], "other": [t, j]}, role=Role.INDEPENDENT)
    _save(q1, carol, {"coffee": [c1, c2], "tea": [t]}, invalid=[j], role=Role.ADJUDICATED)
    q2, _ = _ids(campaign, "q2")
    clustering_services.clustering_propose(prompt=q2)
    return campaign


def _feed(client, campaign, **headers):
    return client.get(reverse("audit_dashboard_data", args=[campaign.slug]), **headers)


def test_the_feed_carries_the_answer_noise_of_answers_overview(client, clustered, researcher):
    client.force_login(researcher)
    ft = _feed(client, clustered).json()["free_text"]
    overview = selectors.answers_overview(campaign=clustered)
    summary = overview["summary"]
    assert ft["skip_reason"] == FREE_TEXT_SKIP_REASON
    assert ft["distribution"] == summary.distribution
    assert [(p["id"], p["entropy_bits"], p["top_share"]) for p in ft["most_divided"]] == summary.most_divided
    assert ft["failing_filter"] == summary.failing_filter == []
    assert (ft["n_prompts"], ft["n_answers"], ft["n_proposed"], ft["n_clustered"], ft["n_adjudicated"]) == (
        3,
        12,
        1,
        1,
        1,
    )
    assert ft["mean_blanc"] == overview["mean_blanc"]
    # By hand: q1 final = {coffee: 2, tea: 1} + 1 invalid; q2 proposal = {dog: 2, cat: 1, hamster: 1}.
    h1, h2 = entropy([2, 1], base=2), entropy([2, 1, 1], base=2)
    assert math.isclose(h2, 1.5)
    ent = ft["distribution"]["entropy_bits"]
    assert ent["n"] == 2 and math.isclose(ent["mean"], (h1 + h2) / 2) and math.isclose(ent["median"], (h1 + h2) / 2)
    assert math.isclose(ent["q1"], h1 + (h2 - h1) / 4) and math.isclose(ent["q3"], h1 + 3 * (h2 - h1) / 4)
    assert math.isclose(ft["distribution"]["top_share"]["mean"], (2 / 3 + 1 / 2) / 2)
    assert math.isclose(ft["distribution"]["invalid_share"]["mean"], (1 / 4 + 0) / 2)
    assert ft["distribution"]["n_clusters"]["median"] == 2.5
    assert [p["id"] for p in ft["most_divided"]] == ["q2", "q1"]


def test_a_binary_campaigns_feed_has_no_free_text_part(client, make_campaign, researcher):
    campaign = make_campaign(2, k=3)
    label_one_each(campaign, [1, 0, 1])
    audit_services.audit_refresh(campaign_id=campaign.pk)
    client.force_login(researcher)
    d = _feed(client, campaign).json()
    assert d["free_text"] is None and d["quick"]["n_labels"] == 3
    html = client.get(reverse("audit_dashboard", args=[campaign.slug])).content.decode()
    assert 'id="free-text"' not in html and 'id="link-answers"' not in html
    assert html.count("card binary-only") == 7 and 'binary-only" hidden' not in html  # all seven shown
    assert 'data-free-text="true"' not in html


def test_the_page_states_the_skip_reason_hides_the_binary_sections_and_links_the_pages(client, clustered, researcher):
    client.force_login(researcher)
    html = client.get(reverse("audit_dashboard", args=[clustered.slug])).content.decode()
    assert f"No full audit for this campaign: {FREE_TEXT_SKIP_REASON}." in html
    assert html.count('class="card binary-only" hidden') == 7  # the six numbers … the ground truths
    for name in ("audit_answers", "audit_systems", "audit_card", "audit_answers_export"):
        assert f'href="{reverse(name, args=[clustered.slug])}"' in html
    workspace = reverse("audit_answer_workspace", args=[clustered.slug, "PROMPT-ID"])
    assert f'data-workspace-url="{workspace}"' in html


def test_the_etag_changes_when_a_clustering_is_saved_or_a_label_arrives(client, make_campaign, researcher):
    draft = make_campaign(0, k=3, launch=False, schema="free_text", answer_min_length=1, answer_max_length=40)
    data = jsonl({"id": "a", "text": "Name a drink."}, {"id": "b", "text": "Name a pet."})
    services.prompts_import(campaign=draft, data=data, filename="prompts.jsonl")
    campaign = services.campaign_transition(campaign=draft, action="launch")
    label_one_each(campaign, ["coffee", "tea"])
    audit_services.audit_refresh(campaign_id=campaign.pk)
    client.force_login(researcher)
    first = _feed(client, campaign)
    tag = first["ETag"]
    assert first.json()["free_text"]["n_answers"] == 2
    assert first.json()["quick"]["progress"]["labels"] == 2  # the progress bar counts free-text labels too
    assert _feed(client, campaign, HTTP_IF_NONE_MATCH=tag).status_code == 304
    prompt = Label.objects.filter(campaign=campaign).first().prompt
    # Random assignment may have put both labels on one prompt: the clustering takes all of its answers.
    pks = list(Label.objects.filter(prompt=prompt).values_list("id", flat=True))
    _save(prompt, researcher, {"drinks": pks}, role=Role.INDEPENDENT)
    saved = _feed(client, campaign, HTTP_IF_NONE_MATCH=tag)
    assert saved.status_code == 200 and saved["ETag"] != tag
    assert _feed(client, campaign, HTTP_IF_NONE_MATCH=saved["ETag"]).status_code == 304
    label_one_each(campaign, ["juice"])
    arrived = _feed(client, campaign, HTTP_IF_NONE_MATCH=saved["ETag"])
    assert arrived.status_code == 200 and arrived["ETag"] != saved["ETag"]
    assert arrived.json()["free_text"]["n_answers"] == 3
