"""The MTurk backend's exact requests (botocore's Stubber), its configuration, and the registry."""

import os
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from botocore.stub import ANY, Stubber
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from annotation.channels.base import (
    ChannelPermanentError,
    ChannelTransientError,
    GroupSpec,
    HITSpec,
    PreparedGroup,
)
from annotation.channels.mturk import (
    PRODUCTION_ENDPOINT,
    SANDBOX_ENDPOINT,
    MTurkChannel,
    external_question,
    parse_answer,
)
from annotation.channels.registry import get_channel

GROUP = GroupSpec(
    title="Is it true?",
    description="Label one statement.",
    keywords="labels, truth",
    reward=Decimal("0.1"),
    assignment_duration=600,
    auto_approval_delay=86400,
    locales=("US", "GB-ENG"),
    min_approval_rate=95,
    min_approved=100,
)


@pytest.fixture
def channel(monkeypatch):
    monkeypatch.setenv("CHORUS_MTURK_ACCESS_KEY_ID", "AKIDTESTING")
    monkeypatch.setenv("CHORUS_MTURK_SECRET_ACCESS_KEY", "test-secret")
    return MTurkChannel(alias="mturk", sandbox=True)


@pytest.fixture
def stub(channel):
    with Stubber(channel.client) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


def test_prepare_sends_the_block_list_and_the_researchers_requirements(channel, stub):
    stub.add_response(
        "create_qualification_type",
        {"QualificationType": {"QualificationTypeId": "BLOCKQ"}},
        {
            "Name": "Chorus: nothing left (cabc)",
            "Keywords": "chorus",
            "Description": ANY,
            "QualificationTypeStatus": "Active",
        },
    )
    guard = "DiscoverPreviewAndAccept"
    stub.add_response(
        "create_hit_type",
        {"HITTypeId": "TYPE1"},
        {
            "Title": "Is it true?",
            "Description": "Label one statement.",
            "Keywords": "labels, truth",
            "Reward": "0.10",
            "AssignmentDurationInSeconds": 600,
            "AutoApprovalDelayInSeconds": 86400,
            "QualificationRequirements": [
                {"QualificationTypeId": "BLOCKQ", "Comparator": "DoesNotExist", "ActionsGuarded": guard},
                {
                    "QualificationTypeId": "00000000000000000071",
                    "Comparator": "In",
                    "LocaleValues": [{"Country": "US"}, {"Country": "GB", "Subdivision": "ENG"}],
                    "ActionsGuarded": guard,
                },
                {
                    "QualificationTypeId": "000000000000000000L0",
                    "Comparator": "GreaterThanOrEqualTo",
                    "IntegerValues": [95],
                    "ActionsGuarded": guard,
                },
                {
                    "QualificationTypeId": "00000000000000000040",
                    "Comparator": "GreaterThanOrEqualTo",
                    "IntegerValues": [100],
                    "ActionsGuarded": guard,
                },
            ],
        },
    )
    assert channel.prepare(group=GROUP, token="cabc") == PreparedGroup("TYPE1", "BLOCKQ")


def test_publish_sends_an_external_question_and_the_rows_token(channel, stub):
    url = "https://chorus.example/channels/mturk/task/?publication=7&x=1"
    stub.add_response(
        "create_hit_with_hit_type",
        {"HIT": {"HITId": "HIT1", "MaxAssignments": 9, "Expiration": datetime(2030, 1, 1, tzinfo=UTC)}},
        {
            "HITTypeId": "TYPE1",
            "MaxAssignments": 9,
            "LifetimeInSeconds": 3600,
            "Question": external_question(url, 0),
            "RequesterAnnotation": "cabc-h3",
            "UniqueRequestToken": "cabc-h3",
        },
    )
    published = channel.publish(
        prepared=PreparedGroup("TYPE1", "BLOCKQ"),
        hit=HITSpec(token="cabc-h3", max_assignments=9, lifetime=3600, external_url=url),
    )
    assert (published.hit_id, published.created) == ("HIT1", True)
    assert (
        "<ExternalURL>https://chorus.example/channels/mturk/task/?publication=7&amp;x=1</ExternalURL>"
        in external_question(url)
    )


