"""The Prolific channel's rules, one at a time, against the stand-in (``fake_prolific``): bad input is
a 400 naming the field and changes nothing; a creation whose answer was lost is found again, not
repeated; the study follows the campaign; blocking and unblocking reach the exclusion group; hook
deliveries are verified, kept once and refused when forged or stale; bonuses from a CSV or a rule
are paid once; the channels page says what to set when nothing is configured and when Prolific
refused the hooks. The whole study with real participants is ``test_prolific_end_to_end``."""

import json
import time

import pytest
from django.test import Client, override_settings

from annotation.channels.base import ChannelTransientError
from annotation.channels.models import (
    ProlificAccount,
    ProlificBonus,
    ProlificEvent,
    ProlificExclusionGroup,
    ProlificSubmission,
    Publication,
)
from annotation.channels.services import prolific
from annotation.services import campaign_transition, worker_get_or_create
from annotation.services.quality import worker_act
from tests.channels.fake_prolific import FakeProlific
from tests.channels.prolific_stack import signed_headers
from tests.helpers import label_one

pytestmark = [pytest.mark.django_db]

PUBLIC = "https://chorus.example"
OPTIONS = {
    "channel": "prolific",
    "title": "Is this statement true?",
    "description": "Read short statements and say whether each is true.",
    "reward": "0.80",
    "labels_per_participant": 4,
    "estimated_minutes": 3,
}


@pytest.fixture
def fake():
    fake = FakeProlific().start()
    fake.hold_deliveries()  # nothing reaches PUBLIC: the tests here post deliveries themselves
    yield fake
    fake.stop()


@pytest.fixture
def configured(fake, eager_celery):
    with override_settings(
        CHORUS_PROLIFIC_API_URL=fake.url,
        CHORUS_PROLIFIC_TOKEN="test-token",
        CHORUS_PUBLIC_URL=PUBLIC,
        CHORUS_PROLIFIC_COMPLETION_URL=fake.root + "submissions/complete",
    ):
        yield fake


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def publish(client, campaign, **changes):
    return client.post(
        f"/api/v1/campaigns/{campaign.slug}/publications/", {**OPTIONS, **changes}, content_type="application/json"
    )


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"reward": "0"}, "reward"),
        ({"reward": "-1.00"}, "reward"),
        ({"reward": "1.234"}, "reward"),
        ({"reward": "lots"}, "reward"),
        ({"labels_per_participant": 0}, "labels_per_participant"),
        ({"labels_per_participant": 11}, "labels_per_participant"),  # the campaign has 10 prompts
        ({"estimated_minutes": 0}, "estimated_minutes"),
        ({"devices": ["toaster"]}, "devices"),
        ({"filters": [{"no_id": 1}]}, "filters"),
        ({"title": ""}, "title"),
    ],
)
def test_bad_options_are_refused_naming_the_field_and_create_nothing(
    make_campaign, researcher, configured, changes, field
):
    campaign = make_campaign(10, k=2)
    response = publish(signed_in(researcher), campaign, **changes)
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    assert not Publication.objects.exists() and configured.studies == {}


def test_draft_then_publish_and_a_lost_creation_is_found_not_repeated(make_campaign, researcher, configured):
    fake = configured
    campaign = make_campaign(10, k=2)  # 20 slots, 4 per participant: 5 places
    fake.inject("POST", r"^/api/v1/studies/$", "lost")  # created on Prolific, the answer lost
    response = publish(signed_in(researcher), campaign)
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "draft" and body["external_id"] is None  # left to Celery (eager here: failed, retried)
    prolific.prolific_sync(publication_id=body["id"])  # the retry: looks the study up by internal_name
    assert len(fake.studies) == 1
    study = next(iter(fake.studies.values()))
    assert study["internal_name"].startswith("chorus:") and study["total_available_places"] == 5
    detail = signed_in(researcher).get(f"/api/v1/publications/{body['id']}/").json()
    assert detail["external_id"] == study["id"] and detail["study"]["status"] == "UNPUBLISHED"
    assert detail["study_url"].startswith(PUBLIC) and "{{%PROLIFIC_PID%}}" in detail["study_url"]
    codes = {c["code_type"]: c["actions"] for c in study["completion_codes"]}
    assert codes == {"COMPLETED": [{"action": "MANUALLY_REVIEW"}], "OTHER": [{"action": "REQUEST_RETURN"}]}

    response = signed_in(researcher).post(f"/api/v1/publications/{body['id']}/publish/")
    assert response.status_code == 200 and response.json()["status"] == "published"
    assert study["status"] == "ACTIVE"
    again = signed_in(researcher).post(f"/api/v1/publications/{body['id']}/publish/")
    assert again.status_code == 400  # published already: nothing sent
    assert len(fake.studies) == 1


