"""Roles (issue 20): who may create campaigns, viewer collaborators, the activity log, and page
downloads for token clients."""

import csv
import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation import services
from annotation.models import Activity, Campaign, Collaboration
from annotation.permissions import CREATE_REFUSAL, INVITATIONS_NOT_FOR_VIEWERS, VIEWER_REFUSAL
from audits.services import audit_full
from tests.helpers import assert_error

pytestmark = pytest.mark.django_db


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


# ------------------------------------------------------------------------------ who creates campaigns


def test_an_account_that_signed_up_labels_but_cannot_create_a_campaign(client, make_user, api):
    client.post(
        reverse("signup"),
        {"username": "newcomer", "password1": "a-long-pass-phrase-1", "password2": "a-long-pass-phrase-1"},
    )
    newcomer = make_user("newcomer2")
    assert_error(api(newcomer).post("/api/v1/campaigns/", {"title": "Mine"}, format="json"), 403, "permission_denied")
    assert api(newcomer).post("/api/v1/campaigns/", {"title": "Mine"}, format="json").json()["error"]["message"] == (
        CREATE_REFUSAL
    )
    client.force_login(newcomer)
    assert client.get(reverse("campaign_create")).status_code == 403
    home = client.get(reverse("home")).content.decode()
    assert reverse("campaign_create") not in home  # no button that answers 403
    assert "manage.py researcher newcomer2" in home  # and it says how to become a researcher
    assert not Campaign.objects.exists()


def test_manage_researcher_grants_and_revokes_campaign_creation(make_user, api, capsys):
    user = make_user("ada")
    call_command("researcher", "ada")
    assert "ada can now create campaigns" in capsys.readouterr().out
    response = api(user).post("/api/v1/campaigns/", {"title": "Ada's"}, format="json")
    assert response.status_code == 201
    user = type(user).objects.get(pk=user.pk)  # permissions are cached per user object
    assert user.groups.filter(name="researchers").exists()
    call_command("researcher", "ada", "--revoke")
    user = type(user).objects.get(pk=user.pk)
    assert not user.has_perm("annotation.add_campaign")
    assert Campaign.objects.filter(owner=user).count() == 1  # what it owns stays its own
    with pytest.raises(CommandError, match="no user 'nobody'"):
        call_command("researcher", "nobody")


def test_a_superuser_creates_campaigns_without_the_group(make_user, api):
    boss = make_user("boss", is_superuser=True, is_staff=True)
    assert api(boss).post("/api/v1/campaigns/", {"title": "Boss's"}, format="json").status_code == 201


# ------------------------------------------------------------------------------ viewers


@pytest.fixture
def shared(make_campaign, researcher, make_user, api):
    """A live campaign with 4 prompts, shared with 'eve' as a viewer through the API."""
    campaign = make_campaign(4, k=2)
    viewer = make_user("eve")
    response = api(researcher).post(
        f"/api/v1/campaigns/{campaign.slug}/collaborators/", {"username": "eve", "role": "viewer"}, format="json"
    )
    assert response.status_code == 201
    assert response.json() == {"owner": "researcher", "collaborators": ["eve"], "roles": {"eve": "viewer"}}
    return campaign, viewer


def test_a_viewer_reads_everything_and_changes_nothing(shared, api, client):
    campaign, viewer = shared
    base = f"/api/v1/campaigns/{campaign.slug}"
    eve = api(viewer)
    assert eve.get(f"{base}/").json()["status"] == "live"
    assert eve.get(f"{base}/progress/").status_code == 200
    assert eve.get(f"{base}/labels.csv").status_code == 200
    error = assert_error(eve.post(f"{base}/pause/"), 403, "permission_denied")
    assert error["message"] == VIEWER_REFUSAL
    assert_error(eve.patch(f"{base}/", {"title": "Mine now"}, format="json"), 403, "permission_denied")
    assert_error(eve.post(f"{base}/prompts/", [{"id": "x", "text": "X"}], format="json"), 403, "permission_denied")
    campaign.refresh_from_db()
    assert (campaign.status, campaign.title, campaign.prompts.count()) == ("live", "Test campaign", 4)
    # The page: everything visible, no button that would answer 403.
    client.force_login(viewer)
    page = client.get(reverse("campaign_detail", args=[campaign.slug])).content.decode()
    assert "You are a viewer of this campaign" in page
    assert reverse("campaign_edit", args=[campaign.slug]) not in page
    assert reverse("campaign_transition", args=[campaign.slug, "pause"]) not in page
    assert reverse("campaign_import", args=[campaign.slug]) not in page
    assert reverse("campaign_export", args=[campaign.slug, "csv"]) in page
    assert client.get(reverse("audit_dashboard", args=[campaign.slug])).status_code == 200
    assert client.post(reverse("campaign_transition", args=[campaign.slug, "pause"])).status_code == 403


