"""The channels services: validation first, then writes; publishing and reconciliation edge cases."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from annotation.channels import locmem, services
from annotation.channels.base import ChannelPermanentError, HITSpec
from annotation.channels.errors import PublicationRefused
from annotation.channels.locmem import LocMemChannel
from annotation.channels.models import MTurkHIT, Publication
from annotation.channels.options import mturk_options_clean
from annotation.channels.pricing import mturk_cost_preview
from annotation.channels.registry import get_channel
from tests.channels.conftest import PUBLIC_URL

pytestmark = pytest.mark.django_db

OPTIONS = {"title": "Label statements", "description": "Is each statement true?", "reward": "0.10"}


class RefusingChannel(LocMemChannel):
    """A throwaway backend whose publish is refused, as MTurk refuses a requester without funds."""

    def publish(self, *, prepared, hit):
        raise ChannelPermanentError("Insufficient funds in your account.", operation="publish", code="RequestError")


class TestOptions:
    @pytest.mark.parametrize(
        "options, message",
        [
            ({**OPTIONS, "colour": "red"}, "Unknown MTurk options: colour"),
            ({**OPTIONS, "title": " "}, "title is required"),
            ({**OPTIONS, "reward": "ten"}, "reward must be an amount"),
            ({**OPTIONS, "reward": "0.001"}, "reward must be from 0.01"),
            ({**OPTIONS, "n_assignments": 31}, "more than the 30 labels"),
            ({**OPTIONS, "assignment_duration": 100}, "at least the campaign's lease length"),
            ({**OPTIONS, "assignments_per_hit": 0}, "assignments_per_hit must be from 1"),
            ({**OPTIONS, "locales": "US, France"}, "'France' is not a country code"),
            ({**OPTIONS, "min_approval_rate": 101}, "min_approval_rate must be from 0 to 100"),
            ({**OPTIONS, "lifetime": True}, "lifetime must be a whole number"),
        ],
    )
    def test_bad_options_are_refused_and_change_nothing(
        self, make_campaign, researcher, locmem_channel, options, message
    ):
        campaign = make_campaign(10, k=3, lease_seconds=600)
        with pytest.raises(PublicationRefused, match=message) as refused:
            services.publication_create_mturk(campaign=campaign, user=researcher, options=options)
        assert refused.value.code == "bad_options"
        assert Publication.objects.count() == 0 and MTurkHIT.objects.count() == 0 and locmem.outbox == []

    def test_defaults(self, make_campaign):
        campaign = make_campaign(10, k=3, lease_seconds=120)
        clean = mturk_options_clean(campaign=campaign, options={**OPTIONS, "locales": "us, gb-eng"})
        assert clean["n_assignments"] == 30 and clean["assignments_per_hit"] == 9
        assert clean["assignment_duration"] == 300 and clean["reward"] == "0.10"
        assert clean["locales"] == ["US", "GB-ENG"] and clean["min_approval_rate"] is None


class TestCostPreview:
    def test_twenty_percent_below_ten_assignments_per_hit(self):
        preview = mturk_cost_preview(reward=Decimal("0.10"), n_assignments=20, assignments_per_hit=9)
        assert (preview.n_hits, preview.rewards_total, preview.commission_total, preview.total) == (
            3,
            Decimal("2.00"),
            Decimal("0.40"),
            Decimal("2.40"),
        )
        assert preview.commission_rates == ("20%",)

    def test_forty_percent_for_hits_of_ten_or_more(self):
        preview = mturk_cost_preview(reward=Decimal("0.50"), n_assignments=25, assignments_per_hit=10)
        # two HITs of 10 at 40% (0.20 each), one of 5 at 20% (0.10 each)
        assert preview.commission_total == Decimal("20") * Decimal("0.20") + Decimal("5") * Decimal("0.10")
        assert preview.total == Decimal("12.50") + Decimal("4.50") and preview.commission_rates == ("20%", "40%")

    def test_at_least_one_cent_per_assignment(self):
        preview = mturk_cost_preview(reward=Decimal("0.03"), n_assignments=7, assignments_per_hit=9)
        assert preview.commission_total == Decimal("0.07") and preview.total == Decimal("0.28")


class TestPublicationCreate:
    def test_writes_pending_rows_and_enqueues_after_commit_only(
        self, make_campaign, researcher, locmem_channel, django_capture_on_commit_callbacks
    ):
        campaign = make_campaign(10, k=2)
        with django_capture_on_commit_callbacks() as callbacks:
            publication = services.publication_create_mturk(
                campaign=campaign, user=researcher, options={**OPTIONS, "assignments_per_hit": 6, "n_assignments": 15}
            )
        assert len(callbacks) == 1 and locmem.outbox == []
        assert publication.status == Publication.Status.PENDING and publication.worker_channel == "mturk_sandbox"
        assert list(publication.hits.values_list("index", "max_assignments", "hit_id")) == [
            (0, 6, None),
            (1, 6, None),
            (2, 3, None),
        ]

    def test_one_active_publication_per_channel(self, make_campaign, researcher, locmem_channel):
        campaign = make_campaign(5)
        first = services.publication_create_mturk(campaign=campaign, user=researcher, options=OPTIONS)
        with pytest.raises(PublicationRefused) as refused:
            services.publication_create_mturk(campaign=campaign, user=researcher, options=OPTIONS)
        assert refused.value.code == "already_published"
        services.publication_withdraw(publication=first)
        services.publication_create_mturk(campaign=campaign, user=researcher, options=OPTIONS)
        assert Publication.objects.count() == 2

    def test_refusals(self, make_campaign, researcher, locmem_channel):
        with pytest.raises(PublicationRefused) as refused:
            services.publication_create_mturk(campaign=make_campaign(5, launch=False), user=researcher, options=OPTIONS)
        assert refused.value.code == "campaign_not_live"
        with override_settings(CHORUS_PUBLIC_URL="http://insecure.test"):
            with pytest.raises(PublicationRefused) as refused:
                services.publication_create_mturk(
                    campaign=make_campaign(5, title="B"), user=researcher, options=OPTIONS
                )
        assert refused.value.code == "no_public_url" and Publication.objects.count() == 0


class TestPublish:
    def test_tokens_derive_from_rows_and_a_second_run_sends_nothing(self, make_campaign, researcher, locmem_channel):
        campaign = make_campaign(10, k=2)
        publication = services.publication_create_mturk(
            campaign=campaign, user=researcher, options={**OPTIONS, "assignments_per_hit": 9}
        )
        outcome = services.publication_publish(publication_id=publication.pk)
        assert (outcome.status, outcome.created) == ("published", 3)
        tokens = [call.kwargs["hit"].token for call in locmem.outbox if call.method == "publish"]
        assert tokens == [f"{publication.token_prefix}-h{i}" for i in range(3)] and all(len(t) <= 64 for t in tokens)
        urls = {call.kwargs["hit"].external_url for call in locmem.outbox if call.method == "publish"}
        assert urls == {f"{PUBLIC_URL}/channels/mturk/task/?publication={publication.pk}"}
        sent = len(locmem.outbox)
        assert services.publication_publish(publication_id=publication.pk).status == "published"
        assert len(locmem.outbox) == sent

    def test_a_transient_failure_is_resumed_without_duplicates(self, make_campaign, researcher, mturk):
        from annotation.channels.base import ChannelTransientError

        campaign = make_campaign(10, k=2)
        publication = services.publication_create_mturk(
            campaign=campaign, user=researcher, options={**OPTIONS, "assignments_per_hit": 5}
        )
        # HIT 0 is created but its answer is lost, and every retry is throttled: the task gives up
        # with a HIT on MTurk that Chorus has not recorded.
        mturk.inject("CreateHITWithHITType", "lost_response")
        mturk.inject("CreateHITWithHITType", "throttle", times=5)
        with pytest.raises(ChannelTransientError):
            services.publication_publish(publication_id=publication.pk)
        publication.refresh_from_db()
        assert publication.status == "publishing"
        assert publication.hits.filter(hit_id__isnull=False).count() == 0 and len(mturk.hits) == 1
        outcome = services.publication_publish(publication_id=publication.pk)  # Celery's retry
        assert (outcome.status, outcome.created, outcome.found_again) == ("published", 3, 1)
        assert len(mturk.hits) == 4 and publication.hits.filter(status="live").count() == 4

    def test_a_permanent_refusal_marks_the_publication_failed(self, make_campaign, researcher):
        config = {"mturk": {"BACKEND": "tests.channels.test_services.RefusingChannel"}}
        with override_settings(CHORUS_CHANNELS=config, CHORUS_PUBLIC_URL=PUBLIC_URL):
            publication = services.publication_create_mturk(campaign=make_campaign(5), user=researcher, options=OPTIONS)
            assert services.publication_publish(publication_id=publication.pk).status == "failed"
        publication.refresh_from_db()
        assert publication.status == "failed" and "Insufficient funds" in publication.error

    def test_a_retry_after_the_tokens_24_hours_finds_the_hit(self, mturk):
        channel = get_channel("mturk")
        from tests.channels.test_contract import GROUP

        prepared = channel.prepare(group=GROUP, token="cold")
        hit = HITSpec(token="cold-h0", max_assignments=3, lifetime=3600, external_url=f"{PUBLIC_URL}/x/")
        first = channel.publish(prepared=prepared, hit=hit)
        mturk.tokens.clear()  # MTurk has forgotten the token
        late = HITSpec(**{**hit.__dict__, "first_attempt_at": datetime.now(UTC) - timedelta(days=2)})
        again = channel.publish(prepared=prepared, hit=late)
        assert (again.hit_id, again.created) == (first.hit_id, False) and len(mturk.hits) == 1


def test_refilling_a_nine_assignment_hit_adds_a_one_assignment_hit(make_campaign, researcher, mturk):
    campaign = make_campaign(5, k=2)
    publication = services.publication_create_mturk(
        campaign=campaign, user=researcher, options={**OPTIONS, "assignments_per_hit": 9, "n_assignments": 9}
    )
    services.publication_publish(publication_id=publication.pk)
    (hit_id,) = mturk.hits
    forged = mturk.accept(hit_id, "AFORGER")
    mturk.external_submit({"assignmentId": forged})
    report = services.mturk_reconcile(publication_id=publication.pk)
    again = services.mturk_reconcile(publication_id=publication.pk)
    assert (report.rejected, report.refilled, report.errors) == (1, 1, [])
    assert (again.rejected, again.refilled) == (0, 0)
    assert sorted(h["max"] for h in mturk.hits.values()) == [1, 9]  # MTurk refuses 9 -> 10 on the same HIT
    assert publication.hits.count() == 2


def test_withdrawing_expires_the_hits_and_reviewing_goes_on(
    make_campaign, researcher, mturk, eager_celery, django_capture_on_commit_callbacks
):
    campaign = make_campaign(5, k=2)
    publication = services.publication_create_mturk(
        campaign=campaign, user=researcher, options={**OPTIONS, "n_assignments": 9}
    )
    services.publication_publish(publication_id=publication.pk)
    (hit_id,) = mturk.hits
    late = mturk.accept(hit_id, "ALATE")  # accepted before the withdrawal, submitted after it
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        services.publication_withdraw(publication=publication)
    assert len(callbacks) == 1
    publication.refresh_from_db()
    assert publication.status == "withdrawn" and mturk.visible_hits("ANYONE") == []
    assert publication.hits.get().status == "expired"
    mturk.external_submit({"assignmentId": late})
    report = services.mturk_reconcile(publication_id=publication.pk)
    assert (report.rejected, report.refilled) == (1, 0)  # reviewed, but not replaced: withdrawn
    assert publication.hits.get().max_assignments == 9 and mturk.status_of(late) == "Rejected"


def test_periodic_task_and_command(make_campaign, researcher, locmem_channel):
    from annotation.channels.tasks import mturk_reconcile_task

    publication = services.publication_create_mturk(campaign=make_campaign(5), user=researcher, options=OPTIONS)
    results = mturk_reconcile_task()  # resumes the pending publication, then reconciles it
    assert list(results) == [publication.pk] and "hits 2" in results[publication.pk]
    publication.refresh_from_db()
    assert publication.status == "published"
    out = StringIO()
    call_command("mturk_reconcile", "--publication", str(publication.pk), stdout=out)
    assert out.getvalue().startswith(f"publication {publication.pk}: hits 2")
    with pytest.raises(CommandError, match="No MTurk publication with id 999"):
        call_command("mturk_reconcile", "--publication", "999", stdout=StringIO())


def test_bonus_grant_validates(make_campaign, researcher, locmem_channel):
    from annotation.channels.models import MTurkAssignment

    campaign = make_campaign(3)
    publication = services.publication_create_mturk(campaign=campaign, user=researcher, options=OPTIONS)
    services.publication_publish(publication_id=publication.pk)
    hit = publication.hits.get()
    from annotation.services import worker_get_or_create

    worker = worker_get_or_create(channel="mturk_sandbox", external_id="W1")
    assignment = MTurkAssignment.objects.create(assignment_id="A1", hit=hit, worker=worker)
    with pytest.raises(PublicationRefused, match="submitted or approved"):
        services.mturk_bonus_grant(assignment=assignment, amount="1", reason="x")
    assignment.status = "approved"
    for amount, reason, message in [("0", "x", "from 0.01"), ("abc", "x", "US dollars"), ("1", " ", "give one")]:
        with pytest.raises(PublicationRefused, match=message):
            services.mturk_bonus_grant(assignment=assignment, amount=amount, reason=reason)
    assert assignment.bonuses.count() == 0


def test_publishing_stops_when_the_campaign_fills_up_meanwhile(make_campaign, make_worker, researcher, locmem_channel):
    from annotation import services as core

    campaign = make_campaign(2, k=1)
    publication = services.publication_create_mturk(
        campaign=campaign, user=researcher, options={**OPTIONS, "assignments_per_hit": 1}
    )
    worker = make_worker()
    for _ in range(2):  # native workers fill the campaign before the task runs
        lease = core.lease_acquire(campaign=campaign, worker=worker)
        core.label_submit(lease_id=lease.pk, worker=worker, value=1, client_token=f"t{lease.pk}")
    outcome = services.publication_publish(publication_id=publication.pk)
    assert (outcome.status, outcome.created) == ("published", 0)
    assert [c.method for c in locmem.outbox] == ["prepare"]
    with pytest.raises(PublicationRefused) as refused:
        mturk_options_clean(campaign=campaign, options=OPTIONS)
    assert refused.value.code == "nothing_needed"
