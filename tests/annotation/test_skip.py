"""The task page's "Skip": the prompt goes back to the pool at once for other workers, never back to the
worker who skipped it, and every prompt still ends with exactly k labels from k distinct workers."""

import pytest
from django.test import Client
from django.urls import reverse

from annotation.channels import services as channel_services
from annotation.models import Label, Lease, Slot
from annotation.selectors import invariant_violations
from tests.helpers import messages_of, signed_in

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]

SKIPPED = "Skipped: that prompt goes to other workers, and you will not be shown it again."


def label_everything(client, campaign) -> int:
    """Label every prompt the campaign still has for this client's worker; returns how many."""
    n = 0
    while True:
        response = client.get(reverse("worker_next", args=[campaign.slug]))
        if response.status_code != 302:
            assert response.context["code"] == "nothing_left"
            return n
        page = client.get(response.url)
        client.post(response.url, {"value": "1", "client_token": page.context["client_token"]})
        n += 1


def test_a_skipped_prompt_is_free_for_others_at_once_and_never_offered_again(make_campaign, make_user):
    campaign = make_campaign(1, k=1)
    skipper = signed_in(make_user("skipper"))
    task_url = skipper.get(reverse("worker_next", args=[campaign.slug])).url
    lease = Lease.objects.get()
    assert skipper.get(task_url).status_code == 200

    response = skipper.post(reverse("worker_skip", args=[campaign.slug, lease.pk]), follow=True)

    assert SKIPPED in messages_of(response)
    assert response.context["code"] == "nothing_left"  # the next prompt, of which there is none for them
    lease.refresh_from_db()
    assert lease.status == Lease.Status.RELEASED  # the row stays: that is what keeps the prompt from them
    slot = Slot.objects.get()
    assert (slot.lease_id, slot.lease_expires_at, slot.filled) == (None, None, False)
    # Another worker gets it now, not when the skipped lease would have run out.
    assert label_everything(signed_in(make_user("other")), campaign) == 1
    assert label_everything(skipper, campaign) == 0
    assert Label.objects.get().worker.user.username == "other"


def test_skip_shows_the_next_prompt(make_campaign, make_user):
    campaign = make_campaign(3, k=1)
    client = signed_in(make_user())
    first = client.get(reverse("worker_next", args=[campaign.slug])).url
    skipped = Lease.objects.get()
    response = client.post(reverse("worker_skip", args=[campaign.slug, skipped.pk]), follow=True)
    assert [url for url, _ in response.redirect_chain][-1] not in (first, reverse("worker_next", args=[campaign.slug]))
    assert response.context["prompt"] != skipped.prompt
    assert b"Skip this prompt" in response.content
    # The two prompts left, and never the skipped one.
    label_everything(client, campaign)
    assert skipped.prompt_id not in Label.objects.values_list("prompt_id", flat=True)
    assert Label.objects.count() == 2


def test_skipping_keeps_exactly_k_labels_from_k_distinct_workers(make_campaign, make_user):
    campaign = make_campaign(4, k=2)
    clients = [signed_in(make_user(f"w{number}")) for number in range(6)]
    # Two workers skip their first prompt, then everyone labels all they can: every prompt still has at
    # least k = 2 workers who never skipped it, so each must end with exactly k labels.
    for number, client in enumerate(clients[:2]):
        client.get(reverse("worker_next", args=[campaign.slug]))
        lease = Lease.objects.get(worker__user__username=f"w{number}")
        client.post(reverse("worker_skip", args=[campaign.slug, lease.pk]))
    for client in clients:
        label_everything(client, campaign)

    # Each prompt got a label from every worker who did not skip it, up to k: the skips cost no slot.
    assert invariant_violations(campaign=campaign, complete=True) == []  # k each, from k distinct workers
    pairs = set(Label.objects.values_list("prompt_id", "worker_id"))
    released = Lease.objects.filter(status=Lease.Status.RELEASED).values_list("prompt_id", "worker_id")
    assert len(released) == 2 and not set(released) & pairs


def test_another_workers_lease_or_another_campaigns_slug_is_a_404(make_campaign, make_user):
    campaign, other = make_campaign(1, k=1), make_campaign(1, k=1, title="Other")
    owner = signed_in(make_user("owner"))
    owner.get(reverse("worker_next", args=[campaign.slug]))
    lease = Lease.objects.get()
    assert signed_in(make_user("thief")).post(reverse("worker_skip", args=[campaign.slug, lease.pk])).status_code == 404
    assert owner.post(reverse("worker_skip", args=[other.slug, lease.pk])).status_code == 404
    assert owner.get(reverse("worker_skip", args=[campaign.slug, lease.pk])).status_code == 405
    lease.refresh_from_db()
    assert lease.status == Lease.Status.ACTIVE and Slot.objects.get(prompt=lease.prompt).lease_id == lease.pk


def test_a_panel_participant_skips_too(make_campaign, researcher):
    campaign = make_campaign(2, k=1)
    panel = channel_services.publication_create_panel(campaign=campaign, user=researcher, completion_code="C0DE").panel
    client = Client()
    response = client.get(f"/channels/panel/{panel.slug}/", {"PROLIFIC_PID": "P1", "STUDY_ID": "S", "SESSION_ID": "X"})
    task_url = client.get(response["Location"])["Location"]
    page = client.get(task_url).content.decode()
    lease = Lease.objects.get()
    skip_url = reverse("channels:panel_skip", args=[panel.slug, lease.pk])
    assert f'action="{skip_url}"' in page

    response = client.post(skip_url, follow=True)

    assert SKIPPED in messages_of(response)
    assert response.context["prompt"] != lease.prompt
    lease.refresh_from_db()
    assert lease.status == Lease.Status.RELEASED and Slot.objects.get(prompt=lease.prompt).lease_id is None
    # Without the participant's session, nothing is given back.
    other = Lease.objects.get(status=Lease.Status.ACTIVE)
    assert Client().post(reverse("channels:panel_skip", args=[panel.slug, other.pk])).status_code == 403
    other.refresh_from_db()
    assert other.status == Lease.Status.ACTIVE
