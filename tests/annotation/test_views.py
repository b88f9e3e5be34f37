"""The browser UI through Django's test client: researcher pages, the worker loop (invitations:
test_invitations.py; who sees a campaign's worker pages: test_access.py)."""

import json
import re
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import OperationalError
from django.test import override_settings
from django.urls import reverse

from annotation import services
from annotation.models import Campaign, ImportBatch, Label, Lease, Prompt, Slot
from tests.clock import later
from tests.helpers import campaign_fields, label_one, messages_of, prompts_jsonl

pytestmark = pytest.mark.django_db


@pytest.fixture
def worker_client(client, make_user):
    user = make_user("wanda")
    client.force_login(user)
    client.user = user
    return client


# --- home and researcher pages ----------------------------------------------------------------------


def test_home_for_visitors_describes_chorus_and_links_to_sign_in(client):
    response = client.get("/")
    assert response.status_code == 200
    assert b"Chorus collects labels" in response.content
    assert reverse("login").encode() in response.content


def test_home_lists_the_researchers_campaigns_with_progress(researcher_client, make_campaign, make_user):
    mine = make_campaign(4, k=2, title="Mine")
    other = services.campaign_create(owner=make_user("someone"), title="Not mine")
    response = researcher_client.get("/")
    listed = [campaign for campaign, _ in response.context["campaigns"]]
    assert listed == [mine]
    assert b"0 / 8 labels" in response.content
    assert other.title.encode() not in response.content


def test_create_a_binary_campaign(researcher_client, researcher):
    response = researcher_client.post(reverse("campaign_create"), campaign_fields())
    campaign = Campaign.objects.get()
    assert response.status_code == 302 and response.url == reverse("campaign_detail", args=[campaign.slug])
    assert (campaign.owner, campaign.title, campaign.k, campaign.lease_seconds) == (
        researcher,
        "Plausible or not",
        3,
        300,
    )
    assert (campaign.positive_text, campaign.negative_text, campaign.binarization) == ("Plausible", "Implausible", {})
    assert campaign.max_labels_per_worker is None and campaign.status == "draft"


def test_create_a_rating_campaign_with_its_binarization(researcher_client):
    fields = campaign_fields(
        schema="rating",
        scale_min=0,
        scale_max=10,
        binarization="0=0, 1=0, 9=1; 10=1",
        max_labels_per_worker=50,
        policy="fill_first",
    )
    researcher_client.post(reverse("campaign_create"), fields)
    campaign = Campaign.objects.get()
    assert (campaign.scale_min, campaign.scale_max) == (0, 10)
    assert campaign.binarization == {"0": 0, "1": 0, "9": 1, "10": 1}
    assert (campaign.max_labels_per_worker, campaign.policy) == (50, "fill_first")


@pytest.mark.parametrize(
    "overrides, field, message",
    [
        ({"schema": "rating", "scale_step": "0.4"}, "scale_step", "A step of 0.4 does not divide the scale 1–4"),
        ({"schema": "rating", "scale_step": "half"}, "scale_step", "or \"continuous\"; got 'half'"),
        (
            {"schema": "rating", "scale_step": "0.5", "binarization": "1=0, 4=1"},
            "binarization",
            "A binarization maps whole points",
        ),
        ({"schema": "rating", "binarization": "1=2"}, "binarization", "is not of the form"),
        ({"schema": "rating", "binarization": "7=1"}, "binarization", "outside the scale 1–4"),
        ({"schema": "rating", "scale_min": 5, "scale_max": 5, "binarization": "5=1"}, "scale_max", "must be above"),
        ({"k": 0}, "k", "greater than or equal to 1"),
        ({"title": ""}, "title", "required"),
    ],
)
def test_create_refuses_bad_settings_and_creates_nothing(researcher_client, overrides, field, message):
    response = researcher_client.post(reverse("campaign_create"), campaign_fields(**overrides))
    assert response.status_code == 200
    assert any(message in error for error in response.context["form"].errors[field])
    assert not Campaign.objects.exists()