def test_bonus_carries_the_token_and_a_duplicate_is_read_back(channel, stub):
    params = {
        "WorkerId": "W1",
        "BonusAmount": "0.50",
        "AssignmentId": "A1",
        "Reason": "Thanks (ref cabc-b4)",
        "UniqueRequestToken": "cabc-b4",
    }
    stub.add_response("send_bonus", {}, params)
    stub.add_client_error("send_bonus", "RequestError", "already used", expected_params=params)
    stub.add_response(
        "list_bonus_payments",
        {
            "BonusPayments": [
                {"WorkerId": "W1", "BonusAmount": "0.50", "AssignmentId": "A1", "Reason": "Thanks (ref cabc-b4)"}
            ]
        },
        {"AssignmentId": "A1", "MaxResults": 100},
    )
    args = dict(
        worker_ref="W1", submission_id="A1", amount=Decimal("0.5"), reason="Thanks (ref cabc-b4)", token="cabc-b4"
    )
    assert channel.pay_bonus(**args).already is False
    assert channel.pay_bonus(**args).already is True


def test_a_refused_bonus_that_was_never_paid_stays_an_error(channel, stub):
    stub.add_client_error("send_bonus", "RequestError", "Insufficient funds")
    stub.add_response("list_bonus_payments", {"BonusPayments": []}, {"AssignmentId": "A1", "MaxResults": 100})
    with pytest.raises(ChannelPermanentError, match="Insufficient funds"):
        channel.pay_bonus(worker_ref="W1", submission_id="A1", amount=Decimal("1"), reason="r", token="t")


def test_approving_twice_is_recognised(channel, stub):
    stub.add_response("approve_assignment", {}, {"AssignmentId": "A1"})
    stub.add_client_error(
        "approve_assignment", "RequestError", "This operation can be called with a status of: Submitted"
    )
    stub.add_response(
        "get_assignment", {"Assignment": {"AssignmentId": "A1", "AssignmentStatus": "Approved"}}, {"AssignmentId": "A1"}
    )
    assert channel.approve(submission_id="A1").already is False
    assert channel.approve(submission_id="A1").already is True


def test_errors_are_classified(channel, stub):
    stub.add_client_error("get_account_balance", "ServiceFault", "try again", http_status_code=500)
    stub.add_client_error("get_account_balance", "ThrottlingException", "Rate exceeded")
    stub.add_client_error("get_account_balance", "RequestError", "bad", http_status_code=400)
    with pytest.raises(ChannelTransientError):
        channel.account_balance()
    with pytest.raises(ChannelTransientError):
        channel.account_balance()
    with pytest.raises(ChannelPermanentError) as raised:
        channel.account_balance()
    assert raised.value.operation == "get_account_balance" and raised.value.code == "RequestError"


def test_endpoints_region_and_retries(monkeypatch):
    monkeypatch.setenv("CHORUS_MTURK_ACCESS_KEY_ID", "AKIDTESTING")
    monkeypatch.setenv("CHORUS_MTURK_SECRET_ACCESS_KEY", "test-secret")
    sandbox = MTurkChannel(alias="mturk", sandbox=True, max_attempts=4)
    production = MTurkChannel(alias="mturk", sandbox=False)
    assert (
        sandbox.client.meta.endpoint_url
        == SANDBOX_ENDPOINT
        == "https://mturk-requester-sandbox.us-east-1.amazonaws.com"
    )
    assert (
        production.client.meta.endpoint_url == PRODUCTION_ENDPOINT == "https://mturk-requester.us-east-1.amazonaws.com"
    )
    assert sandbox.client.meta.region_name == production.client.meta.region_name == "us-east-1"
    assert sandbox.client.meta.config.retries == {"mode": "standard", "total_max_attempts": 4}
    assert (sandbox.worker_channel, production.worker_channel) == ("mturk_sandbox", "mturk")
    assert sandbox.submit_origins() == ("https://workersandbox.mturk.com",)
    assert production.submit_origins() == ("https://www.mturk.com",)
    assert "test-secret" not in repr(sandbox) and "AKID" not in repr(sandbox)
    with pytest.raises(ImproperlyConfigured, match="us-east-1"):
        MTurkChannel(alias="mturk", region="eu-west-1")


