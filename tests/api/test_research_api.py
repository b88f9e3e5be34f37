"""The research API: everything a researcher page offers, a token client can do. Each resource answers
what its page (or the page's selector) shows, refuses bad input with a 400 naming the field, and
changes nothing on refusal."""

import json

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation import selectors as annotation_selectors
from annotation import services
from annotation.models import Invitation, Label
from audits.models import AnswerClustering, BootstrapRun, GroundTruthRun
from audits.selectors import answers_overview, figures
from audits.selectors import clustering as clustering_selectors
from audits.selectors.card import instrument_card
from audits.services import audit_full, audit_refresh, bootstrap_compute, ground_truths_compute
from tests.audits.live.free_text import free_text_campaign
from tests.clock import later
from tests.helpers import assert_error

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def token_api():
    """An API client authenticated by the user's token, as a script would be: ``token_api(user)``."""

    def make(user):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {services.api_token_get_or_create(user=user).key}")
        return client

    return make


@pytest.fixture
def audited(make_campaign, make_worker):
    """Six binary prompts, three labels each (worker n answers ``(prompt + n) % 2``), audited in full."""
    campaign = make_campaign(6, k=3)
    for n, worker in enumerate([make_worker() for _ in range(3)]):
        while not isinstance(lease := services.lease_acquire(campaign=campaign, worker=worker), services.NothingLeft):
            value = (lease.prompt_id + n) % 2
            services.label_submit(lease_id=lease.pk, worker=worker, value=value, client_token=f"t{lease.pk}")
    audit_refresh(campaign_id=campaign.pk)
    audit_full(campaign_id=campaign.pk)
    return campaign


def page(client, researcher, name, *args, query=""):
    """The page's (or its download's) answer, signed in the browser way."""
    client.force_login(researcher)
    return client.get(reverse(name, args=args) + query)


def plain(value):
    """A selector's value as JSON gives it back (tuples become lists)."""
    return json.loads(json.dumps(value, default=str))


# ---------------------------------------------------------------------------------- invitations
def test_invitations_make_list_and_revoke(make_campaign, researcher, token_api):
    campaign = make_campaign(2)
    client = token_api(researcher)
    url = f"/api/v1/campaigns/{campaign.slug}/invitations/"
    made = client.post(url, {"notes": ["Ada", "Bob"]}, format="json")
    assert made.status_code == 201
    assert [i["note"] for i in made.json()] == ["Ada", "Bob"]
    listed = client.get(url).json()
    expected = annotation_selectors.invitations_of(campaign=campaign)
    assert [i["id"] for i in listed] == [i.pk for i in expected]
    assert {i["url"] for i in listed} == {f"http://testserver/w/{campaign.slug}/join/{i.token}/" for i in expected}
    assert all(i["guest"] is None and i["worker_labels"] == 0 and not i["is_expired"] for i in listed)

    ada = Invitation.objects.get(note="Ada")
    assert client.delete(f"{url}{ada.pk}/").status_code == 204
    assert not Invitation.objects.filter(pk=ada.pk).exists()
    assert [i["note"] for i in client.get(url).json()] == ["Bob"]


def test_invitation_refusals_name_the_field_and_change_nothing(make_campaign, researcher, token_api, unchanged):
    campaign = make_campaign(2)
    accepted = services.invitations_create(campaign=campaign, created_by=researcher, notes=["taken"])[0]
    services.invitation_accept(invitation=accepted)
    client = token_api(researcher)
    url = f"/api/v1/campaigns/{campaign.slug}/invitations/"
    unchanged()
    assert "notes" in assert_error(client.post(url, {}, format="json"), 400, "invalid")["fields"]
    assert assert_error(client.post(url, {"notes": []}, format="json"), 400, "bad_count")["fields"] == {
        "notes": ["Make 1 to 200 invitations at a time."]
    }
    assert "notes" in assert_error(client.post(url, {"notes": ["x" * 201]}, format="json"), 400, "bad_note")["fields"]
    assert_error(client.delete(f"{url}{accepted.pk}/"), 409, "invitation_used")
    assert_error(client.delete(f"{url}999999/"), 404, "not_found")