def test_edit_fixes_the_frozen_fields_and_says_why(researcher_client, make_campaign):
    """Once prompts are imported the settings campaign_update refuses to change are disabled on the form,
    with the reason beside each; a value posted for one anyway is ignored, the rest is saved."""
    campaign = make_campaign(3, k=3, launch=False)
    url = reverse("campaign_edit", args=[campaign.slug])
    page = researcher_client.get(url).content.decode()
    for name in ("k", "k_max", "stop_confidence", "schema", "scale_min", "scale_max"):
        assert re.search(rf'<(input|select)[^>]*name="{name}"[^>]*disabled', page), name
    assert not re.search(r'<input[^>]*name="title"[^>]*disabled', page)
    assert "Fixed once prompts are imported: every imported prompt got its slots for it" in page
    assert "Fixed once prompts are imported: the imported prompts (their gold values and options)" in page

    response = researcher_client.post(url, campaign_fields(title="Renamed", k=4))
    assert response.status_code == 302
    campaign.refresh_from_db()
    assert (campaign.k, campaign.title) == (3, "Renamed")

    response = researcher_client.post(url, campaign_fields(title="Renamed", k=3, instructions="New *words*"))
    assert response.status_code == 302
    campaign.refresh_from_db()
    assert (campaign.title, campaign.instructions) == ("Renamed", "New *words*")


def test_upload_prompts_then_launch_pause_resume_close(researcher_client, researcher):
    campaign = services.campaign_create(owner=researcher, title="Life cycle", k=2)
    upload = SimpleUploadedFile("prompts.jsonl", prompts_jsonl(5), content_type="application/jsonl")
    preview = researcher_client.post(reverse("campaign_import", args=[campaign.slug]), {"file": upload}, follow=True)
    assert b"Import these 5 prompts" in preview.content and not Prompt.objects.filter(campaign=campaign).exists()
    response = researcher_client.post(
        reverse("campaign_import", args=[campaign.slug]), {"upload": preview.context["upload"]}, follow=True
    )
    assert "Imported 5 prompts from prompts.jsonl." in messages_of(response)
    assert (Prompt.objects.filter(campaign=campaign).count(), Slot.objects.filter(campaign=campaign).count()) == (5, 10)
    assert b"0</strong> of 10 labels" in response.content

    for action, status in [("launch", "live"), ("pause", "paused"), ("resume", "live")]:
        response = researcher_client.post(reverse("campaign_transition", args=[campaign.slug, action]), follow=True)
        campaign.refresh_from_db()
        assert campaign.status == status
        assert f"The campaign is {status}." in messages_of(response)
    # Closing asks first, on its own page (tests/annotation/test_close_confirmation.py).
    response = researcher_client.post(
        reverse("campaign_close", args=[campaign.slug]), {"confirm": "close"}, follow=True
    )
    campaign.refresh_from_db()
    assert campaign.status == "closed"
    assert "The campaign is closed." in messages_of(response)


def test_a_refused_transition_is_shown_and_changes_nothing(researcher_client, researcher):
    campaign = services.campaign_create(owner=researcher, title="Empty")
    response = researcher_client.post(reverse("campaign_transition", args=[campaign.slug, "launch"]), follow=True)
    assert "Import prompts before launching." in messages_of(response)
    response = researcher_client.post(reverse("campaign_transition", args=[campaign.slug, "pause"]), follow=True)
    assert "Cannot pause a campaign that is draft." in messages_of(response)
    campaign.refresh_from_db()
    assert campaign.status == "draft"


def test_a_bad_upload_lists_each_line_and_imports_nothing(researcher_client, make_campaign):
    campaign = make_campaign(2, launch=False)
    before = (Prompt.objects.count(), Slot.objects.count(), ImportBatch.objects.count())
    data = b'{"id": "x1", "text": "fine"}\n{"id": "x2", "text": ""}\nnot json\n'
    response = researcher_client.post(
        reverse("campaign_import", args=[campaign.slug]), {"file": SimpleUploadedFile("bad.jsonl", data)}
    )
    assert response.status_code == 400
    assert response.context["import_errors"] == [
        (2, "empty text for id 'x2'"),
        (3, "not valid JSON (Expecting value at column 1)"),
    ]
    assert b"Line 2: empty text for id" in response.content and b"Line 3: not valid JSON" in response.content
    assert (Prompt.objects.count(), Slot.objects.count(), ImportBatch.objects.count()) == before