def test_half_configured_credentials_are_refused(monkeypatch):
    monkeypatch.setenv("CHORUS_MTURK_ACCESS_KEY_ID", "AKIDTESTING")
    monkeypatch.delenv("CHORUS_MTURK_SECRET_ACCESS_KEY", raising=False)
    with pytest.raises(ImproperlyConfigured, match="CHORUS_MTURK_SECRET_ACCESS_KEY"):
        MTurkChannel(alias="mturk").open()


def test_answers_are_parsed():
    xml = (
        '<QuestionFormAnswers xmlns="http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2005-10-01/'
        'QuestionFormAnswers.xsd"><Answer><QuestionIdentifier>chorus_label</QuestionIdentifier>'
        "<FreeText>42</FreeText></Answer></QuestionFormAnswers>"
    )
    assert parse_answer(xml) == {"chorus_label": "42"}
    assert parse_answer("<not xml") == {} and parse_answer(None) == {}


class TestRegistry:
    def test_unknown_alias_names_the_configured_ones(self):
        with override_settings(CHORUS_CHANNELS={"mturk": {"BACKEND": "annotation.channels.locmem.LocMemChannel"}}):
            with pytest.raises(ImproperlyConfigured, match=r"No channel 'crowdflower'.*configured: mturk"):
                get_channel("crowdflower")

    def test_unknown_options_are_rejected_naming_the_alias(self):
        config = {
            "panelx": {"BACKEND": "annotation.channels.mturk.MTurkChannel", "OPTIONS": {"sandbox": True, "regoin": "x"}}
        }
        with override_settings(CHORUS_CHANNELS=config):
            with pytest.raises(ImproperlyConfigured, match=r"CHORUS_CHANNELS\['panelx'\]: unknown OPTIONS regoin"):
                get_channel("panelx")

    def test_bad_backends_and_keys(self):
        for config, message in [
            ({"BACKEND": "annotation.channels.nope.Backend"}, "cannot import"),
            ({"BACKEND": "decimal.Decimal"}, "not a BaseChannel"),
            ({"BACKEND": "annotation.channels.locmem.LocMemChannel", "OPTION": {}}, "unknown keys OPTION"),
            ({"OPTIONS": {}}, "has no BACKEND"),
        ]:
            with override_settings(CHORUS_CHANNELS={"x": config}):
                with pytest.raises(ImproperlyConfigured, match=message):
                    get_channel("x")

    def test_cached_and_reset_when_the_setting_changes(self):
        config = {"mturk": {"BACKEND": "annotation.channels.locmem.LocMemChannel", "OPTIONS": {"worker_channel": "a"}}}
        with override_settings(CHORUS_CHANNELS=config):
            first = get_channel("mturk")
            assert get_channel("mturk") is first and first.worker_channel == "a"
            config2 = {
                "mturk": {"BACKEND": "annotation.channels.locmem.LocMemChannel", "OPTIONS": {"worker_channel": "b"}}
            }
            with override_settings(CHORUS_CHANNELS=config2):
                assert get_channel("mturk").worker_channel == "b"
            assert get_channel("mturk") is not first and get_channel("mturk").worker_channel == "a"

    def test_the_default_configuration_is_the_mturk_sandbox(self):
        from django.conf import settings

        assert settings.CHORUS_CHANNELS["mturk"]["BACKEND"] == "annotation.channels.mturk.MTurkChannel"
        if "CHORUS_MTURK_SANDBOX" not in os.environ:
            assert settings.CHORUS_CHANNELS["mturk"]["OPTIONS"]["sandbox"] is True