# ---------------------------------------------------------------------------------- runs
def test_ground_truths_start_poll_and_result(audited, researcher, token_api, client):
    api = token_api(researcher)
    base = f"/api/v1/campaigns/{audited.slug}/audit/ground-truths/"
    started = api.post(base, {"methods": ["majority", "dawid_skene"]}, format="json")
    assert started.status_code == 202
    run = GroundTruthRun.objects.get()
    assert started.json() == {"id": run.pk, "status": "pending", "created": True}
    again = api.post(base, {"methods": ["majority"]}, format="json").json()
    assert again == {"id": run.pk, "status": "pending", "created": False}  # one waiting run per campaign

    poll = api.get(f"{base}{run.pk}/").json()
    assert (poll["status"], poll["methods"], poll["computed_at"]) == ("pending", ["majority", "dawid_skene"], None)
    assert_error(api.get(f"{base}{run.pk}/result/"), 409, "run_not_done")

    ground_truths_compute(run_id=run.pk)
    run.refresh_from_db()
    poll = api.get(f"{base}{run.pk}/").json()
    assert (poll["status"], poll["watermark"]) == ("done", 18)
    result = api.get(f"{base}{run.pk}/result/").json()
    assert result["data"] == plain(run.data) and set(result["data"]) == {"majority", "dawid_skene"}

    # The report's downloads now carry the ground truths, on the API as on the dashboard's link.
    report = api.get(f"/api/v1/campaigns/{audited.slug}/audit/report.json").json()
    assert report["ground_truths"] == plain(run.data)
    assert report == page(client, researcher, "audit_report", audited.slug, "json").json()


def test_ground_truths_refused_with_the_field_named(audited, researcher, token_api, unchanged):
    api = token_api(researcher)
    base = f"/api/v1/campaigns/{audited.slug}/audit/ground-truths/"
    unchanged()
    assert "methods" in assert_error(api.post(base, {}, format="json"), 400, "invalid")["fields"]
    error = assert_error(api.post(base, {"methods": ["oracle"]}, format="json"), 400, "invalid")
    assert "not oracle" in error["fields"]["methods"][0]
    assert_error(api.get(f"{base}999999/"), 404, "not_found")


def test_bootstrap_start_poll_and_result(audited, researcher, token_api, make_user, unchanged):
    api = token_api(researcher)
    base = f"/api/v1/campaigns/{audited.slug}/card/bootstrap/"
    started = api.post(base)
    assert started.status_code == 202
    run = BootstrapRun.objects.get()
    assert started.json() == {"id": run.pk, "status": "pending", "created": True}
    poll = api.get(f"{base}{run.pk}/").json()
    assert (poll["status"], poll["done_resamples"], poll["resamples"]) == ("pending", 0, 1000)
    assert_error(api.get(f"{base}{run.pk}/result/"), 409, "run_not_done")

    bootstrap_compute(run_id=run.pk)
    run.refresh_from_db()
    poll = api.get(f"{base}{run.pk}/").json()
    assert (poll["status"], poll["done_resamples"], poll["watermark"]) == ("done", 1000, 18)
    result = api.get(f"{base}{run.pk}/result/").json()
    assert result["data"] == plain(run.data) and set(result["data"]) == {"noise", "alpha"}

    # Somebody else's campaign, and its runs, do not exist for them.
    stranger = token_api(make_user("stranger"))
    unchanged()
    assert_error(stranger.get(f"{base}{run.pk}/"), 404, "not_found")
    assert_error(stranger.post(base), 404, "not_found")