@override_settings(CHORUS_MAX_IMPORT_BYTES=100)
def test_an_oversize_upload_is_refused_before_it_is_read(researcher_client, make_campaign):
    campaign = make_campaign(0, launch=False)
    upload = SimpleUploadedFile("big.jsonl", prompts_jsonl(10))
    response = researcher_client.post(reverse("campaign_import", args=[campaign.slug]), {"file": upload})
    assert response.status_code == 400
    message = f"Nothing was imported: the file is {len(prompts_jsonl(10)):,} bytes; the limit is 100."
    assert response.context["upload_form"].errors["file"] == [message]
    assert not Prompt.objects.exists()


def test_export_downloads_stream_csv_and_jsonl(researcher_client, make_campaign, make_worker):
    campaign = make_campaign(1, k=1)
    worker = make_worker()
    label_one(campaign, worker)

    response = researcher_client.get(reverse("campaign_export", args=[campaign.slug, "csv"]))
    assert response.streaming and response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="{campaign.slug}-labels.csv"'
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert lines[0].startswith("worker,prompt,value,gold") and lines[1].startswith(
        f"native:{worker.external_id},p0,1,0,"
    )

    response = researcher_client.get(reverse("campaign_export", args=[campaign.slug, "jsonl"]), {"pseudonymize": "1"})
    row = json.loads(b"".join(response.streaming_content))
    assert row["prompt"] == "p0" and row["worker"].startswith("w-") and "native" not in row["worker"]

    assert researcher_client.get(reverse("campaign_export", args=[campaign.slug, "xlsx"])).status_code == 400


@pytest.mark.parametrize(
    "flag, pseudonymized",
    [
        ("1", True),
        ("TRUE", True),
        ("Yes", True),
        ("on", True),
        ("0", False),
        ("False", False),
        ("no", False),
        ("OFF", False),
        ("", False),
        (None, False),
    ],
)
def test_export_pseudonymize_flag(researcher_client, make_campaign, make_worker, flag, pseudonymized):
    campaign = make_campaign(1)
    worker = make_worker()
    label_one(campaign, worker)
    query = {} if flag is None else {"pseudonymize": flag}
    response = researcher_client.get(reverse("campaign_export", args=[campaign.slug, "jsonl"]), query)
    assert response.status_code == 200
    row = json.loads(b"".join(response.streaming_content))
    assert (row["worker"] != worker.public_id) is pseudonymized


@pytest.mark.parametrize("flag", ["t", "2", "ture", "<script>"])
def test_export_refuses_an_unknown_pseudonymize_flag(researcher_client, make_campaign, flag):
    campaign = make_campaign(1)
    response = researcher_client.get(reverse("campaign_export", args=[campaign.slug, "csv"]), {"pseudonymize": flag})
    assert response.status_code == 400 and not response.streaming
    assert b"pseudonymize must be 1, true, yes or on" in response.content
    assert b"<script>" not in response.content  # the value is not echoed into an HTML response


@pytest.mark.parametrize(
    "name, method, args",
    [
        ("campaign_detail", "get", []),
        ("campaign_edit", "post", []),
        ("campaign_import", "post", []),
        ("campaign_transition", "post", ["pause"]),
        ("campaign_export", "get", ["csv"]),
        ("campaign_invitation", "get", []),
        ("campaign_invitation", "post", []),
    ],
)
def test_someone_elses_campaign_is_a_404(client, make_user, make_campaign, name, method, args):
    campaign = make_campaign(2)
    client.force_login(make_user("stranger"))
    response = getattr(client, method)(reverse(name, args=[campaign.slug, *args]))
    assert response.status_code == 404
    campaign.refresh_from_db()
    assert campaign.status == "live"


