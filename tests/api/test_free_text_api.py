"""Issue 14: the worker-loop API takes a free-text answer as a JSON string, and refuses bad ones with the
schema's message, writing nothing."""

import pytest

from annotation import services
from annotation.models import Campaign, Label, Lease, Slot
from annotation.selectors import invariant_violations
from tests.api.test_worker_loop import next_task, submit
from tests.helpers import assert_error, prompts_jsonl

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]


@pytest.fixture
def campaign(researcher):
    campaign = services.campaign_create(
        owner=researcher, title="Q", schema=Campaign.Schema.FREE_TEXT, k=2, answer_max_length=30
    )
    services.prompts_import(campaign=campaign, data=prompts_jsonl(2, gold=False), filename="q.jsonl")
    return services.campaign_transition(campaign=campaign, action="launch")


@pytest.mark.parametrize(
    "value, message",
    [
        ("", "The answer is empty: type an answer."),
        ("  \n ", "The answer is empty: type an answer."),
        ("x" * 31, f"The answer must be 1 to 30 characters long; '{'x' * 31}' has 31."),
        ("\u0000zero", "The answer holds a non-printing character (U+0000) at position 1"),
        (7, "The answer must be text; got 7."),
        (["a"], "The answer must be text; got ['a']."),
    ],
)
def test_bad_answers_are_refused_and_change_nothing(campaign, make_user, api, value, message):
    client = api(make_user())
    lease_id = next_task(client, campaign).json()["lease"]["id"]
    slots = list(Slot.objects.order_by("pk").values())
    error = assert_error(submit(client, lease_id, value=value), 409, "bad_value")
    assert error["message"].startswith(message)
    assert list(Slot.objects.order_by("pk").values()) == slots and Label.objects.count() == 0
    assert Lease.objects.get(pk=lease_id).status == Lease.Status.ACTIVE


def test_a_text_beyond_any_answer_is_refused_before_the_schema(campaign, make_user, api):
    client = api(make_user())
    lease_id = next_task(client, campaign).json()["lease"]["id"]
    error = assert_error(submit(client, lease_id, value="x" * 1121), 400, "invalid")
    assert "a text of at most 1120 characters" in str(error)
    assert_error(submit(client, lease_id, value=None), 400, "invalid")  # no answer at all
    assert Label.objects.count() == 0


def test_answers_are_acknowledged_once_and_stored_normalised(campaign, make_user, api):
    users = [make_user() for _ in range(3)]
    for n, user in enumerate(users):
        client = api(user)
        for _ in range(2):
            lease = next_task(client, campaign).json()["lease"]
            if lease is None:
                break
            first = submit(client, lease["id"], value=f"  walk\tthe   dog {n} ", token=f"t{lease['id']}")
            assert first.status_code == 201
            again = submit(client, lease["id"], value=f"  walk\tthe   dog {n} ", token=f"t{lease['id']}")
            assert again.status_code == 200 and again.json()["duplicate"] is True
    assert invariant_violations(campaign=campaign, complete=True) == []
    assert sorted(Label.objects.values_list("value", flat=True)) == sorted(f"walk the dog {n}" for n in (0, 0, 1, 1))
    mine = api(users[0]).get(f"/api/v1/campaigns/{campaign.slug}/my-labels/").json()
    assert {row["value"] for row in mine["results"]} == {"walk the dog 0"}
