"""Taking back a wrong prompt file before launch (``import_remove``), and the upload's preview step."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from django.urls import reverse

from annotation import services
from annotation.models import Activity, ImportBatch, Lease, Prompt, Slot
from annotation.services.errors import CampaignStateError
from tests.helpers import import_counts, jsonl, label_one, messages_of, prompts_jsonl, sim_worker

pytestmark = pytest.mark.django_db


# --- the service --------------------------------------------------------------------------------------


def test_removing_an_import_deletes_its_prompts_and_slots_only_and_is_logged(binary_draft):
    second = services.prompts_import(campaign=binary_draft, data=prompts_jsonl(3, prefix="q"), filename="q.jsonl")
    assert Slot.objects.filter(prompt__batch=second).count() == 9

    services.import_remove(campaign=binary_draft, batch=second)

    assert list(binary_draft.prompts.order_by("external_id").values_list("external_id", flat=True)) == ["p0", "p1"]
    assert Slot.objects.filter(campaign=binary_draft).count() == 6  # the first import's, untouched
    assert not ImportBatch.objects.filter(pk=second.pk).exists()
    record = Activity.objects.filter(campaign=binary_draft).latest("pk")
    assert (record.verb, record.summary) == ("prompts.import_removed", "Removed the import of q.jsonl (3 prompts)")
    assert record.detail["sha256"] == second.sha256


def test_the_same_file_imports_again_after_its_removal(binary_draft):
    data = prompts_jsonl(3, prefix="q")
    batch = services.prompts_import(campaign=binary_draft, data=data, filename="q.jsonl")
    services.import_remove(campaign=binary_draft, batch=batch)
    again = services.prompts_import(campaign=binary_draft, data=data, filename="q.jsonl")
    assert again.n_prompts == 3 and binary_draft.prompts.count() == 5


def test_after_launch_an_import_stays_and_nothing_changes(make_campaign):
    campaign = make_campaign(3)
    batch = campaign.imports.get()
    before = (*import_counts(), Activity.objects.count())
    with pytest.raises(CampaignStateError, match="was launched") as refusal:
        services.import_remove(campaign=campaign, batch=batch)
    assert (refusal.value.code, refusal.value.status) == ("launched", 409)
    assert (*import_counts(), Activity.objects.count()) == before


def test_a_draft_closed_after_launch_still_refuses(make_campaign):
    campaign = services.campaign_transition(campaign=make_campaign(2), action="close")
    with pytest.raises(CampaignStateError):
        services.import_remove(campaign=campaign, batch=campaign.imports.get())


def test_a_lease_on_its_prompts_is_refused_and_nothing_changes(binary_draft):
    """No lease exists before launch (workers get 404 on a draft); were one there, it is somebody's
    work, and the import stays."""
    campaign = services.campaign_transition(campaign=binary_draft, action="launch")
    label_one(campaign, sim_worker())
    type(campaign).objects.filter(pk=campaign.pk).update(launched_at=None, status="draft")
    campaign.refresh_from_db()
    before = (*import_counts(), Lease.objects.count(), Activity.objects.count())
    with pytest.raises(CampaignStateError) as refusal:
        services.import_remove(campaign=campaign, batch=campaign.imports.get())
    assert refusal.value.code == "import_in_use"
    assert (*import_counts(), Lease.objects.count(), Activity.objects.count()) == before


# --- the pages ----------------------------------------------------------------------------------------


def test_the_campaign_page_offers_removal_before_launch_only(researcher_client, binary_draft):
    batch = binary_draft.imports.get()
    url = reverse("import_remove", args=[binary_draft.slug, batch.pk])
    page = researcher_client.get(reverse("campaign_detail", args=[binary_draft.slug])).content.decode()
    assert url in page and "Remove this import" in page

    confirm = researcher_client.get(url)
    assert confirm.status_code == 200 and b"Remove these 2 prompts" in confirm.content
    assert Prompt.objects.filter(campaign=binary_draft).count() == 2  # a GET only asks

    services.campaign_transition(campaign=binary_draft, action="launch")
    page = researcher_client.get(reverse("campaign_detail", args=[binary_draft.slug])).content.decode()
    assert url not in page


def test_the_confirmation_removes_and_an_unconfirmed_post_does_not(researcher_client, binary_draft):
    batch = binary_draft.imports.get()
    url = reverse("import_remove", args=[binary_draft.slug, batch.pk])
    assert researcher_client.post(url).status_code == 400
    assert binary_draft.prompts.count() == 2
    response = researcher_client.post(url, {"confirm": "remove"}, follow=True)
    assert "Removed the import of prompts.jsonl (2 prompts)." in messages_of(response)
    assert not binary_draft.prompts.exists()


def test_a_refused_removal_is_shown_on_the_campaign_page(researcher_client, make_campaign):
    campaign = make_campaign(2)
    url = reverse("import_remove", args=[campaign.slug, campaign.imports.get().pk])
    response = researcher_client.post(url, {"confirm": "remove"}, follow=True)
    assert any("was launched" in message for message in messages_of(response))
    assert campaign.prompts.count() == 2


def test_another_campaign_s_import_is_not_found(researcher_client, binary_draft, make_campaign):
    other = make_campaign(1, launch=False, title="Other")
    url = reverse("import_remove", args=[binary_draft.slug, other.imports.get().pk])
    assert researcher_client.post(url, {"confirm": "remove"}).status_code == 404
    assert other.prompts.count() == 1


# --- the preview --------------------------------------------------------------------------------------

FILE = jsonl(
    {"id": "a", "text": "First", "gold": 1, "group": "g1"},
    {"id": "b", "text": "Second", "gold": 0, "group": "g2", "control": True},
    {"id": "c", "text": "Third", "group": "g1"},
    *({"id": f"n{i}", "text": f"More {i}"} for i in range(4)),
)


def _upload(client, campaign, data=FILE, **extra):
    """The upload's answer, or, when it is the redirect to the preview (POST/redirect/GET), the preview."""
    url = reverse("campaign_import", args=[campaign.slug])
    response = client.post(url, {"file": SimpleUploadedFile("new.jsonl", data), **extra})
    if response.status_code == 302 and response.url.startswith(url):
        return client.get(response.url)
    return response