def test_collaborators_and_staff_may_manage_a_campaign(client, make_user, make_campaign):
    campaign = make_campaign(2)
    colleague = make_user("colleague")
    campaign.collaborators.add(colleague)
    for user in (colleague, make_user("staffer", is_staff=True)):
        client.force_login(user)
        assert client.get(reverse("campaign_detail", args=[campaign.slug])).status_code == 200


def test_researcher_pages_need_a_sign_in(client, make_campaign):
    campaign = make_campaign(1)
    response = client.get(reverse("campaign_detail", args=[campaign.slug]))
    assert response.status_code == 302 and response.url.startswith(reverse("login"))


# --- accounts ---------------------------------------------------------------------------------------


def test_sign_up_signs_in_and_follows_a_safe_next(client, make_campaign):
    campaign = make_campaign(1)
    target = reverse("worker_campaign", args=[campaign.slug])
    response = client.post(
        reverse("signup") + f"?next={target}",
        {"username": "newbie", "password1": "a-long-pass-phrase", "password2": "a-long-pass-phrase", "next": target},
    )
    assert response.status_code == 302 and response.url == target
    assert client.get(target).context["user"].username == "newbie"


def test_sign_up_ignores_an_offsite_next(client):
    response = client.post(
        reverse("signup"),
        {
            "username": "n2",
            "password1": "a-long-pass-phrase",
            "password2": "a-long-pass-phrase",
            "next": "https://evil.example/",
        },
    )
    assert response.status_code == 302 and response.url == reverse("home")


def header_link(response, text: str) -> str:
    """The href of the site header's link named ``text``."""
    header = response.content.decode().split('<header class="site-header">')[1].split("</header>")[0]
    return re.search(rf'<a href="([^"]+)">{text}</a>', header).group(1).replace("&amp;", "&")


def test_the_headers_sign_up_keeps_the_campaign_a_worker_came_from(client, make_campaign):
    campaign = make_campaign(1)
    start = reverse("worker_campaign", args=[campaign.slug])
    signup_url = header_link(client.get(start), "Sign up")
    assert signup_url == f"{reverse('signup')}?next={start}"
    page = client.get(signup_url)
    assert f'name="next" value="{start}"'.encode() in page.content
    # switching to sign-in and back on the way keeps it too
    assert header_link(page, "Sign in") == f"{reverse('login')}?next={start}"
    assert header_link(client.get(header_link(page, "Sign in")), "Sign up") == signup_url
    response = client.post(
        signup_url,
        {"username": "newbie", "password1": "a-long-pass-phrase", "password2": "a-long-pass-phrase", "next": start},
    )
    assert response.status_code == 302 and response.url == start


def test_the_headers_sign_in_keeps_the_campaign_a_worker_came_from(client, make_campaign, make_user):
    campaign = make_campaign(1)
    make_user("returning")
    start = reverse("worker_campaign", args=[campaign.slug])
    login_url = header_link(client.get(start), "Sign in")
    page = client.get(login_url)
    assert f'name="next" value="{start}"'.encode() in page.content
    response = client.post(login_url, {"username": "returning", "password": "pw-for-tests-123", "next": start})
    assert response.status_code == 302 and response.url == start


def test_the_header_carries_no_next_where_there_is_no_campaign(client):
    assert header_link(client.get("/"), "Sign up") == reverse("signup")
    assert header_link(client.get(reverse("login")), "Sign up") == reverse("signup")


# --- the worker loop --------------------------------------------------------------------------------


def test_worker_page_shows_sanitised_instructions_and_a_start_button(worker_client, researcher):
    campaign = services.campaign_create(
        owner=researcher, title="Safe", instructions="Say **yes**.<script>alert(1)</script>"
    )
    services.prompts_import(campaign=campaign, data=prompts_jsonl(1), filename="p.jsonl")
    services.campaign_transition(campaign=campaign, action="launch")
    response = worker_client.get(reverse("worker_campaign", args=[campaign.slug]))
    assert b"Say <strong>yes</strong>." in response.content
    assert b"<script>alert" not in response.content
    assert reverse("worker_next", args=[campaign.slug]).encode() in response.content