# ---------------------------------------------------------------------------------- the card
def test_the_card_is_the_pages_card_json(audited, researcher, token_api, client):
    api = token_api(researcher)
    with later(0):  # the card states when it was computed: one instant for the page and the API
        body = api.get(f"/api/v1/campaigns/{audited.slug}/card/").json()
        assert body == page(client, researcher, "audit_card_export", audited.slug, "json").json()
        assert body == plain(instrument_card(campaign=audited))
        for fmt in ("md", "json", "html"):
            exported = api.get(f"/api/v1/campaigns/{audited.slug}/card.{fmt}")
            assert exported.status_code == 200
            assert exported.content == page(client, researcher, "audit_card_export", audited.slug, fmt).content
            assert exported["Content-Disposition"] == f'attachment; filename="{audited.slug}-instrument-card.{fmt}"'
    assert body["campaign"]["slug"] == audited.slug and body["unavailable"] is None


def test_the_card_compares_with_a_campaign_sharing_prompts(audited, make_campaign, researcher, token_api, client):
    other = make_campaign(6, title="Replication")  # the same prompt ids
    api = token_api(researcher)
    with later(0):
        body = api.get(f"/api/v1/campaigns/{audited.slug}/card/?compare={other.slug}").json()
        want = page(client, researcher, "audit_card_export", audited.slug, "json", query=f"?compare={other.slug}")
    assert body == want.json() and body["reproducibility"]["other"]["slug"] == other.slug
    error = assert_error(api.get(f"/api/v1/campaigns/{audited.slug}/card/?compare=nope"), 400, "invalid")
    assert list(error["fields"]) == ["compare"]


# ---------------------------------------------------------------------------------- Table 2, groups, figures
def test_compare_json_and_csv_equal_the_page(audited, make_campaign, researcher, token_api, client):
    fresh = make_campaign(2, title="Fresh")  # no full audit yet: a row without numbers
    api = token_api(researcher)
    query = f"?campaigns={audited.slug},{fresh.slug}"
    body = api.get(f"/api/v1/compare/{query}").json()
    rows = figures.compare_rows(campaigns=[audited, fresh])
    assert [c["key"] for c in body["columns"]] == [k for k, _ in figures.TABLE_COLUMNS]
    assert [r["slug"] for r in body["rows"]] == [audited.slug, fresh.slug]
    assert body["rows"][0]["row"] == plain(rows[0]["row"]) and body["rows"][0]["watermark"] == 18
    assert body["rows"][1]["row"] is None and body["rows"][1]["watermark"] is None
    csv = api.get(f"/api/v1/compare.csv{query}")
    assert csv["Content-Type"] == "text/csv; charset=utf-8"
    assert csv.content == page(client, researcher, "audit_compare", query=query + "&format=csv").content


def test_compare_refusals(audited, researcher, token_api, make_user, make_campaign):
    api = token_api(researcher)
    assert list(assert_error(api.get("/api/v1/compare/"), 400, "invalid")["fields"]) == ["campaigns"]
    assert list(assert_error(api.get("/api/v1/compare/?campaigns=,"), 400, "invalid")["fields"]) == ["campaigns"]
    theirs = services.campaign_create(owner=make_user("other"), title="Theirs")
    assert_error(api.get(f"/api/v1/compare/?campaigns={audited.slug},{theirs.slug}"), 404, "not_found")


def test_groups_equal_the_groups_page(audited, researcher, token_api, client):
    body = token_api(researcher).get(f"/api/v1/campaigns/{audited.slug}/audit/groups/").json()
    table = page(client, researcher, "audit_groups", audited.slug).context["table"]
    assert body["skip_reason"] is None
    assert body["whole"] == plain(table["whole"]) and body["whole"]["n_labels"] == 18
    assert body["rows"] == plain(table["rows"])
    assert (body["n_ungrouped"], body["n_labels"]) == (table["n_ungrouped"], 18)


def test_figures_data_equal_the_selector(audited, researcher, token_api):
    api = token_api(researcher)
    body = api.get(f"/api/v1/campaigns/{audited.slug}/audit/figures/").json()
    data = plain(figures.figures_data(campaign=audited))
    del body["computed_at"], data["computed_at"]  # the same instant, formatted by DRF vs str()
    assert body == data
    assert body["watermark"] == 18 and body["boxes"] and body["regressions"]