def test_a_viewer_does_not_see_invitation_links(shared, researcher, api, client):
    campaign, viewer = shared
    services.invitations_create(campaign=campaign, created_by=researcher, notes=["Ada Lovelace"])
    error = assert_error(api(viewer).get(f"/api/v1/campaigns/{campaign.slug}/invitations/"), 403, "permission_denied")
    assert error["message"] == INVITATIONS_NOT_FOR_VIEWERS
    client.force_login(viewer)
    assert client.get(reverse("campaign_invitation", args=[campaign.slug])).status_code == 403
    page = client.get(reverse("campaign_detail", args=[campaign.slug])).content.decode()
    assert reverse("campaign_invitation", args=[campaign.slug]) not in page
    assert "Ada Lovelace" not in page  # nor in the activity log, which viewers read
    assert "Ada Lovelace" not in str(list(Activity.objects.values_list("summary", "detail")))


def test_sharing_again_changes_the_role_and_a_bad_role_changes_nothing(shared, researcher, api):
    campaign, viewer = shared
    owner = api(researcher)
    url = f"/api/v1/campaigns/{campaign.slug}/collaborators/"
    error = assert_error(owner.post(url, {"username": "eve", "role": "admin"}, format="json"), 400, "invalid")
    assert "role" in error["fields"]
    assert Collaboration.objects.get(campaign=campaign, user=viewer).role == "viewer"
    assert owner.post(url, {"username": "eve", "role": "editor"}, format="json").json()["roles"] == {"eve": "editor"}
    assert api(viewer).post(f"/api/v1/campaigns/{campaign.slug}/pause/").json()["status"] == "paused"


# ------------------------------------------------------------------------------ the activity log


def test_every_change_is_in_the_activity_log_with_who_made_it(researcher, make_user, api, client):
    owner = api(researcher)
    slug = owner.post("/api/v1/campaigns/", {"title": "Logged", "k": 2}, format="json").json()["slug"]
    base = f"/api/v1/campaigns/{slug}"
    rows = [{"id": f"p{i}", "text": f"Prompt {i}", "gold": 1} for i in range(3)]
    assert owner.post(f"{base}/prompts/", rows, format="json").status_code == 201
    assert owner.patch(f"{base}/", {"instructions": "Be careful."}, format="json").status_code == 200
    assert owner.post(f"{base}/launch/").status_code == 200
    make_user("bob")
    assert owner.post(f"{base}/collaborators/", {"username": "bob"}, format="json").status_code == 201
    rule = {"metric": "straight_lining", "threshold": 0.9, "min_labels": 20, "action": "flag"}
    assert owner.post(f"{base}/quality-rules/", rule, format="json").status_code == 201
    bob = api(type(researcher).objects.get(username="bob"))
    assert bob.post(f"{base}/pause/").status_code == 200
    assert owner.get(f"{base}/labels.csv").status_code == 200

    entries = owner.get(f"{base}/activity/").json()
    assert [(e["actor"], e["verb"]) for e in reversed(entries)] == [
        ("researcher", "campaign.created"),
        ("researcher", "prompts.imported"),
        ("researcher", "campaign.edited"),
        ("researcher", "campaign.status_changed"),
        ("researcher", "collaborator.shared"),
        ("researcher", "rule.created"),
        ("bob", "campaign.status_changed"),
        ("researcher", "labels.exported"),
    ]
    assert entries[-2]["detail"] == {"n_prompts": 3, "filename": "prompts.json", **entries[-2]["detail"]}
    assert entries[-3]["detail"] == {"instructions": "Be careful."}
    assert entries[1]["summary"] == "Pause: now paused"
    # Filtering and paging.
    assert [e["verb"] for e in owner.get(f"{base}/activity/", {"verb": "campaign"}).json()] == [
        "campaign.status_changed",
        "campaign.status_changed",
        "campaign.edited",
        "campaign.created",
    ]
    statuses = owner.get(f"{base}/activity/", {"verb": "campaign.status_changed"}).json()
    assert [e["actor"] for e in statuses] == ["bob", "researcher"]
    page = owner.get(f"{base}/activity/", {"limit": 3}).json()
    older = owner.get(f"{base}/activity/", {"before": page[-1]["id"], "limit": 100}).json()
    assert [e["id"] for e in page + older] == [e["id"] for e in entries]
    assert_error(owner.get(f"{base}/activity/", {"limit": 0}), 400, "invalid")
    # The page shows it, and it downloads as CSV.
    client.force_login(researcher)
    page_html = client.get(reverse("campaign_detail", args=[slug])).content.decode()
    assert "Shared with bob as editor" in page_html
    download = client.get(reverse("campaign_activity_export", args=[slug]))
    table = list(csv.DictReader(io.StringIO(b"".join(download.streaming_content).decode())))
    assert [row["verb"] for row in table] == [e["verb"] for e in owner.get(f"{base}/activity/").json()]
    assert table[-1]["actor"] == "researcher"