def test_anonymous_workers_are_sent_to_sign_in(client, make_campaign):
    campaign = make_campaign(1)
    page = client.get(reverse("worker_campaign", args=[campaign.slug]))
    assert reverse("signup").encode() in page.content
    response = client.get(reverse("worker_next", args=[campaign.slug]))
    assert response.status_code == 302 and response.url.startswith(reverse("login"))


def test_a_worker_labels_until_nothing_is_left(worker_client, make_campaign):
    campaign = make_campaign(3, k=2)
    next_url = reverse("worker_next", args=[campaign.slug])
    for done in range(3):
        response = worker_client.get(next_url)
        assert response.status_code == 302
        task = worker_client.get(response.url)
        assert task.status_code == 200
        assert task.context["progress"].labeled == done
        assert f'<strong class="done-count">{done}</strong>'.encode() in task.content
        assert b'data-key="t"' in task.content and b'data-key="f"' in task.content
        prompt = task.context["prompt"]
        assert prompt.text.encode() in task.content
        response = worker_client.post(
            response.url, {"value": "1", "client_token": task.context["client_token"]}, follow=True
        )
        assert f"Saved. You have labeled {done + 1} so far." in messages_of(response)
    assert response.context["code"] == "nothing_left"
    assert b"There is nothing left for you to label in this campaign." in response.content
    assert Label.objects.filter(worker__user=worker_client.user).count() == 3


def test_a_label_leads_to_the_next_prompts_page_or_to_next_when_the_claim_fails(
    worker_client, make_campaign, monkeypatch
):
    """The label's POST claims the next prompt and redirects to its page; if the database refuses that
    claim, the label is still saved and the worker goes to next, which tries again (not a 500)."""
    campaign = make_campaign(3, k=1)
    next_url = reverse("worker_next", args=[campaign.slug])
    task_url = worker_client.get(next_url).url
    token = worker_client.get(task_url).context["client_token"]
    response = worker_client.post(task_url, {"value": "1", "client_token": token})
    assert response.status_code == 302 and "/task/" in response.url and response.url != task_url
    assert Lease.objects.filter(status=Lease.Status.ACTIVE, worker__user=worker_client.user).count() == 1

    def busy(*args):  # inside the claim's transaction
        raise OperationalError("database is locked")

    task_url = response.url
    token = worker_client.get(task_url).context["client_token"]
    monkeypatch.setattr("annotation.services.assignment._lease_under_lock", busy)
    response = worker_client.post(task_url, {"value": "0", "client_token": token})
    assert response.status_code == 302 and response.url == next_url
    assert Label.objects.filter(worker__user=worker_client.user).count() == 2
    monkeypatch.undo()
    assert "/task/" in worker_client.get(next_url).url  # next claims the third prompt


def test_a_double_submission_counts_once(worker_client, make_campaign):
    campaign = make_campaign(2, k=1)
    task_url = worker_client.get(reverse("worker_next", args=[campaign.slug])).url
    token = worker_client.get(task_url).context["client_token"]
    first = worker_client.post(task_url, {"value": "0", "client_token": token})
    second = worker_client.post(task_url, {"value": "0", "client_token": token}, follow=True)
    assert first.status_code == 302
    assert "Saved. You have labeled 1 so far." in messages_of(second)
    assert Label.objects.count() == 1


def test_a_bad_value_is_refused_on_the_same_page_and_the_worker_can_continue(worker_client, make_campaign):
    campaign = make_campaign(1, k=1)
    task_url = worker_client.get(reverse("worker_next", args=[campaign.slug])).url
    response = worker_client.post(task_url, {"value": "7", "client_token": "tok-1"})
    assert response.status_code == 400
    assert b"The label must be one of 0, 1; got 7." in response.content
    assert not Label.objects.exists()
    response = worker_client.post(task_url, {"value": "1", "client_token": response.context["client_token"]})
    assert response.status_code == 302 and Label.objects.count() == 1


def test_a_label_after_the_lease_expired_is_refused_with_a_message(worker_client, make_campaign):
    campaign = make_campaign(2, k=1, lease_seconds=60)
    task_url = worker_client.get(reverse("worker_next", args=[campaign.slug])).url
    with later(61):
        response = worker_client.post(task_url, {"value": "1", "client_token": "late"}, follow=True)
    assert any("Your time on this prompt ran out" in m for m in messages_of(response))
    assert not Label.objects.exists()
    assert response.context["prompt"] is not None  # the next prompt is offered


