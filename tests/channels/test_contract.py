"""One contract, every backend: the promises of annotation.channels.base, checked against the locmem
backend and the MTurk backend (talking to the fake MTurk over HTTP)."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from annotation.channels import locmem
from annotation.channels.base import ChannelPermanentError, GroupSpec, HITSpec
from annotation.channels.registry import get_channel

GROUP = GroupSpec(
    title="Label statements",
    description="Say whether each statement is true.",
    keywords="labels",
    reward=Decimal("0.10"),
    assignment_duration=600,
    auto_approval_delay=3600,
    locales=("US",),
    min_approval_rate=95,
)


def hit(token, n=2):
    return HITSpec(
        token=token,
        max_assignments=n,
        lifetime=3600,
        external_url="https://chorus.test/channels/mturk/task/?publication=1",
    )


class ChannelContract:
    """Each test gets ``channel`` and ``submit(hit_id, worker_ref) -> submission_id``."""

    def test_prepare_is_idempotent(self, channel, submit):
        first = channel.prepare(group=GROUP, token="ctok1")
        again = channel.prepare(group=GROUP, token="ctok1")
        assert first.group_id and first.block_id
        assert again == first

    def test_publishing_twice_with_one_token_gives_one_hit(self, channel, submit):
        prepared = channel.prepare(group=GROUP, token="ctok2")
        first = channel.publish(prepared=prepared, hit=hit("ctok2-h0"))
        again = channel.publish(prepared=prepared, hit=hit("ctok2-h0"))
        other = channel.publish(prepared=prepared, hit=hit("ctok2-h1"))
        assert first.created is True and again.created is False
        assert again.hit_id == first.hit_id and other.hit_id != first.hit_id
        assert first.max_assignments == 2 and first.expires_at > datetime.now(UTC)

    def test_submissions_are_listed_and_reviewed_once(self, channel, submit):
        prepared = channel.prepare(group=GROUP, token="ctok3")
        published = channel.publish(prepared=prepared, hit=hit("ctok3-h0", n=5))
        ids = [submit(published.hit_id, f"WORKER{i}") for i in range(5)]
        listed = list(channel.sync_submissions(hit_id=published.hit_id))
        assert sorted(s.submission_id for s in listed) == sorted(ids)
        assert {s.status for s in listed} == {"submitted"}
        assert {s.worker_ref for s in listed} == {f"WORKER{i}" for i in range(5)}

        first = channel.approve(submission_id=ids[0])
        second = channel.approve(submission_id=ids[0])
        assert (first.status, first.already, second.already) == ("approved", False, True)
        rejected = channel.reject(submission_id=ids[1], feedback="No label.")
        assert (rejected.status, rejected.already) == ("rejected", False)
        assert channel.reject(submission_id=ids[1], feedback="No label.").already is True
        with pytest.raises(ChannelPermanentError):
            channel.approve(submission_id=ids[1])  # rejected: approving it is refused, not "already"
        statuses = {s.submission_id: s.status for s in channel.sync_submissions(hit_id=published.hit_id)}
        assert statuses[ids[0]] == "approved" and statuses[ids[1]] == "rejected" and statuses[ids[2]] == "submitted"

    def test_a_bonus_token_pays_once(self, channel, submit):
        prepared = channel.prepare(group=GROUP, token="ctok4")
        published = channel.publish(prepared=prepared, hit=hit("ctok4-h0"))
        sid = submit(published.hit_id, "WORKERB")
        channel.approve(submission_id=sid)
        args = dict(
            worker_ref="WORKERB",
            submission_id=sid,
            amount=Decimal("0.50"),
            reason="Great work (ref ctok4-b1)",
            token="ctok4-b1",
        )
        assert channel.pay_bonus(**args).already is False
        assert channel.pay_bonus(**args).already is True

    def test_add_assignments_once_per_token(self, channel, submit):
        prepared = channel.prepare(group=GROUP, token="ctok5")
        published = channel.publish(prepared=prepared, hit=hit("ctok5-h0", n=1))
        submit(published.hit_id, "W1")
        assert channel.add_assignments(hit_id=published.hit_id, count=1, token="ctok5-r1", expected_total=2) is True
        assert channel.add_assignments(hit_id=published.hit_id, count=1, token="ctok5-r1", expected_total=2) is False
        submit(published.hit_id, "W2")
        with pytest.raises(ChannelPermanentError):
            submit(published.hit_id, "W3")  # two assignments in all: the token added only one

    def test_withdraw_and_extend(self, channel, submit):
        prepared = channel.prepare(group=GROUP, token="ctok6")
        published = channel.publish(prepared=prepared, hit=hit("ctok6-h0"))
        channel.withdraw(hit_id=published.hit_id)
        with pytest.raises(ChannelPermanentError):
            submit(published.hit_id, "W1")
        channel.extend(hit_id=published.hit_id, expires_at=datetime.now(UTC) + timedelta(hours=1))
        assert submit(published.hit_id, "W1")

    def test_unknown_hits_are_permanent_errors(self, channel, submit):
        with pytest.raises(ChannelPermanentError):
            list(channel.sync_submissions(hit_id="NOSUCHHIT0000000000000000000000"))


class TestLocMemChannel(ChannelContract):
    @pytest.fixture
    def channel(self, locmem_channel):
        return locmem_channel

    @pytest.fixture
    def submit(self, channel):
        def submit(hit_id, worker_ref):
            state = channel.state()
            hit = state["hits"][hit_id]
            if hit.expires_at <= datetime.now(UTC):
                raise ChannelPermanentError("expired", operation="submit")
            return channel.submit(hit_id, worker_ref)

        return submit

    def test_calls_are_recorded_in_the_outbox(self, channel, submit):
        channel.prepare(group=GROUP, token="ctok7")
        assert [(c.alias, c.method) for c in locmem.outbox] == [("mturk", "prepare")]
        assert locmem.outbox[0].kwargs["token"] == "ctok7"


class TestMTurkChannel(ChannelContract):
    @pytest.fixture
    def channel(self, mturk):
        return get_channel("mturk")

    @pytest.fixture
    def submit(self, mturk):
        from tests.channels.fake_mturk import FakeRefusal

        def submit(hit_id, worker_ref):
            try:
                aid = mturk.accept(hit_id, worker_ref)
            except FakeRefusal as exc:
                raise ChannelPermanentError(str(exc), operation="accept") from exc
            mturk.external_submit({"assignmentId": aid, "chorus_label": "1"})
            return aid

        return submit

    def test_listing_follows_next_token(self, channel, submit, mturk):
        prepared = channel.prepare(group=GROUP, token="ctok8")
        published = channel.publish(prepared=prepared, hit=hit("ctok8-h0", n=5))
        for i in range(5):
            submit(published.hit_id, f"W{i}")
        listed = list(channel.sync_submissions(hit_id=published.hit_id))
        assert len(listed) == 5 and listed[0].answer == {"chorus_label": "1"}
        assert mturk.attempts["ListAssignmentsForHIT"] == 3  # pages of 2, 2 and 1

    def test_throttling_is_retried_then_transient(self, channel, submit, mturk):
        from annotation.channels.base import ChannelTransientError

        mturk.inject("CreateHITType", "throttle", times=2)
        prepared = channel.prepare(group=GROUP, token="ctok9")  # two throttles, third attempt succeeds
        assert mturk.attempts["CreateHITType"] == 3 and prepared.group_id
        mturk.inject("GetAccountBalance", "throttle", times=10)
        with pytest.raises(ChannelTransientError) as raised:
            channel.account_balance()
        assert mturk.attempts["GetAccountBalance"] == 5  # total_max_attempts
        assert raised.value.code == "ThrottlingException"

    def test_a_lost_response_to_create_hit_does_not_duplicate_it(self, channel, submit, mturk):
        prepared = channel.prepare(group=GROUP, token="ctok10")
        mturk.inject("CreateHITWithHITType", "lost_response")
        published = channel.publish(prepared=prepared, hit=hit("ctok10-h0"))
        assert published.created is False  # the retry was answered "already exists" and read back
        assert len(mturk.hits) == 1 and published.hit_id in mturk.hits

    def test_blocked_workers_no_longer_see_the_hits(self, channel, submit, mturk):
        prepared = channel.prepare(group=GROUP, token="ctok11")
        published = channel.publish(prepared=prepared, hit=hit("ctok11-h0"))
        assert mturk.visible_hits("WBLOCK") == [published.hit_id]
        channel.block_worker(block_id=prepared.block_id, worker_ref="WBLOCK")
        assert mturk.visible_hits("WBLOCK") == []
        assert mturk.visible_hits("WOTHER") == [published.hit_id]
        channel.unblock_worker(block_id=prepared.block_id, worker_ref="WBLOCK")
        assert mturk.visible_hits("WBLOCK") == [published.hit_id]
        channel.unblock_worker(block_id=prepared.block_id, worker_ref="WBLOCK")  # a retry: MTurk refuses, yet done
        channel.block_worker(block_id=prepared.block_id, worker_ref="WBLOCK")
        mturk.inject("DisassociateQualificationFromWorker", "lost_response")
        channel.unblock_worker(block_id=prepared.block_id, worker_ref="WBLOCK")
        assert mturk.visible_hits("WBLOCK") == [published.hit_id]
        mturk.set_worker("WABROAD", locale="FR")
        assert mturk.visible_hits("WABROAD") == []  # the locale requirement