def test_the_preview_is_a_page_of_its_own_that_a_reload_does_not_post_again(
    researcher_client, binary_draft, make_user, client
):
    url = reverse("campaign_import", args=[binary_draft.slug])
    before = import_counts()
    response = researcher_client.post(url, {"file": SimpleUploadedFile("new.jsonl", FILE)})
    assert response.status_code == 302 and response.url.startswith(url) and response.url != url
    for _ in range(2):  # a reload: the same page, by GET, nothing imported
        page = researcher_client.get(response.url)
        assert page.status_code == 200 and b"Import these 7 prompts" in page.content
    assert import_counts() == before
    # another user of the campaign (an editor) does not see the uploader's preview
    editor = make_user("editor")
    services.campaign_share(campaign=binary_draft, username="editor")
    client.force_login(editor)
    foreign = client.get(response.url, follow=True)
    assert "That preview is too old: upload the file again." in messages_of(foreign)


def test_an_upload_shows_what_it_would_import_and_imports_nothing(researcher_client, binary_draft):
    before = import_counts()
    response = _upload(researcher_client, binary_draft)
    assert response.status_code == 200
    preview = response.context["preview"]
    assert (preview.n_prompts, preview.n_gold, preview.n_controls, preview.n_groups) == (7, 2, 1, 2)
    assert [row.external_id for row in preview.first_rows] == ["a", "b", "c", "n0", "n1"]
    assert b"Import these 7 prompts" in response.content and b"Cancel" in response.content
    assert import_counts() == before


def test_the_preview_s_button_imports_the_file_previewed(researcher_client, binary_draft):
    upload = _upload(researcher_client, binary_draft).context["upload"]
    response = researcher_client.post(
        reverse("campaign_import", args=[binary_draft.slug]), {"upload": upload}, follow=True
    )
    assert "Imported 7 prompts from new.jsonl." in messages_of(response)
    assert binary_draft.prompts.count() == 9
    assert binary_draft.imports.latest("pk").sha256 == ImportBatch.objects.get(filename="new.jsonl").sha256


def test_a_changed_or_foreign_preview_imports_nothing(researcher_client, binary_draft, make_campaign):
    upload = _upload(researcher_client, binary_draft).context["upload"]
    other = make_campaign(0, launch=False, title="Other")
    before = import_counts()
    for slug, value in [(binary_draft.slug, upload[:-2] + "xx"), (other.slug, upload)]:
        response = researcher_client.post(reverse("campaign_import", args=[slug]), {"upload": value}, follow=True)
        assert "That preview is too old, or was changed: upload the file again." in messages_of(response)
    assert import_counts() == before


def test_the_preview_refuses_what_the_import_would(researcher_client, binary_draft):
    response = _upload(researcher_client, binary_draft, data=prompts_jsonl(2))  # the draft's own file
    assert response.status_code == 400
    assert "already imported" in response.context["import_errors"][0][1]


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=4096)
def test_a_file_too_large_to_carry_is_chosen_again_and_imported_as_sent(researcher_client, binary_draft):
    data = prompts_jsonl(200, prefix="big")
    response = _upload(researcher_client, binary_draft, data=data)
    assert response.context["upload"] is None and b"choose it again" in response.content
    response = _upload(researcher_client, binary_draft, data=data, confirm="import")
    assert response.status_code == 302 and binary_draft.prompts.count() == 202


def test_a_viewer_sees_the_confirmation_page_without_its_button(client, binary_draft, make_user):
    viewer = make_user("viewer")
    services.campaign_share(campaign=binary_draft, username="viewer", role="viewer")
    client.force_login(viewer)
    url = reverse("import_remove", args=[binary_draft.slug, binary_draft.imports.get().pk])
    page = client.get(url)
    assert page.status_code == 200 and b"Remove these 2 prompts" not in page.content
    assert client.post(url, {"confirm": "remove"}).status_code == 403
    assert binary_draft.prompts.count() == 2
