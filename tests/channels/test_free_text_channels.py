"""Issue 14: free-text answers through every channel's task page: a link-based panel and MTurk's frame
take the typed answer (stored normalised), refuse an empty one on the same prompt, and keep exactly-k."""

import re

import pytest
from django.test import Client

from annotation import services as core
from annotation.channels import services
from annotation.models import Campaign, Label, Lease
from annotation.selectors import invariant_violations
from tests.channels.test_panel import arrive, label_until_done, make_panel
from tests.channels.workers import OPTIONS, fresh_client, label_form_action, open_task
from tests.helpers import prompts_jsonl

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]


def free_text(make_campaign, n_prompts: int, **fields) -> Campaign:
    campaign = make_campaign(0, launch=False, schema=Campaign.Schema.FREE_TEXT, **fields)
    core.prompts_import(campaign=campaign, data=prompts_jsonl(n_prompts, gold=False), filename="q.jsonl")
    return core.campaign_transition(campaign=campaign, action="launch")


def test_panel_participants_type_answers_until_every_prompt_has_k(make_campaign, researcher):
    campaign = free_text(make_campaign, 3, k=2, answer_max_length=20)
    panel = make_panel(campaign, researcher)
    # An empty answer: the same prompt again with the message, nothing written.
    client = Client()
    response = arrive(client, panel, "P0")
    while response.status_code == 302:
        response = client.get(response["Location"])
    page = response.content.decode()
    assert 'name="value"' in page and 'maxlength="20"' in page
    action = re.search(r'<form method="post" action="([^"]+)" class="label-form"', page).group(1)
    token = re.search(r'name="client_token" value="([^"]+)"', page).group(1)
    refused = client.post(action, {"value": " \t ", "client_token": token})
    assert refused.status_code == 400 and "The answer is empty: type an answer." in refused.content.decode()
    assert Label.objects.count() == 0 and Lease.objects.get().status == Lease.Status.ACTIVE
    counts = []
    for pid in ["P0", "P1", "P2"]:
        client = Client()
        _, n = label_until_done(client, arrive(client, panel, pid, session=f"S-{pid}"), value="  Walk  the dog ")
        counts.append(n)
    assert counts == [3, 3, 0]
    assert invariant_violations(campaign=campaign, complete=True) == []
    assert set(Label.objects.values_list("value", flat=True)) == {"Walk the dog"}


def test_mturk_workers_answer_in_the_frame(make_campaign, researcher, mturk):
    campaign = free_text(make_campaign, 2, k=1)
    publication = services.publication_create_mturk(campaign=campaign, user=researcher, options=OPTIONS)
    services.publication_publish(publication_id=publication.pk)
    aid = mturk.accept(mturk.visible_hits("AW1")[0], "AW1")
    page = open_task(mturk, aid)
    assert b'type="text" id="answer" name="value"' in page.content
    action = label_form_action(page)
    refused = fresh_client().post(action, {"value": ""})
    assert refused.status_code == 400 and b"The answer is empty: type an answer." in refused.content
    assert Label.objects.count() == 0
    done = fresh_client().post(action, {"value": " Brush   teeth "})
    assert done.status_code == 200 and b"mturk-submit-form" in done.content
    assert list(Label.objects.values_list("value", flat=True)) == ["Brush teeth"]
    assert invariant_violations(campaign=campaign) == []