def test_opening_an_expired_task_moves_on(worker_client, make_campaign):
    campaign = make_campaign(2, k=1, lease_seconds=60)
    task_url = worker_client.get(reverse("worker_next", args=[campaign.slug])).url
    with later(61):
        response = worker_client.get(task_url, follow=True)
        assert "Your time on that prompt ran out; here is another one." in messages_of(response)
        assert response.redirect_chain[-1][0] != task_url


def test_stop_releases_the_lease_and_the_prompt_is_not_offered_again(worker_client, make_campaign):
    campaign = make_campaign(1, k=1)
    task_url = worker_client.get(reverse("worker_next", args=[campaign.slug])).url
    lease = Lease.objects.get()
    response = worker_client.post(reverse("worker_stop", args=[campaign.slug, lease.pk]), follow=True)
    assert any("You stopped" in m for m in messages_of(response))
    lease.refresh_from_db()
    assert lease.status == Lease.Status.RELEASED
    assert Slot.objects.get().lease_id is None
    response = worker_client.post(task_url, {"value": "1", "client_token": "after-stop"}, follow=True)
    assert "You gave this prompt back; ask for a new one." in messages_of(response)
    assert response.context["code"] == "nothing_left"


def test_heartbeat_extends_the_lease_and_reports_an_ended_one(worker_client, make_campaign):
    campaign = make_campaign(1, k=1, lease_seconds=60)
    task_url = worker_client.get(reverse("worker_next", args=[campaign.slug])).url
    lease = Lease.objects.get()
    page = worker_client.get(task_url)
    heartbeat = reverse("worker_heartbeat", args=[campaign.slug, lease.pk])
    assert f'data-heartbeat-url="{heartbeat}" data-heartbeat-ms="20000"'.encode() in page.content
    with later(50):
        response = worker_client.post(heartbeat)
    assert response.status_code == 200
    lease.refresh_from_db()
    assert response.json() == {"expires_at": lease.expires_at.isoformat()}
    assert lease.expires_at > lease.created_at + timedelta(seconds=100)
    with later(500):
        response = worker_client.post(heartbeat)
    assert response.status_code == 409 and response.json()["code"] == "lease_ended"


def test_a_lease_under_another_campaigns_slug_is_a_404(worker_client, make_campaign):
    """The task, heartbeat and stop URLs name the campaign; a lease of another campaign is not found
    there, even the worker's own, nor under a slug that does not exist."""
    campaign, other = make_campaign(1, k=1), make_campaign(1, k=1, title="Other")
    worker_client.get(reverse("worker_next", args=[campaign.slug]))
    lease = Lease.objects.get()
    for slug in (other.slug, "no-such-campaign"):
        assert worker_client.get(reverse("worker_task", args=[slug, lease.pk])).status_code == 404
        assert worker_client.post(reverse("worker_task", args=[slug, lease.pk]), {"value": "1"}).status_code == 404
    assert worker_client.post(reverse("worker_heartbeat", args=[other.slug, lease.pk])).status_code == 404
    assert worker_client.post(reverse("worker_stop", args=[other.slug, lease.pk])).status_code == 404
    lease.refresh_from_db()
    assert lease.status == Lease.Status.ACTIVE
    assert worker_client.post(reverse("worker_heartbeat", args=[campaign.slug, lease.pk])).status_code == 200


def test_another_workers_task_is_a_404(client, make_user, make_campaign):
    campaign = make_campaign(2, k=1)
    client.force_login(make_user("first"))
    task_url = client.get(reverse("worker_next", args=[campaign.slug])).url
    client.force_login(make_user("second"))
    assert client.get(task_url).status_code == 404
    assert client.post(task_url, {"value": "1", "client_token": "steal"}).status_code == 404
    assert not Label.objects.exists()


