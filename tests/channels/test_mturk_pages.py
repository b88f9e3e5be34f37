"""The MTurk task page (inside MTurk's iframe, without cookies) and the researchers' channel pages."""

import re
from decimal import Decimal
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from django.core import signing

from annotation.channels import locmem, services
from annotation.channels.errors import PublicationRefused
from annotation.channels.models import MTurkAssignment, Publication
from annotation.models import Label, Lease
from tests.channels.workers import (
    OPTIONS,
    fresh_client,
    label_form_action,
    open_task,
    submit_to_mturk,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def published(make_campaign, researcher, mturk):
    campaign = make_campaign(4, k=2, instructions="Read **carefully**.")
    publication = services.publication_create_mturk(campaign=campaign, user=researcher, options=OPTIONS)
    services.publication_publish(publication_id=publication.pk)
    return campaign, publication


def accept(fake, worker_id):
    return fake.accept(fake.visible_hits(worker_id)[0], worker_id)


def test_the_preview_shows_instructions_and_never_a_prompt(published, mturk):
    campaign, _ = published
    hit_id = next(iter(mturk.hits))
    response = fresh_client().get(mturk.preview_path(hit_id))
    body = response.content.decode()
    assert response.status_code == 200 and "Accept this HIT to start" in body and "<strong>carefully</strong>" in body
    assert not any(p.text in body for p in campaign.prompts.all())
    assert Lease.objects.count() == 0 and MTurkAssignment.objects.count() == 0


def test_the_task_page_may_be_framed_by_mturk_only_and_posts_back_to_it(published, mturk):
    response = open_task(mturk, accept(mturk, "AW1"))
    assert response.status_code == 200
    csp = response["Content-Security-Policy"]
    assert "frame-ancestors https://worker.mturk.com https://workersandbox.mturk.com" in csp
    assert f"form-action 'self' {mturk.url}" in csp
    assert "X-Frame-Options" not in response
    assert re.search(r'class="prompt-text">Statement number \d', response.content.decode())
    # No "Skip" here: returning the HIT is MTurk's own way to decline (annotation/views/task.py).
    assert b"skip-form" not in response.content
    # Every other page keeps the site-wide protection.
    other = fresh_client().get("/accounts/login/")
    assert other["X-Frame-Options"] == "DENY" and "frame-ancestors 'none'" in other["Content-Security-Policy"]


def test_labeling_without_cookies_then_submitting_to_mturk(published, mturk):
    campaign, publication = published
    aid = accept(mturk, "AW1")
    page = open_task(mturk, aid)
    action = label_form_action(page)
    assert parse_qs(urlsplit(action).query)["t"]  # who the worker is travels in the signed token
    done = fresh_client().post(action, {"value": "1"})
    assert done.status_code == 200 and b"mturk-submit-form" in done.content
    label = Label.objects.get()
    assert label.worker.public_id == "mturk_sandbox:AW1" and label.client_token == f"mturk-{aid}"
    assert MTurkAssignment.objects.get(assignment_id=aid).label_id == label.pk
    # reloading the assignment shows the submit form again: no second prompt, no second label
    again = open_task(mturk, aid)
    assert b"mturk-submit-form" in again.content and Label.objects.count() == 1
    assert submit_to_mturk(again).status_code == 200
    assert mturk.status_of(aid) == "Submitted"
    assert mturk.assignments[aid]["answer"].count("chorus_label") == 1


def test_a_bad_value_is_refused_and_nothing_is_written(published, mturk):
    page = open_task(mturk, accept(mturk, "AW1"))
    response = fresh_client().post(label_form_action(page), {"value": "7"})
    assert response.status_code == 400 and b"must be one of" in response.content
    assert Label.objects.count() == 0


def test_a_tampered_or_missing_token_is_refused(published, mturk):
    page = open_task(mturk, accept(mturk, "AW1"))
    action = label_form_action(page)
    query = {k: v[0] for k, v in parse_qs(urlsplit(action).query).items()}
    signed = signing.loads(query["t"], salt="chorus.channels.mturk-task")
    forged = signing.dumps({**signed, "w": "AW2"}, salt="not-our-salt")  # another worker, signed with another key
    for token in (query["t"][:-2] + ("AA" if not query["t"].endswith("AA") else "BB"), forged):
        response = fresh_client().post(urlsplit(action).path + "?" + urlencode({**query, "t": token}), {"value": "1"})
        assert response.status_code == 400 and b"expired or was altered" in response.content
    assert fresh_client().post("/channels/mturk/task/submit/?lease=1", {"value": "1"}).status_code == 400
    assert Label.objects.count() == 0


def test_numbers_that_are_not_plain_digits_are_refused_not_a_server_error(published, mturk):
    """ "²" and "٣" pass str.isdigit() but int() refuses them: they must be a 404 / 400, never a 500."""
    for odd in ("²", "٣", "1²"):
        assert fresh_client().get("/channels/mturk/task/", {"publication": odd}).status_code == 404
    page = open_task(mturk, accept(mturk, "AW1"))
    query = {k: v[0] for k, v in parse_qs(urlsplit(label_form_action(page)).query).items()}
    heartbeat = "/channels/mturk/task/heartbeat/?" + urlencode({**query, "lease": "²"})
    response = fresh_client().post(heartbeat)
    assert response.status_code == 400 and response.json()["code"] == "bad_token"
    campaign, _ = published
    with pytest.raises(PublicationRefused, match="assignments_per_hit must be a whole number"):
        services.publication_create_mturk(
            campaign=campaign, user=campaign.owner, options={**OPTIONS, "assignments_per_hit": "²"}
        )


@pytest.mark.parametrize(
    "change, message",
    [
        ({"turkSubmitTo": "https://evil.example"}, b"unexpected MTurk site"),
        ({"hitId": "NOTOURHIT"}, b"not part of this campaign"),
        ({"workerId": ""}, b"must be opened from an MTurk assignment"),
    ],
)
def test_links_that_did_not_come_from_our_hits_are_refused(published, mturk, change, message):
    path = mturk.task_path(accept(mturk, "AW1"))
    parts = urlsplit(path)
    query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
    query.update(change)
    response = fresh_client().get(parts.path, query)
    assert response.status_code == 400 and message in response.content
    assert Lease.objects.count() == 0 and MTurkAssignment.objects.count() == 0


def test_an_assignment_id_cannot_be_reused_by_another_worker(published, mturk):
    path = mturk.task_path(accept(mturk, "AW1"))
    assert fresh_client().get(path).status_code == 200
    response = fresh_client().get(path.replace("workerId=AW1", "workerId=AW2"))
    assert response.status_code == 400 and b"belongs to another worker" in response.content


def test_two_open_assignments_of_one_worker_give_one_label_each(published, mturk):
    first, second = accept(mturk, "AW1"), accept(mturk, "AW1")
    page1, page2 = open_task(mturk, first), open_task(mturk, second)  # the same live lease on both pages
    assert fresh_client().post(label_form_action(page1), {"value": "1"}).status_code == 200
    stale = fresh_client().post(label_form_action(page2), {"value": "0"})
    assert stale.status_code == 302 and "notice=" in stale["Location"]
    fresh = fresh_client().get(stale["Location"])
    assert b"here is another one" in fresh.content
    assert fresh_client().post(label_form_action(fresh), {"value": "0"}).status_code == 200
    labels = Label.objects.order_by("pk")
    assert [label.client_token for label in labels] == [f"mturk-{first}", f"mturk-{second}"]
    assert labels[0].prompt_id != labels[1].prompt_id


@pytest.mark.parametrize("lease", ["", "999999"])
def test_a_submit_without_the_workers_lease_goes_back_to_the_task_page(published, mturk, lease):
    """A missing lease id beside the signed token, or one that is not this worker's: no label, and the
    frame goes back to the HIT's task page, which says so and shows another prompt."""
    action = label_form_action(open_task(mturk, accept(mturk, "AW1")))
    response = fresh_client().post(re.sub(r"lease=\d+", f"lease={lease}", action), {"value": "1"})
    assert response.status_code == 302 and response["Location"].endswith("&notice=not_leased")
    assert Label.objects.count() == 0
    assert b"That prompt is no longer yours" in fresh_client().get(response["Location"]).content


def test_heartbeat_with_the_token(published, mturk):
    page = open_task(mturk, accept(mturk, "AW1"))
    url = re.search(r'data-heartbeat-url="([^"]+)"', page.content.decode()).group(1).replace("&amp;", "&")
    response = fresh_client().post(url)
    assert response.status_code == 200 and "expires_at" in response.json()
    assert fresh_client().post("/channels/mturk/task/heartbeat/?t=x&lease=1").status_code == 400


def test_nothing_left_blocks_the_worker(make_campaign, researcher, mturk, django_capture_on_commit_callbacks):
    campaign = make_campaign(1, k=2)
    publication = services.publication_create_mturk(
        campaign=campaign, user=researcher, options={**OPTIONS, "assignments_per_hit": 1}
    )
    services.publication_publish(publication_id=publication.pk)
    first_hit, second_hit = list(mturk.hits)
    aid = mturk.accept(first_hit, "AW1")
    assert fresh_client().post(label_form_action(open_task(mturk, aid)), {"value": "1"}).status_code == 200
    second = mturk.accept(second_hit, "AW1")
    with django_capture_on_commit_callbacks() as callbacks:
        page = open_task(mturk, second)
    mturk.return_assignment(second)  # as the page asks
    assert b"Nothing left for you" in page.content and b"return this HIT" in page.content
    assert len(callbacks) == 1  # mturk_block_worker_task, after commit
    assert publication.blocks.get().worker.external_id == "AW1"
    services.mturk_block_push(block_id=publication.blocks.get().pk)
    assert mturk.visible_hits("AW1") == [] and mturk.visible_hits("AW2") != []


class TestResearcherPages:
    def test_cost_preview_then_publish(
        self, client, researcher, make_campaign, locmem_channel, django_capture_on_commit_callbacks
    ):
        campaign = make_campaign(10, k=2)
        client.force_login(researcher)
        url = f"/channels/campaigns/{campaign.slug}/mturk/"
        assert client.get(url).status_code == 200
        form = {
            **OPTIONS,
            "assignments_per_hit": 9,
            "lifetime": 86400,
            "auto_approval_delay": 3600,
            "locales": "US",
            "min_approval_rate": 95,
            "preview": "1",
        }
        preview = client.post(url, form)
        assert preview.status_code == 200 and Publication.objects.count() == 0
        assert preview.context["preview"].total == Decimal("2.40")  # 20 × (0.10 + 0.02)
        assert b"Publish for $2.40" in preview.content
        # a total the researcher did not see does not publish
        client.post(url, {**form, "publish": "1", "confirm_total": "1.00"})
        assert Publication.objects.count() == 0
        with django_capture_on_commit_callbacks() as callbacks:
            done = client.post(url, {**form, "publish": "1", "confirm_total": "2.40"})
        publication = Publication.objects.get()
        assert done.status_code == 302 and done["Location"] == f"/channels/publications/{publication.pk}/"
        assert len(callbacks) == 1 and locmem.outbox == []  # nothing sent from the web request
        assert publication.options["locales"] == ["US"] and publication.options["min_approval_rate"] == 95

    def test_durations_are_shown_and_typed_in_words(self, client, researcher, make_campaign, locmem_channel):
        campaign = make_campaign(10, k=2, lease_seconds=300)
        client.force_login(researcher)
        url = f"/channels/campaigns/{campaign.slug}/mturk/"
        page = client.get(url).content.decode()
        assert 'name="lifetime" value="7 days"' in page and 'name="auto_approval_delay" value="3 days"' in page
        form = {
            **OPTIONS,
            "assignment_duration": "10 minutes",
            "lifetime": "1 day 12 hours",
            "auto_approval_delay": "3600",
            "preview": "1",
        }  # a bare number is seconds
        preview = client.post(url, form)
        assert preview.status_code == 200
        client.post(url, {**form, "publish": "1", "confirm_total": str(preview.context["preview"].total)})
        options = Publication.objects.get().options
        assert (options["assignment_duration"], options["lifetime"], options["auto_approval_delay"]) == (
            600,
            129600,
            3600,
        )
        refused = client.post(url, {**form, "lifetime": "soon"})
        assert refused.status_code == 400 and "is not a duration" in refused.content.decode()

    def test_progress_page_and_withdraw(self, client, researcher, make_campaign, locmem_channel):
        campaign = make_campaign(10, k=2)
        publication = services.publication_create_mturk(campaign=campaign, user=researcher, options=OPTIONS)
        services.publication_publish(publication_id=publication.pk)
        client.force_login(researcher)
        page = client.get(f"/channels/publications/{publication.pk}/")
        assert page.status_code == 200
        progress = page.context["progress"]
        assert (progress.hits_live, progress.assignments_published, progress.approved) == (7, 20, 0)
        assert client.get(f"/channels/campaigns/{campaign.slug}/").status_code == 200
        assert client.post(f"/channels/publications/{publication.pk}/withdraw/").status_code == 302
        publication.refresh_from_db()
        assert publication.status == "withdrawing"

    def test_other_users_see_nothing(self, client, make_user, make_campaign, researcher, locmem_channel):
        campaign = make_campaign(3)
        publication = services.publication_create_mturk(campaign=campaign, user=researcher, options=OPTIONS)
        client.force_login(make_user("stranger"))
        for url in (
            f"/channels/publications/{publication.pk}/",
            f"/channels/campaigns/{campaign.slug}/mturk/",
            f"/channels/campaigns/{campaign.slug}/",
        ):
            assert client.get(url).status_code == 404
        assert client.post(f"/channels/publications/{publication.pk}/withdraw/").status_code == 404
        publication.refresh_from_db()
        assert publication.status == "pending"