def test_what_chorus_does_on_its_own_has_no_actor(make_campaign):
    campaign = make_campaign(2)
    services.campaign_transition(campaign=campaign, action="pause")  # no request: a task, a command
    assert Activity.objects.filter(campaign=campaign).latest("pk").actor is None


def test_a_refused_change_leaves_no_activity(shared, api):
    campaign, viewer = shared
    before = Activity.objects.count()
    api(viewer).post(f"/api/v1/campaigns/{campaign.slug}/pause/")
    assert Activity.objects.count() == before


# ------------------------------------------------------------------------------ downloads for token clients


def test_a_token_client_downloads_what_the_pages_offer(make_campaign, researcher, make_user):
    campaign = make_campaign(3, k=1)
    worker = services.worker_get_or_create(channel="panel", external_id="w1")
    lease = services.lease_acquire(campaign=campaign, worker=worker)
    services.label_submit(lease_id=lease.pk, worker=worker, value=1, client_token="t")
    audit_full(campaign_id=campaign.pk)
    client = token_client(researcher)
    for url in (
        reverse("audit_report", args=[campaign.slug, "json"]),
        reverse("audit_card_export", args=[campaign.slug, "json"]),
        reverse("campaign_export", args=[campaign.slug, "csv"]),
    ):
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
    report = client.get(reverse("audit_report", args=[campaign.slug, "json"])).json()
    assert report  # the same document as the page's download
    lower = APIClient()  # the keyword in any case, as the API's own authentication reads it
    lower.credentials(HTTP_AUTHORIZATION=f"token {Token.objects.get(user=researcher).key}")
    assert lower.get(reverse("audit_report", args=[campaign.slug, "json"])).status_code == 200
    # Same rules as the page: a stranger's token sees nothing.
    stranger = token_client(make_user("stranger"))
    assert stranger.get(reverse("audit_report", args=[campaign.slug, "json"])).status_code == 404
    # A bad token is refused in the API's error shape, not sent to the sign-in page.
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    assert_error(bad.get(reverse("audit_report", args=[campaign.slug, "json"])), 401, "authentication_failed")
    # Reads only: a page's form still needs a session (and its CSRF token).
    response = client.post(reverse("campaign_transition", args=[campaign.slug, "pause"]))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    campaign.refresh_from_db()
    assert campaign.status == "live"


@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_shares_as_editors_and_owners_as_researchers():
    """Before roles, every share was an editor's and any account could create campaigns: migrating
    keeps both (annotation 0009)."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    executor.migrate([("annotation", "0008_campaign_free_text_schema")])
    old = executor.loader.project_state([("annotation", "0008_campaign_free_text_schema")]).apps
    User, OldCampaign = old.get_model("auth", "User"), old.get_model("annotation", "Campaign")
    owner, colleague, bystander = (User.objects.create(username=name) for name in ("owner", "colleague", "bystander"))
    campaign = OldCampaign.objects.create(owner=owner, title="Before roles", slug="before-roles")
    campaign.collaborators.add(colleague)

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    users = get_user_model().objects
    assert list(Collaboration.objects.values_list("user__username", "role")) == [("colleague", "editor")]
    assert users.get(username="owner").has_perm("annotation.add_campaign")
    assert not users.get(username="colleague").has_perm("annotation.add_campaign")
    assert not users.get(username="bystander").has_perm("annotation.add_campaign")
