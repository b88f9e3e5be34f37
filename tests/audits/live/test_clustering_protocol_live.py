"""A free-text campaign's clustering protocol (issue 21, "Free text for a small lab"): under ``single`` one
researcher's save is final at once (answers page, export, leaderboard, card, with no agreement measured);
under ``double_blind`` (the default) a researcher's own independent clustering shows in their numbers
without breaking the blind, and only an adjudicated one is scored. Saves and protocol changes are logged."""

import json

import pytest
from django.core.exceptions import ValidationError

from annotation.models import Activity, Campaign, Label, Prompt
from annotation.services.campaigns import campaign_update
from audits.models import AnswerClustering
from audits.selectors import card as card_selectors
from audits.selectors import clustering as selectors
from audits.selectors import feed as feed_selectors
from audits.selectors import systems as systems_selectors
from audits.services import clustering as services
from audits.services import systems as system_services
from tests.audits.live.free_text import free_text_campaign
from tests.helpers import signed_in

pytestmark = pytest.mark.django_db

Role = AnswerClustering.Role
SINGLE, DOUBLE_BLIND = Campaign.ClusteringProtocol.SINGLE, Campaign.ClusteringProtocol.DOUBLE_BLIND
QUESTIONS = {
    "q1": ("Name something you drink in the morning.", ["coffee", "Coffee", "tea", "juice"]),
    "q2": ("Name a pet.", ["dog", "cat"]),
}


@pytest.fixture
def world(researcher, make_user):
    campaign = free_text_campaign(researcher, QUESTIONS)
    alice, bob = make_user("alice"), make_user("bob")
    campaign.collaborators.add(alice, bob)
    prompt = campaign.prompts.get(external_id="q1")
    ids = list(Label.objects.filter(prompt=prompt).order_by("id").values_list("id", flat=True))
    return campaign, prompt, ids, alice, bob


def save(prompt, by, groups: dict, *, base, role, invalid=()):
    assignment = {str(pk): name for name, pks in groups.items() for pk in pks}
    return services.clustering_save(
        prompt=prompt, by=by, role=role, assignment=assignment, invalid=invalid, base_version=base
    )


def upload_system(campaign, by):
    ranked = json.dumps({"q1": ["coffee", "tea"], "q2": ["dog"]}).encode()
    system_services.system_upload(campaign=campaign, name="baseline", data=ranked, filename="ranked.json", by=by)


def test_existing_and_new_campaigns_stay_double_blind_and_other_schemas_cannot_be_single(researcher):
    campaign = free_text_campaign(researcher, QUESTIONS)
    assert campaign.clustering_protocol == DOUBLE_BLIND
    binary = Campaign(owner=researcher, title="b", slug="b", schema="binary", clustering_protocol=SINGLE)
    binary.full_clean()
    assert binary.clustering_protocol == DOUBLE_BLIND  # only answers are clustered


def test_double_blind_a_researchers_own_saved_clustering_shows_in_their_numbers_only(world, researcher):
    campaign, prompt, (c1, c2, t, j), alice, bob = world
    upload_system(campaign, researcher)
    # No proposal was saved (the workspace opens on an unsaved one): the numbers were "not clustered yet".
    save(prompt, alice, {"coffee": [c1, c2], "tea": [t], "juice": [j]}, base=0, role=Role.INDEPENDENT)
    row = selectors.answers_overview(campaign=campaign, user=alice)["rows"][0]
    assert (row.noise_source, row.noise.n_clusters, row.clusterings.final) == ("yours", 3, None)
    blind = selectors.answers_overview(campaign=campaign, user=bob)["rows"][0]
    assert (blind.noise_source, blind.noise) == ("", None)  # Alice's clustering stays hidden from Bob
    services.clustering_propose(prompt=prompt)
    assert selectors.answers_overview(campaign=campaign, user=bob)["rows"][0].noise_source == "proposal"
    assert selectors.answers_overview(campaign=campaign, user=alice)["rows"][0].noise_source == "yours"
    # Not final: nothing to score, nothing exported.
    assert selectors.clusters_export(campaign=campaign) == []
    board = systems_selectors.leaderboard(campaign=campaign)
    assert board["reason"] == "no prompt has a final (adjudicated) clustering of its answers yet"
    assert board["agreement_note"] is None
    with pytest.raises(ValidationError, match="two researchers have clustered this prompt independently"):
        save(prompt, bob, {"all": [c1, c2, t, j]}, base=0, role=Role.ADJUDICATED)