def test_the_study_follows_the_campaign(make_campaign, researcher, configured):
    fake = configured
    campaign = make_campaign(10, k=2)
    publication_id = publish(signed_in(researcher), campaign, publish=True).json()["id"]
    study = next(iter(fake.studies.values()))
    assert study["status"] == "ACTIVE"
    campaign_transition(campaign=campaign, action="pause")  # the signal's task runs after commit
    prolific.prolific_sync(publication_id=publication_id)  # (a test's transaction never commits)
    assert study["status"] == "PAUSED"
    campaign_transition(campaign=campaign, action="resume")
    prolific.prolific_sync(publication_id=publication_id)
    assert study["status"] == "ACTIVE"
    campaign_transition(campaign=campaign, action="close")
    prolific.prolific_sync(publication_id=publication_id)
    assert study["status"] in ("AWAITING REVIEW", "COMPLETED")


def test_places_grow_with_the_work_and_never_shrink(make_campaign, researcher, configured):
    fake = configured
    campaign = make_campaign(10, k=2)  # 20 slots, 4 labels per participant: 5 places
    publication = Publication.objects.get(pk=publish(signed_in(researcher), campaign, publish=True).json()["id"])
    study = next(iter(fake.studies.values()))
    assert study["total_available_places"] == 5
    gone, _ = fake.arrive(study["id"], "G" * 24)
    fake.return_(gone)  # took a place and gave it back: Prolific reopens it, nothing to grow
    prolific.prolific_sync(publication_id=publication.pk)
    assert study["total_available_places"] == 5
    # A participant labels their four and submits; then the researcher re-collects their labels.
    submission_id, _ = fake.arrive(study["id"], "P" * 24)
    worker = worker_get_or_create(channel="prolific", external_id="P" * 24)
    for _ in range(4):
        label_one(campaign, worker, value=1)
    fake.complete(submission_id, publication.panel.completion_code)
    prolific.prolific_sync(publication_id=publication.pk)
    assert study["total_available_places"] == 5  # 16 open slots: 1 taken + 4 open places carry them
    worker_act(kind="recollect", campaign=campaign, worker=worker, reason="spam")
    prolific.prolific_sync(publication_id=publication.pk)
    assert study["total_available_places"] == 6  # 20 open slots again: one more place, never fewer


def test_block_and_unblock_reach_the_exclusion_group(make_campaign, researcher, configured):
    fake = configured
    campaign = make_campaign(10, k=2)
    publish(signed_in(researcher), campaign, publish=True)
    group_id = ProlificExclusionGroup.objects.get(campaign=campaign).group_id
    study = next(iter(fake.studies.values()))
    assert {"filter_id": "participant_group_blocklist", "selected_values": [group_id]} in study["filters"]
    worker = worker_get_or_create(channel="prolific", external_id="S" * 24)
    label_one(campaign, worker, value=1)
    # The group's task runs after commit, which a test's transaction never reaches: pushed here.
    worker_act(kind="block", campaign=campaign, worker=worker, reason="spam")
    prolific.prolific_group_push(group_pk=ProlificExclusionGroup.objects.get().pk, worker_id=worker.pk)
    assert fake.group_members(group_id) == ["S" * 24]
    with pytest.raises(Exception, match="blocked participant group"):
        fake.arrive(study["id"], "S" * 24)
    worker_act(kind="unblock", campaign=campaign, worker=worker, reason="my mistake")
    prolific.prolific_group_push(group_pk=ProlificExclusionGroup.objects.get().pk, worker_id=worker.pk)
    assert fake.group_members(group_id) == []


def _deliver(client, account, payload, *, event_id="ev-1", secret=None, timestamp=None, tamper=False):
    """Post a delivery signed as Prolific signs it; ``tamper``: the body changed after signing."""
    body = json.dumps(payload)
    headers = signed_headers(secret or account.hook_secret, body, event_id=event_id, timestamp=timestamp)
    return client.post(
        f"/channels/prolific/hooks/{account.pk}/",
        body.replace("RETURNED", "APPROVED") if tamper else body,
        content_type="application/json",
        headers=headers,
    )