def test_figures_before_a_full_audit(make_campaign, researcher, token_api):
    campaign = make_campaign(2)
    assert_error(token_api(researcher).get(f"/api/v1/campaigns/{campaign.slug}/audit/figures/"), 404, "not_found")


# ---------------------------------------------------------------------------------- answer clusterings
@pytest.fixture
def free_text(researcher, make_user):
    campaign = free_text_campaign(researcher, {"q1": ("Name a drink.", ["coffee", "Coffee", "tea", "juice"])})
    alice, bob, carol = make_user("alice"), make_user("bob"), make_user("carol")
    campaign.collaborators.add(alice, bob, carol)
    ids = list(Label.objects.filter(prompt__external_id="q1").order_by("id").values_list("id", flat=True))
    return campaign, ids, alice, bob, carol


def test_clusterings_list_save_stale_and_adjudicate(free_text, token_api, researcher, client):
    campaign, (c1, c2, t, j), alice, bob, carol = free_text
    url = f"/api/v1/campaigns/{campaign.slug}/answers/q1/clusterings/"
    api = token_api(alice)
    listed = api.get(url).json()
    assert listed["role"] == "independent" and listed["base_version"] == 0 and listed["versions"] == []
    assert [(a["id"], a["answer"]) for a in listed["answers"]] == [
        (c1, "coffee"),
        (c2, "Coffee"),
        (t, "tea"),
        (j, "juice"),
    ]

    groups = {str(c1): "coffee", str(c2): "coffee", str(t): "tea"}
    first = api.post(
        url, {"role": "independent", "base_version": 0, "assignment": groups, "invalid": [j]}, format="json"
    )
    assert first.status_code == 201
    assert (first.json()["version"], first.json()["n_clusters"], first.json()["invalid"]) == (1, 2, [j])

    # A save based on version 0 again (another tab) is stale: 409 naming the rule, nothing saved.
    stale = api.post(
        url, {"role": "independent", "base_version": 0, "assignment": groups, "invalid": [j]}, format="json"
    )
    error = assert_error(stale, 409, "stale_version")
    assert "Version 1 of this clustering was saved" in error["message"] and "nothing was saved" in error["message"]
    assert AnswerClustering.objects.count() == 1
    assert api.get(url).json()["base_version"] == 1

    bob_api = token_api(bob)
    assert bob_api.get(url).json()["versions"] == []  # double-blind until both are saved
    both = {**groups, str(j): "juice"}
    assert (
        bob_api.post(url, {"role": "independent", "base_version": 0, "assignment": both}, format="json").status_code
        == 201
    )

    carol_api = token_api(carol)
    assert carol_api.get(url).json()["role"] == "adjudicated"
    assert len(carol_api.get(url).json()["versions"]) == 2
    final = carol_api.post(f"{url}adjudicate/", {"base_version": 0, "assignment": both}, format="json")
    assert final.status_code == 201 and final.json()["role"] == "adjudicated"

    # The export is the answers page's download, with the adjudicated clusters.
    export = api.get(f"/api/v1/campaigns/{campaign.slug}/answers.jsonl")
    assert export.content == page(client, researcher, "audit_answers_export", campaign.slug).content
    assert clustering_selectors.clusters_export(campaign=campaign)[0]["metadata"]["id"] == "q1"
    assert json.loads(export.content.decode().splitlines()[0]) == plain(
        clustering_selectors.clusters_export(campaign=campaign)[0]
    )