def test_a_paused_campaign_says_why_there_is_nothing(worker_client, make_campaign):
    campaign = make_campaign(2)
    services.campaign_transition(campaign=campaign, action="pause")
    response = worker_client.get(reverse("worker_next", args=[campaign.slug]))
    assert response.status_code == 200
    assert response.context["code"] == "campaign_paused"
    assert b"This campaign is paused." in response.content


def test_the_cap_per_worker_ends_the_loop_with_its_reason(worker_client, make_campaign):
    campaign = make_campaign(5, k=1, max_labels_per_worker=1)
    task_url = worker_client.get(reverse("worker_next", args=[campaign.slug])).url
    response = worker_client.post(task_url, {"value": "1", "client_token": "one"}, follow=True)
    assert response.context["code"] == "cap_reached"
    assert b"You have given the 1 labels this campaign allows per worker." in response.content


def test_per_option_rating_takes_one_value_per_option(worker_client, researcher):
    campaign = services.campaign_create(
        owner=researcher,
        title="Options",
        schema="option_rating",
        scale_min=1,
        scale_max=4,
        k=1,
        binarization={"1": 0, "2": 0, "3": 1, "4": 1},
    )
    data = json.dumps({"id": "q1", "text": "Which answers fit?", "options": ["red", "green", "blue"]}).encode()
    services.prompts_import(campaign=campaign, data=data, filename="q.jsonl")
    services.campaign_transition(campaign=campaign, action="launch")
    task_url = worker_client.get(reverse("worker_next", args=[campaign.slug])).url
    page = worker_client.get(task_url)
    for number in range(3):
        assert f'name="value_{number}" value="4" data-key="4"'.encode() in page.content
    response = worker_client.post(task_url, {"value_0": "1", "value_1": "4", "client_token": "x"})
    assert response.status_code == 400
    assert b"The rating of option 3 must be one of 1, 2, 3, 4; got None." in response.content
    worker_client.post(task_url, {"value_0": "1", "value_1": "4", "value_2": "3", "client_token": "y"})
    assert Label.objects.get().value == [1, 4, 3]


def test_the_largest_per_option_prompt_can_be_labeled_on_the_task_page(worker_client, researcher):
    """1,023 options post 1,024 fields (with the client token): more than Django's default limit of 1,000."""
    from annotation.models.prompts import MAX_OPTIONS

    campaign = services.campaign_create(
        owner=researcher,
        title="Options",
        schema="option_rating",
        scale_min=1,
        scale_max=4,
        k=1,
        binarization={"1": 0, "2": 0, "3": 1, "4": 1},
    )
    options = [f"answer {n}" for n in range(MAX_OPTIONS)]
    data = json.dumps({"id": "q1", "text": "Which answers fit?", "options": options}).encode()
    services.prompts_import(campaign=campaign, data=data, filename="q.jsonl")
    services.campaign_transition(campaign=campaign, action="launch")
    task_url = worker_client.get(reverse("worker_next", args=[campaign.slug])).url
    post = {f"value_{n}": str(1 + n % 4) for n in range(MAX_OPTIONS)} | {"client_token": "big"}
    response = worker_client.post(task_url, post)
    assert response.status_code == 302, response.content[:300]
    assert Label.objects.get().value == [1 + n % 4 for n in range(MAX_OPTIONS)]


def test_a_drafts_page_says_its_workers_link_waits_for_launch_and_shows_the_binarization(client, researcher):
    campaign = services.campaign_create(
        owner=researcher,
        title="Rated",
        k=1,
        schema="rating",
        scale_min=1,
        scale_max=4,
        binarization={"1": 0, "2": 0, "3": 1, "4": 1},
    )
    client.force_login(researcher)
    body = client.get(f"/campaigns/{campaign.slug}/").content.decode()
    assert "Not launched yet" in body and "1 → 0 · 2 → 0 · 3 → 1 · 4 → 1" in body
    services.prompts_import(campaign=campaign, data=b'{"id": "a", "text": "A?"}\n', filename="a.jsonl")
    services.campaign_transition(campaign=campaign, action="launch")
    assert "Not launched yet" not in client.get(f"/campaigns/{campaign.slug}/").content.decode()
