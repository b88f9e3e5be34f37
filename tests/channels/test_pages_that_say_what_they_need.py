"""Issue 21 on the channel pages: an MTurk that is not configured says what to set; a cost that moved
since its preview says why; a panel's participants are offered no Chorus account; the publication page
copies the study link and lets the researcher try the task without storing anything."""

import re

import pytest
from django.test import Client, override_settings

from annotation import services as core
from annotation.channels import services
from annotation.models import Label, Lease, Worker
from tests.channels.workers import OPTIONS
from tests.helpers import label_one

pytestmark = pytest.mark.django_db


# --- MTurk not configured ----------------------------------------------------------------------------


def _channels_page(client, researcher, campaign) -> str:
    client.force_login(researcher)
    return client.get(f"/channels/campaigns/{campaign.slug}/").content.decode()


def test_an_unconfigured_mturk_says_what_to_set(client, researcher, make_campaign):
    campaign = make_campaign(2)
    with override_settings(CHORUS_CHANNELS={}, CHORUS_PUBLIC_URL=""):
        page = _channels_page(client, researcher, campaign)
        publish_page = client.get(f"/channels/campaigns/{campaign.slug}/mturk/").content.decode()
    for text in (page, publish_page):
        assert "MTurk is not configured in this Chorus" in text
        assert "No channel &#x27;mturk&#x27; in CHORUS_CHANNELS" in text
        assert "CHORUS_PUBLIC_URL is not set to Chorus&#x27;s public https:// address" in text