def test_clustering_refusals_name_the_field_and_change_nothing(free_text, token_api, unchanged):
    campaign, (c1, c2, t, j), alice, bob, carol = free_text
    url = f"/api/v1/campaigns/{campaign.slug}/answers/q1/clusterings/"
    api = token_api(alice)
    unchanged()
    fields = assert_error(api.post(url, {}, format="json"), 400, "invalid")["fields"]
    assert set(fields) == {"role", "base_version", "assignment"}
    bad_role = api.post(url, {"role": "proposal", "base_version": 0, "assignment": {}}, format="json")
    assert list(assert_error(bad_role, 400, "invalid")["fields"]) == ["role"]
    # a rule of the service (every answer in a cluster or invalid): 400 with its message
    partial = api.post(url, {"role": "independent", "base_version": 0, "assignment": {str(c1): "a"}}, format="json")
    assert "3 answers are in no cluster" in assert_error(partial, 400, "invalid")["message"]
    # adjudicating before two independent clusterings breaks ProtoQA's workflow
    early = api.post(f"{url}adjudicate/", {"base_version": 0, "assignment": {str(c1): "a"}}, format="json")
    assert "Adjudication starts once" in assert_error(early, 400, "invalid")["message"]
    assert_error(api.get(f"/api/v1/campaigns/{campaign.slug}/answers/nope/clusterings/"), 404, "not_found")


def test_clustering_propose_and_revert(free_text, token_api, unchanged):
    campaign, (c1, c2, t, j), alice, *_ = free_text
    base = f"/api/v1/campaigns/{campaign.slug}/answers/q1"
    api = token_api(alice)
    proposed = api.post(f"{base}/propose/").json()["proposal"]
    proposal = clustering_selectors.prompt_clusterings(prompt=campaign.prompts.get(external_id="q1")).proposal
    assert (proposed["id"], proposed["role"], proposed["assignment"]) == (proposal.pk, "proposal", proposal.assignment)
    assert api.post(f"{base}/propose/").json()["proposal"]["id"] == proposal.pk  # covers the answers already

    v1 = api.post(
        f"{base}/clusterings/",
        {"role": "independent", "base_version": 0, "assignment": proposal.assignment, "based_on": proposal.pk},
        format="json",
    ).json()
    one = {str(pk): "drinks" for pk in (c1, c2, t, j)}
    api.post(f"{base}/clusterings/", {"role": "independent", "base_version": 1, "assignment": one}, format="json")
    reverted = api.post(f"{base}/clusterings/{v1['id']}/revert/", {"base_version": 2}, format="json")
    assert reverted.status_code == 201
    assert (reverted.json()["version"], reverted.json()["assignment"]) == (3, proposal.assignment)

    unchanged()
    stale = api.post(f"{base}/clusterings/{v1['id']}/revert/", {"base_version": 2}, format="json")
    assert_error(stale, 409, "stale_version")
    missing = api.post(f"{base}/clusterings/{v1['id']}/revert/", {}, format="json")
    assert list(assert_error(missing, 400, "invalid")["fields"]) == ["base_version"]
    assert_error(
        api.post(f"{base}/clusterings/{proposal.pk}/revert/", {"base_version": 3}, format="json"), 400, "invalid"
    )


def test_the_answers_overview_and_proposing_for_every_prompt(free_text, token_api, researcher, client):
    campaign, (c1, c2, t, j), alice, bob, carol = free_text
    url = f"/api/v1/campaigns/{campaign.slug}/answers/"
    api = token_api(alice)
    before = api.get(url).json()
    assert before["summary"] is None and [row["noise_source"] for row in before["rows"]] == [""]
    assert api.post(url).json() == {"proposed": 1}
    assert api.post(url).json() == {"proposed": 1}  # the same proposal: it already covers every answer
    assert AnswerClustering.objects.filter(role="proposal").count() == 1
    overview = api.get(url).json()
    (row,) = overview["rows"]
    assert (row["prompt"], row["n_answers"], row["noise_source"], row["adjudicated"]) == ("q1", 4, "proposal", False)
    # The same numbers as the page shows.
    page = answers_overview(campaign=campaign)
    assert row["noise"]["entropy_bits"] == page["rows"][0].noise.entropy_bits
    assert overview["summary"]["n_prompts"] == page["summary"].n_prompts == 1
    client.force_login(alice)
    assert client.get(reverse("audit_answers", args=[campaign.slug])).status_code == 200