def test_hook_deliveries_are_verified_kept_once_and_read_again(
    make_campaign, researcher, configured, django_capture_on_commit_callbacks
):
    fake = configured
    campaign = make_campaign(10, k=2)
    publish(signed_in(researcher), campaign, publish=True)
    account = ProlificAccount.objects.get()
    assert account.hooks == ProlificAccount.Hooks.SUBSCRIBED and account.hook_secret
    study = next(iter(fake.studies.values()))
    submission_id, _ = fake.arrive(study["id"], "R" * 24)
    fake.return_(submission_id)
    payload = {
        "resource_id": submission_id,
        "event_type": "submission.status.change",
        "participant_id": "R" * 24,
        "status": "RETURNED",
    }
    client = Client()
    # forged, tampered or stale: 403, nothing kept
    assert _deliver(client, account, payload, secret="not-the-secret").status_code == 403
    assert _deliver(client, account, payload, tamper=True).status_code == 403
    assert _deliver(client, account, payload, timestamp=int(time.time()) - 3600).status_code == 403
    assert not ProlificEvent.objects.exists() and not ProlificSubmission.objects.exists()
    # genuine: accepted (its task runs after commit), then done once, however often it is delivered
    with django_capture_on_commit_callbacks(execute=True):
        assert _deliver(client, account, payload).status_code == 202
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        assert _deliver(client, account, payload).status_code == 200  # the same X-Event-ID
    assert callbacks == []
    assert ProlificEvent.objects.count() == 1
    assert ProlificSubmission.objects.get(submission_id=submission_id).status == "RETURNED"
    # out of order: an older event arriving late says ACTIVE; the resource is read again, so it stays RETURNED
    stale = {**payload, "status": "ACTIVE"}
    with django_capture_on_commit_callbacks(execute=True):
        assert _deliver(client, account, stale, event_id="ev-0").status_code == 202
    assert ProlificSubmission.objects.get(submission_id=submission_id).status == "RETURNED"


def test_hooks_refused_by_prolific_leave_reconciliation_and_the_page_says_so(
    make_campaign, researcher, fake, eager_celery
):
    with override_settings(
        CHORUS_PROLIFIC_API_URL=fake.url, CHORUS_PROLIFIC_TOKEN="test-token", CHORUS_PUBLIC_URL="http://localhost:8000"
    ):
        campaign = make_campaign(10, k=2)
        assert publish(signed_in(researcher), campaign).status_code == 201
        account = ProlificAccount.objects.get()
        assert account.hooks == ProlificAccount.Hooks.REFUSED and "target_url" in account.hooks_note
        page = signed_in(researcher).get(f"/channels/campaigns/{campaign.slug}/").content.decode()
    assert "Refused by Prolific" in page and "CHORUS_PROLIFIC_RECONCILE_SECONDS" in page
    assert "test-token" not in page


def test_without_a_token_the_channels_page_says_what_to_set(make_campaign, researcher):
    campaign = make_campaign(10, k=2)
    with override_settings(CHORUS_PROLIFIC_TOKEN=""):
        page = signed_in(researcher).get(f"/channels/campaigns/{campaign.slug}/").content.decode()
        response = publish(signed_in(researcher), campaign)
    assert "CHORUS_PROLIFIC_TOKEN" in page and "Publish on Prolific" not in page
    assert response.status_code == 400 and response.json()["error"]["code"] == "prolific_not_configured"


def _with_submissions(fake, campaign, researcher, pids):
    publication_id = publish(signed_in(researcher), campaign, publish=True).json()["id"]
    study = next(iter(fake.studies.values()))
    for pid in pids:
        fake.arrive(study["id"], pid)
    prolific.prolific_sync(publication_id=publication_id)
    return Publication.objects.get(pk=publication_id)


def test_bonus_and_review_refusals_name_the_field(make_campaign, researcher, configured):
    campaign = make_campaign(10, k=2)
    publication = _with_submissions(configured, campaign, researcher, ["W" * 24])
    client = signed_in(researcher)
    url = f"/api/v1/publications/{publication.pk}/bonuses/"
    for body, field in [
        ({"worker": "prolific:" + "W" * 24, "amount": "10.01", "reason": "x"}, "amount"),  # above CHORUS_MAX_BONUS
        ({"worker": "prolific:" + "W" * 24, "amount": "0", "reason": "x"}, "amount"),
        ({"worker": "prolific:nobody", "amount": "1.00", "reason": "x"}, "worker"),
        ({"worker": "prolific:" + "W" * 24, "amount": "1.00", "reason": " "}, "reason"),
    ]:
        response = client.post(url, body, content_type="application/json")
        assert response.status_code == 400 and field in response.json()["error"]["fields"], (body, response.content)
    assert not ProlificBonus.objects.exists()
    submission = ProlificSubmission.objects.get()
    review = f"/api/v1/publications/{publication.pk}/submissions/{submission.submission_id}/review/"
    for body, field in [
        ({"decision": "reject", "category": "BORING", "message": "x" * 120}, "category"),
        ({"decision": "reject", "category": "LOW_EFFORT", "message": "x" * 99}, "message"),
        ({"decision": "maybe"}, "decision"),
    ]:
        response = client.post(review, body, content_type="application/json")
        assert response.status_code == 400 and field in response.json()["error"]["fields"], response.content
    # Not awaiting review yet (the participant is at work): refused, nothing sent
    response = client.post(review, {"decision": "approve"}, content_type="application/json")
    assert response.status_code == 409
    assert configured.submissions[submission.submission_id]["status"] == "ACTIVE"


