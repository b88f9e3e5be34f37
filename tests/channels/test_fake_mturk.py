"""The fake MTurk enforces what the channel tests rely on (a test double that lies proves nothing)."""

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.channels.fake_mturk import FakeRefusal

QUESTION = (
    '<ExternalQuestion xmlns="http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/'
    'ExternalQuestion.xsd"><ExternalURL>https://chorus.test/t/?p=1</ExternalURL><FrameHeight>0</FrameHeight>'
    "</ExternalQuestion>"
)


@pytest.fixture
def client(fake_mturk):
    return boto3.client(
        "mturk",
        region_name="us-east-1",
        endpoint_url=fake_mturk.url,
        aws_access_key_id="x",
        aws_secret_access_key="y",
        config=Config(retries={"mode": "standard", "total_max_attempts": 3}),
    )


def make_hit(client, n=2, token=None, duration=60, auto_approval=3600):
    hit_type = client.create_hit_type(
        Title="t",
        Description="d",
        Reward="0.05",
        AssignmentDurationInSeconds=duration,
        AutoApprovalDelayInSeconds=auto_approval,
    )["HITTypeId"]
    extra = {"UniqueRequestToken": token} if token else {}
    return client.create_hit_with_hit_type(
        HITTypeId=hit_type, MaxAssignments=n, LifetimeInSeconds=600, Question=QUESTION, **extra
    )["HIT"]["HITId"]


def test_assignments_one_per_worker_and_reopened_by_returns_and_abandons(client, fake_mturk):
    hit = make_hit(client, n=2, duration=60)
    first = fake_mturk.accept(hit, "W1")
    with pytest.raises(FakeRefusal, match="one assignment per worker"):
        fake_mturk.accept(hit, "W1")
    fake_mturk.accept(hit, "W2")
    with pytest.raises(FakeRefusal, match="no assignment available"):
        fake_mturk.accept(hit, "W3")
    fake_mturk.return_assignment(first)
    third = fake_mturk.accept(hit, "W3")
    fake_mturk.advance(61)  # W3 never submits: abandoned, and so is W2's
    assert fake_mturk.status_of(third) == "Abandoned"
    assert fake_mturk.visible_hits("W4") == [hit]
    counts = client.get_hit(HITId=hit)["HIT"]
    assert (counts["NumberOfAssignmentsAvailable"], counts["NumberOfAssignmentsPending"]) == (2, 0)


def test_review_twice_tokens_and_the_ten_assignment_rule(client, fake_mturk):
    hit = make_hit(client, n=9, token="tok-1")
    with pytest.raises(ClientError) as again:
        make_hit(client, n=9, token="tok-1")
    assert again.value.response["Error"]["Code"] == "RequestError" and hit in again.value.response["Error"]["Message"]
    assert again.value.response["TurkErrorCode"] == "AWS.MechanicalTurk.HitAlreadyExists"
    aid = fake_mturk.accept(hit, "W1")
    with pytest.raises(ClientError):
        client.approve_assignment(AssignmentId=aid)  # not submitted yet
    fake_mturk.external_submit({"assignmentId": aid, "x": "1"})
    client.approve_assignment(AssignmentId=aid)
    with pytest.raises(ClientError) as twice:
        client.approve_assignment(AssignmentId=aid)
    assert twice.value.response["Error"]["Code"] == "RequestError"
    with pytest.raises(ClientError, match="cannot be extended to 10"):
        client.create_additional_assignments_for_hit(
            HITId=hit, NumberOfAdditionalAssignments=1, UniqueRequestToken="r1"
        )
    client.send_bonus(WorkerId="W1", BonusAmount="0.10", AssignmentId=aid, Reason="r", UniqueRequestToken="b1")
    with pytest.raises(ClientError):
        client.send_bonus(WorkerId="W1", BonusAmount="0.10", AssignmentId=aid, Reason="r", UniqueRequestToken="b1")
    assert len(fake_mturk.bonuses) == 1 and fake_mturk.effects[("approve", aid)] == 1


def test_auto_approval_and_pagination(client, fake_mturk):
    hit = make_hit(client, n=5, auto_approval=10)
    for i in range(5):
        fake_mturk.external_submit({"assignmentId": fake_mturk.accept(hit, f"W{i}")})
    fake_mturk.advance(11)
    pages = list(
        client.get_paginator("list_assignments_for_hit").paginate(HITId=hit, PaginationConfig={"PageSize": 100})
    )
    assert [len(p["Assignments"]) for p in pages] == [2, 2, 1]  # page_cap=2
    assert {a["AssignmentStatus"] for p in pages for a in p["Assignments"]} == {"Approved"}


def test_throttling_is_retried_by_botocore(client, fake_mturk):
    fake_mturk.inject("GetAccountBalance", "throttle", times=2)
    assert client.get_account_balance()["AvailableBalance"] == "10000.00"
    assert fake_mturk.attempts["GetAccountBalance"] == 3