def test_single_a_save_is_final_everywhere_without_agreement(world, researcher):
    campaign, prompt, (c1, c2, t, j), alice, bob = world
    campaign_update(campaign=campaign, clustering_protocol=SINGLE)
    campaign.refresh_from_db()
    upload_system(campaign, researcher)
    clusterings = selectors.prompt_clusterings(prompt=prompt)
    assert selectors.workspace_role(clusterings=clusterings, user=alice) == Role.ADJUDICATED
    with pytest.raises(ValidationError, match="clustering protocol is single: a save is the final clustering"):
        save(prompt, alice, {"all": [c1, c2, t, j]}, base=0, role=Role.INDEPENDENT)
    final = save(prompt, alice, {"coffee": [c1, c2], "tea": [t]}, invalid=[j], base=0, role=Role.ADJUDICATED)

    overview = selectors.answers_overview(campaign=campaign, user=bob)
    row = overview["rows"][0]
    assert (row.noise_source, row.clusterings.final, row.agreement) == ("final", final, None)
    assert (row.noise.n_clusters, row.noise.invalid_share) == (2, 0.25)
    assert (overview["n_final"], overview["clustering_protocol"], overview["mean_blanc"]) == (1, SINGLE, None)
    # the dashboard counts final clusterings, not independent pairs nobody makes under single
    feed = feed_selectors.free_text_feed(campaign=campaign)
    assert (feed["clustering_protocol"], feed["n_final"], feed["n_clustered"]) == (SINGLE, 1, 0)
    [exported] = selectors.clusters_export(campaign=campaign)
    assert exported["answers"]["clusters"] == {
        "coffee": {"count": 2, "answers": ["coffee", "Coffee"]},
        "tea": {"count": 1, "answers": ["tea"]},
    }
    board = systems_selectors.leaderboard(campaign=campaign)
    assert (board["reason"], board["n_prompts"], board["clustering_protocol"]) == (None, 1, SINGLE)
    assert board["agreement_note"] == "single annotator, no agreement measured"
    # q1 answered coffee first: its cluster of 2 over the largest cluster, 2.
    assert board["systems"]["baseline"]["metrics"]["max_answers@1"] == pytest.approx(1.0)
    card = card_selectors.instrument_card(campaign=campaign)
    assert card["procedure"]["clustering"] == {
        "protocol": SINGLE,
        "text": "one researcher's saved clustering of a prompt is final (single annotator, no agreement measured)",
    }
    # Another researcher of the lab corrects the same final clustering: one shared lane, stale saves refused.
    with pytest.raises(ValidationError, match="Version 1 of this clustering was saved by alice"):
        save(prompt, bob, {"drinks": [c1, c2, t, j]}, base=0, role=Role.ADJUDICATED)
    second = save(prompt, bob, {"drinks": [c1, c2, t, j]}, base=1, role=Role.ADJUDICATED)
    assert selectors.prompt_clusterings(prompt=prompt).final == second


def test_switching_to_single_makes_an_earlier_independent_clustering_final(world, researcher):
    campaign, prompt, (c1, c2, t, j), alice, bob = world
    save(prompt, alice, {"coffee": [c1, c2], "other": [t, j]}, base=0, role=Role.INDEPENDENT)
    later = save(prompt, bob, {"coffee": [c1, c2, t, j]}, base=0, role=Role.INDEPENDENT)
    assert selectors.prompt_clusterings(prompt=prompt).final is None
    campaign = campaign_update(campaign=campaign, clustering_protocol=SINGLE)
    prompt = Prompt.objects.get(pk=prompt.pk)  # with the campaign as it is now
    clusterings = selectors.prompt_clusterings(prompt=prompt)
    assert clusterings.final == later  # the latest save
    assert selectors.agreement(clusterings=clusterings, label_ids=[c1, c2, t, j]) is None
    assert [row["metadata"]["id"] for row in selectors.clusters_export(campaign=campaign)] == ["q1"]
    # Back to double-blind: those two are independent clusterings again, awaiting adjudication.
    campaign_update(campaign=campaign, clustering_protocol=DOUBLE_BLIND)
    clusterings = selectors.prompt_clusterings(prompt=Prompt.objects.get(pk=prompt.pk))
    assert clusterings.final is None and clusterings.both_independent