def test_mturk_without_credentials_names_the_variables(client, researcher, make_campaign, monkeypatch, tmp_path):
    campaign = make_campaign(2)
    for name in ("CHORUS_MTURK_ACCESS_KEY_ID", "CHORUS_MTURK_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AWS_SHARED_CREDENTIALS_FILE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.aws/credentials
    config = {"mturk": {"BACKEND": "annotation.channels.mturk.MTurkChannel", "OPTIONS": {"sandbox": True}}}
    with override_settings(CHORUS_CHANNELS=config, CHORUS_PUBLIC_URL="https://chorus.example.org"):
        page = _channels_page(client, researcher, campaign)
        assert "No MTurk credentials found: set CHORUS_MTURK_ACCESS_KEY_ID and CHORUS_MTURK_SECRET_ACCESS_KEY" in page
        monkeypatch.setenv("CHORUS_MTURK_ACCESS_KEY_ID", "AKIDONLY")
        page = _channels_page(client, researcher, campaign)
        assert "Set both CHORUS_MTURK_ACCESS_KEY_ID and CHORUS_MTURK_SECRET_ACCESS_KEY, or neither." in page
        assert "AKIDONLY" not in page  # never a credential's value
        monkeypatch.setenv("CHORUS_MTURK_SECRET_ACCESS_KEY", "secret")
        assert "MTurk is not configured" not in _channels_page(client, researcher, campaign)


def test_a_configured_mturk_shows_no_warning(client, researcher, make_campaign, mturk):
    """The tests' MTurk: the real backend (pointed at a fake), with credentials in the environment."""
    assert "MTurk is not configured" not in _channels_page(client, researcher, make_campaign(2))


# --- the cost that moved -----------------------------------------------------------------------------


def test_labels_that_arrive_after_the_preview_are_named_with_the_new_total(
    client, researcher, make_campaign, make_worker, locmem_channel
):
    campaign = make_campaign(10, k=2)
    client.force_login(researcher)
    url = f"/channels/campaigns/{campaign.slug}/mturk/"
    form = {**OPTIONS, "assignments_per_hit": 9, "lifetime": 86400, "auto_approval_delay": 3600, "preview": "1"}
    preview = client.post(url, form)
    assert str(preview.context["preview"].total) == "2.40"  # 20 labels × (0.10 + 0.02)
    assert 'name="confirm_needed" value="20"' in preview.content.decode()
    for _ in range(2):
        label_one(campaign, make_worker())

    moved = client.post(url, {**form, "publish": "1", "confirm_total": "2.40", "confirm_needed": "20"})
    assert moved.status_code == 200 and not campaign.publications.exists()
    assert (
        moved.context["moved"]
        == "2 labels arrived since the preview; the total is now $2.16. Check it and publish again."
    )
    assert "2 labels arrived since the preview" in moved.content.decode()
    assert b"Publish for $2.16" in moved.content

    changed = client.post(url, {**form, "publish": "1", "confirm_total": "9.99", "confirm_needed": "18"})
    assert changed.context["moved"].startswith("The settings changed since the preview; the total is now $2.16.")
    assert not campaign.publications.exists()

    client.post(url, {**form, "publish": "1", "confirm_total": "2.16", "confirm_needed": "18"})
    assert campaign.publications.get().planned_assignments == 18


# --- panels: the participant's pages and the researcher's try-out ---------------------------------------


def _panel(campaign, researcher):
    return services.publication_create_panel(campaign=campaign, user=researcher, completion_code="DONE1").panel


def _has_account_links(html: str) -> bool:
    return "/accounts/login/" in html or "/accounts/signup/" in html


def test_a_panel_participant_is_offered_no_chorus_account(make_campaign, researcher):
    campaign = make_campaign(1, k=1)
    panel = _panel(campaign, researcher)
    participant = Client()
    response = participant.get(f"/channels/panel/{panel.slug}/", {"PROLIFIC_PID": "P1"}, follow=True)
    task = response.content.decode()
    assert 'class="label-form"' in task and not _has_account_links(task)
    assert 'class="brand" href="/"' not in task  # nor the home page, which offers both
    token = re.search(r'name="client_token" value="([^"]+)"', task).group(1)
    action = re.search(r'<form method="post" action="([^"]+)" class="label-form"', task).group(1)
    done = participant.post(action, {"value": "1", "client_token": token}, follow=True).content.decode()
    assert "DONE1" in done and not _has_account_links(done)
    error = Client().get(f"/channels/panel/{panel.slug}/next/").content.decode()  # no session
    assert not _has_account_links(error)


def test_the_publication_page_copies_the_link_and_offers_a_try_out(client, make_campaign, researcher):
    campaign = make_campaign(3)
    publication = _panel(campaign, researcher).publication
    client.force_login(researcher)
    page = client.get(f"/channels/publications/{publication.pk}/").content.decode()
    assert '<button type="button" class="button" data-copy-target="panel-url">Copy</button>' in page
    assert "js/copy.js" in page
    assert f'href="/channels/publications/{publication.pk}/try/"' in page


def test_trying_the_task_stores_nothing_and_uses_no_place(client, make_campaign, researcher, make_user):
    campaign = make_campaign(3, instructions="Say **yes**.")
    publication = _panel(campaign, researcher).publication
    client.force_login(researcher)
    url = f"/channels/publications/{publication.pk}/try/"
    before = (Label.objects.count(), Lease.objects.count(), Worker.objects.count(), publication.panel.sessions.count())
    first = client.get(url)
    page = first.content.decode()
    assert first.status_code == 200 and 'class="label-form"' in page and "Preview:" in page
    assert first.context["prompt"].text in page and "<strong>yes</strong>" in page
    assert "data-heartbeat-url" not in page
    answered = client.post(first.context["form_action"], {"value": "1", "client_token": "preview"}, follow=True)
    assert "Preview: that answer was not stored, and no place was used." in [
        str(m) for m in answered.context["messages"]
    ]
    assert answered.context["prompt"] != first.context["prompt"]  # the next one
    after = (Label.objects.count(), Lease.objects.count(), Worker.objects.count(), publication.panel.sessions.count())
    assert after == before
    # a viewer may try it (it changes nothing); a stranger does not learn it exists
    viewer = make_user("viewer")
    core.campaign_share(campaign=campaign, username="viewer", role="viewer")
    viewer_client = Client()
    viewer_client.force_login(viewer)
    assert viewer_client.get(url).status_code == 200
    assert viewer_client.post(url, {"value": "1"}).status_code == 302
    stranger = Client()
    stranger.force_login(make_user("stranger"))
    assert stranger.get(url).status_code == 404
    assert Label.objects.count() == before[0]