def test_bonuses_from_a_csv_all_or_nothing_and_the_same_file_pays_once(
    make_campaign, researcher, configured, django_capture_on_commit_callbacks
):
    fake = configured
    campaign = make_campaign(10, k=2)
    publication = _with_submissions(fake, campaign, researcher, ["X" * 24, "Y" * 24])
    client = signed_in(researcher)
    url = f"/api/v1/publications/{publication.pk}/bonuses/csv/"
    bad = b"worker,amount,reason\nprolific:" + b"X" * 24 + b",0.50,good\nprolific:nobody,0.50,good\n"
    response = client.post(url, bad, content_type="text/csv")
    assert response.status_code == 400 and "line 3" in response.json()["error"]["message"]
    assert not ProlificBonus.objects.exists()
    good = b"worker,amount,reason\nprolific:" + b"X" * 24 + b",0.50,good\n" + b"Y" * 24 + b",0.25,fine\n"
    with django_capture_on_commit_callbacks(execute=True):  # each bonus's task runs after commit
        assert client.post(url, good, content_type="text/csv").status_code == 200
        assert client.post(url, good, content_type="text/csv").status_code == 200  # uploaded twice
    assert sorted(ProlificBonus.objects.values_list("status", flat=True)) == ["paid", "paid"]
    paid = {s["participant_id"]: s["bonus_payments"] for s in fake.submissions.values()}
    assert paid == {"X" * 24: [50], "Y" * 24: [25]}


def test_a_pay_whose_answer_was_lost_is_checked_before_it_is_sent_again(
    make_campaign, researcher, configured, eager_celery
):
    fake = configured
    campaign = make_campaign(10, k=2)
    publication = _with_submissions(fake, campaign, researcher, ["Z" * 24])
    fake.inject("POST", r"/pay/$", "lost")
    fake.inject("POST", r"/bonus-payments/$", "429")
    eager_celery.conf.task_eager_propagates = False  # the failed task is left for the retries below
    bonus, created = prolific.prolific_bonus_grant(
        publication=publication,
        worker_ref="prolific:" + "Z" * 24,
        amount="1.50",
        reason="thanks",
        key="k1",
        user=researcher,
    )
    assert created
    for _ in range(3):  # what the Celery retries and reconciliation do
        try:
            prolific.prolific_bonus_pay(bonus_id=bonus.pk)
        except ChannelTransientError:
            pass
    bonus.refresh_from_db()
    assert bonus.status == ProlificBonus.Status.PAID
    sid = bonus.submission_id
    assert fake.submissions[sid]["bonus_payments"] == [150]
    same, created = prolific.prolific_bonus_grant(
        publication=publication,
        worker_ref="prolific:" + "Z" * 24,
        amount="1.50",
        reason="thanks",
        key="k1",
        user=researcher,
    )
    assert not created and same.pk == bonus.pk and fake.submissions[sid]["bonus_payments"] == [150]


def test_mturk_and_panel_publications_through_the_same_resource(make_campaign, researcher, configured):
    campaign = make_campaign(10, k=2)
    client = signed_in(researcher)
    response = client.post(
        f"/api/v1/campaigns/{campaign.slug}/publications/",
        {"channel": "panel", "options": {"panel_name": "otherpanel", "completion_code": "DONE1"}},
        content_type="application/json",
    )
    assert response.status_code == 201 and response.json()["kind"] == "panel", response.content
    assert "<PROLIFIC_PID>" in client.get(f"/api/v1/publications/{response.json()['id']}/").json()["study_url"]
    refused = client.post(
        f"/api/v1/campaigns/{campaign.slug}/publications/",
        {"channel": "panel", "options": {"panel_name": "x"}},
        content_type="application/json",
    )
    assert refused.status_code == 400
    listing = client.get(f"/api/v1/campaigns/{campaign.slug}/publications/").json()
    assert [p["channel"] for p in listing] == ["otherpanel"]