def test_saves_imports_and_protocol_changes_are_in_the_activity_log(world, researcher):
    campaign, prompt, (c1, c2, t, j), alice, bob = world
    campaign_update(campaign=campaign, clustering_protocol=SINGLE)
    edited = Activity.objects.get(campaign=campaign, verb="campaign.edited")
    assert (edited.summary, edited.detail) == ("Changed clustering_protocol", {"clustering_protocol": "single"})
    save(prompt, alice, {"coffee": [c1, c2], "tea": [t], "juice": [j]}, base=0, role=Role.ADJUDICATED)
    logged = Activity.objects.get(campaign=campaign, verb="clustering.saved")
    assert logged.actor == alice
    assert logged.summary == "Saved the adjudicated clustering of prompt q1 (final), version 1: 3 clusters, 0 invalid"
    assert logged.detail == {"prompt": "q1", "role": "adjudicated", "version": 1, "note": ""}
    services.expert_clusters_import(
        campaign=campaign, clusters={"q2": {"0": {"count": 2, "answers": ["dog", "cat"]}}}, by=researcher
    )
    imported = Activity.objects.get(campaign=campaign, verb="clustering.imported")
    assert (imported.actor, imported.detail["prompts"]) == (researcher, ["q2"])


def test_the_pages_follow_the_protocol_and_a_save_flashes_saved(world):
    campaign, prompt, (c1, c2, t, j), alice, bob = world
    client = signed_in(alice)
    page = client.get(f"/audits/{campaign.slug}/answers/").content.decode()
    assert "Clustering protocol: double-blind." in page and '<th scope="col">adjudicated</th>' in page
    # Double-blind, the reported bug: the saved clustering's author saw "not clustered yet" beside their name.
    dog, cat = Label.objects.filter(prompt__external_id="q2").order_by("id").values_list("id", flat=True)
    body = {"role": "independent", "baseVersion": 0, "assignment": {str(dog): "dog", str(cat): "cat"}}
    saved = client.post(f"/audits/{campaign.slug}/answers/q2/save/", json.dumps(body), content_type="application/json")
    assert saved.json() == {"version": 1, "clusters": 2}
    row = client.get(f"/audits/{campaign.slug}/answers/").content.decode().split('data-prompt="q2"')[1]
    row = row.split("</tr>")[0]
    assert "<td>alice</td>" in row and "(yours)" in row and "not clustered yet" not in row
    row = signed_in(bob).get(f"/audits/{campaign.slug}/answers/").content.decode().split('data-prompt="q2"')[1]
    assert "numbers once adjudicated" in row.split("</tr>")[0]  # the blind holds for Bob
    campaign_update(campaign=campaign, clustering_protocol=SINGLE)
    workspace = client.get(f"/audits/{campaign.slug}/answers/q1/").content.decode()
    assert "Clustering protocol <strong>single</strong>" in workspace
    body = {"role": "adjudicated", "baseVersion": 0, "assignment": {str(pk): "drinks" for pk in (c1, c2, t, j)}}
    response = client.post(
        f"/audits/{campaign.slug}/answers/q1/save/", json.dumps(body), content_type="application/json"
    )
    assert response.json() == {"version": 1, "clusters": 1}
    page = client.get(f"/audits/{campaign.slug}/answers/").content.decode()
    assert "Saved as version 1 (1 clusters). It is this prompt&#x27;s final clustering." in page
    assert "Clustering protocol: single." in page and "single annotator, no agreement measured" in page
    row = page.split('data-prompt="q1"')[1].split("</tr>")[0]
    assert "not clustered yet" not in row and "<td>alice</td>" in row and "yes (v1)" in row
