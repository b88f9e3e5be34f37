"""Quality rules: written by ``annotation.services.rules`` (from the campaign page and the API), and
applied by the live audit after each quick audit (``audits.quality``) to a seeded simulated crowd.

Bad input is refused with the field named and nothing changed; only the campaign's managers (owner,
collaborators, staff) reach the rules, everybody else gets 404.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
from django.apps import apps
from django.core.exceptions import ValidationError
from django.urls import reverse
from rest_framework.test import APIClient

from annotation import services
from annotation.models import Label, Lease, Participation, Prompt, QualityRule, Worker, WorkerAction
from annotation.selectors import invariant_violations
from annotation.services.controls import prompts_control_set
from annotation.services.rules import MAX_MIN_LABELS, rule_create, rule_deactivate
from audits import selectors
from audits import services as audit_services
from tests.clock import paced
from tests.helpers import assert_error, jsonl, messages_of, signed_in

pytestmark = [pytest.mark.django_db]

GOOD = {"metric": "straight_lining", "threshold": 0.9, "min_labels": 20, "action": "block"}

# (changes to a good rule, the field named in the refusal)
BAD = [
    ({"threshold": 1.5}, "threshold"),
    ({"threshold": -0.1}, "threshold"),
    ({"threshold": float("nan")}, "threshold"),
    ({"threshold": "often"}, "threshold"),
    ({"threshold": 1.0}, "threshold"),  # straight-lining above 1: impossible
    ({"metric": "control_accuracy", "threshold": 0.0}, "threshold"),  # control accuracy below 0: impossible
    ({"min_labels": 0}, "min_labels"),
    ({"min_labels": -3}, "min_labels"),
    ({"min_labels": MAX_MIN_LABELS + 1}, "min_labels"),
    ({"min_labels": 2.5}, "min_labels"),
    ({"metric": "speed"}, "metric"),
    ({"action": "delete"}, "action"),
]


def row_counts() -> dict[str, int]:
    return {
        model._meta.label: model._default_manager.count()
        for model in apps.get_models()
        if model._meta.app_label != "sessions"
    }


@pytest.fixture
def campaign(make_campaign):
    return make_campaign(4)


@pytest.fixture
def colleague(campaign, make_user):
    user = make_user("colleague")
    campaign.collaborators.add(user)
    return user


def api(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def rules_url(campaign) -> str:
    return f"/api/v1/campaigns/{campaign.slug}/quality-rules/"


# ---------------------------------------------------------------------------------- the service
def test_a_rule_is_created_active_and_deactivated_once(campaign, researcher):
    rule = rule_create(campaign=campaign, by=researcher, **GOOD)
    assert (rule.metric, rule.threshold, rule.min_labels, rule.action, rule.active) == (
        "straight_lining",
        0.9,
        20,
        "block",
        True,
    )
    assert rule.created_by == researcher and str(rule) == (
        "Straight-lining (share of the most frequent answer) above 0.9 after 20: Block from the campaign"
    )
    assert rule_deactivate(rule=rule).active is False
    assert rule_deactivate(rule=rule).active is False  # idempotent
    assert QualityRule.objects.get().active is False


@pytest.mark.parametrize("change, field", BAD)
def test_the_service_refuses_a_bad_rule_naming_the_field(campaign, researcher, change, field):
    with pytest.raises(ValidationError) as refused:
        rule_create(campaign=campaign, by=researcher, **{**GOOD, **change})
    assert list(refused.value.message_dict) == [field]
    assert not QualityRule.objects.exists()


def test_the_edges_of_the_range_that_can_fire_are_accepted(campaign, researcher):
    rule_create(campaign=campaign, by=researcher, **{**GOOD, "threshold": 0, "min_labels": 1})
    rule_create(
        campaign=campaign,
        by=researcher,
        **{**GOOD, "metric": "control_accuracy", "threshold": 1, "min_labels": MAX_MIN_LABELS, "action": "recollect"},
    )
    assert QualityRule.objects.count() == 2


# ---------------------------------------------------------------------------------- the API
def test_managers_list_add_and_deactivate_rules_through_the_api(campaign, researcher, colleague, make_user):
    staff = make_user("staff", is_staff=True)
    response = api(researcher).post(rules_url(campaign), GOOD, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert {k: body[k] for k in GOOD} == GOOD and body["active"] is True and body["created_by"] == "researcher"
    added = api(colleague).post(
        rules_url(campaign),
        {**GOOD, "metric": "control_accuracy", "threshold": 0.6, "min_labels": 10, "action": "flag"},
        format="json",
    )
    assert added.status_code == 201 and added.json()["created_by"] == "colleague"
    for user in (researcher, colleague, staff):
        assert [r["id"] for r in api(user).get(rules_url(campaign)).json()] == [body["id"], added.json()["id"]]
    deactivate = f"{rules_url(campaign)}{body['id']}/deactivate/"
    for _ in range(2):  # idempotent
        response = api(staff).post(deactivate)
        assert response.status_code == 200 and response.json()["active"] is False
    assert list(QualityRule.objects.order_by("pk").values_list("active", flat=True)) == [False, True]


@pytest.mark.parametrize("change, field", BAD[:2] + BAD[3:])  # JSON has no NaN: below
def test_the_api_refuses_a_bad_rule_with_400_naming_the_field(campaign, researcher, change, field):
    before = row_counts()
    error = assert_error(api(researcher).post(rules_url(campaign), {**GOOD, **change}, format="json"), 400, "invalid")
    assert list(error["fields"]) == [field], error
    assert row_counts() == before


def test_the_api_refuses_a_missing_field_and_a_nan_threshold(campaign, researcher):
    before = row_counts()
    client = api(researcher)
    error = assert_error(
        client.post(rules_url(campaign), {k: v for k, v in GOOD.items() if k != "action"}, format="json"),
        400,
        "invalid",
    )
    assert list(error["fields"]) == ["action"]
    body = '{"metric": "straight_lining", "threshold": NaN, "min_labels": 5, "action": "flag"}'
    # NaN is not JSON: the parser refuses the body before any field is read
    assert_error(client.post(rules_url(campaign), body, content_type="application/json"), 400, "parse_error")
    assert row_counts() == before


def test_nobody_else_reaches_the_rules(campaign, researcher, make_user, make_worker, make_campaign):
    rule = rule_create(campaign=campaign, by=researcher, **GOOD)
    worker = make_worker()
    for user in (make_user("stranger"), worker.user):
        client = api(user)
        assert_error(client.get(rules_url(campaign)), 404, "not_found")
        assert_error(client.post(rules_url(campaign), GOOD, format="json"), 404, "not_found")
        assert_error(client.post(f"{rules_url(campaign)}{rule.pk}/deactivate/"), 404, "not_found")
    assert_error(api().get(rules_url(campaign)), 401, "not_authenticated")
    # a rule of another campaign is not found through this one
    other = rule_create(campaign=make_campaign(2, title="Another campaign"), by=researcher, **GOOD)
    assert_error(api(researcher).post(f"{rules_url(campaign)}{other.pk}/deactivate/"), 404, "not_found")
    assert QualityRule.objects.filter(active=True).count() == 2


# ---------------------------------------------------------------------------------- the campaign page
def test_the_campaign_page_lists_adds_and_deactivates_rules(campaign, researcher_client):
    page = researcher_client.get(reverse("campaign_detail", args=[campaign.slug]))
    assert b'id="quality-rules"' in page.content and b"No rules yet" in page.content
    response = researcher_client.post(reverse("quality_rule_add", args=[campaign.slug]), GOOD, follow=True)
    rule = QualityRule.objects.get()
    assert response.redirect_chain[-1][0].endswith("#quality-rules")
    assert messages_of(response) == [f"Rule added: {rule}. The live audit applies it from its next run."]
    text = " ".join(response.content.decode().split())
    assert (
        "When one answer's share is above 0.90 after at least 20 labels: <strong>block from the campaign</strong>."
        in text
    )
    response = researcher_client.post(reverse("quality_rule_deactivate", args=[campaign.slug, rule.pk]), follow=True)
    assert messages_of(response) == [f"Rule deactivated: {rule}. The actions it took stay in the log."]
    assert "Deactivated." in response.content.decode()
    assert QualityRule.objects.get().active is False


@pytest.mark.parametrize(
    "change, field", [c for c in BAD if c[1] in ("threshold", "min_labels") and c[0] != {"min_labels": 2.5}]
)
def test_the_page_refuses_a_bad_rule_with_400_and_says_which_field(campaign, researcher_client, change, field):
    before = row_counts()
    response = researcher_client.post(reverse("quality_rule_add", args=[campaign.slug]), {**GOOD, **change})
    assert response.status_code == 400
    form = response.context["rule_form"]
    assert list(form.errors) == [field], form.errors
    assert "The rule was not added" in response.content.decode()
    assert row_counts() == before


def test_strangers_get_404_from_the_rule_pages(campaign, researcher, make_user):
    rule = rule_create(campaign=campaign, by=researcher, **GOOD)
    stranger = signed_in(make_user("stranger"))
    assert stranger.post(reverse("quality_rule_add", args=[campaign.slug]), GOOD).status_code == 404
    assert stranger.post(reverse("quality_rule_deactivate", args=[campaign.slug, rule.pk])).status_code == 404
    assert QualityRule.objects.filter(active=True).count() == 1


# ---------------------------------------------------------------------------------- a seeded crowd
# Each test below runs the live audit's quick run after every label, as Celery does a few labels
# apart, so a rule acts at the exact label (or control) at which its condition first holds.


@dataclass(frozen=True)
class Kind:
    name: str
    accuracy: float  # probability that an answer is the gold one
    pause: tuple[float, float]  # seconds on a prompt (uniform)
    always: int | None = None  # always this answer (straight-lining)


HONEST = Kind("honest", 0.95, (3.0, 9.0))
ALWAYS_ONE = Kind("always-one", 0.0, (2.0, 5.0), always=1)
RANDOM = Kind("random", 0.5, (2.0, 6.0))
TOO_FAST = Kind("too-fast", 0.5, (0.3, 0.8))  # random answers, and no time to read


@dataclass
class Record:
    """What a simulated worker did: per label, whether it was a control, whether it was right, the value."""

    worker: object
    kind: Kind
    answers: list = field(default_factory=list)  # (is control, correct, value)

    def counts(self, upto: int) -> tuple[int, int, int, float | None]:
        """``(labels, controls, correct controls, the most frequent label value's share)`` over the
        first ``upto`` answers (labels: those of prompts that are not controls)."""
        first = self.answers[:upto]
        controls = [correct for control, correct, _ in first if control]
        values = [value for control, _, value in first if not control]
        share = max(values.count(1), values.count(0)) / len(values) if values else None
        return len(values), len(controls), sum(controls), share


def run_crowd(campaign, crowd: list[Kind], *, seed: int) -> list[Record]:
    """Label the campaign to the end through the services, one label at a time in a seeded order, the
    quick audit (and so the rules) after each label. A worker leaves when lease_acquire has nothing
    for them (a blocked worker has nothing)."""
    from tests.helpers import sim_worker

    rng = random.Random(seed)
    gold = dict(Prompt.objects.filter(campaign=campaign).values_list("pk", "gold"))
    records = [Record(sim_worker(kind.name), kind) for kind in crowd]
    saved = random.getstate()
    random.seed(seed)  # the assignment engine's draws (which slot, whether a control is due)
    try:
        with paced() as clock:
            active = list(records)
            while active:
                record = rng.choice(active)
                lease = services.lease_acquire(campaign=campaign, worker=record.worker)
                if not isinstance(lease, Lease):
                    active.remove(record)
                    continue
                clock.advance(rng.uniform(*record.kind.pause))
                truth = gold[lease.prompt_id]
                if record.kind.always is not None:
                    value = record.kind.always
                else:
                    value = truth if rng.random() < record.kind.accuracy else 1 - truth
                services.label_submit(lease_id=lease.pk, worker=record.worker, value=value, client_token=f"c{lease.pk}")
                record.answers.append((lease.prompt.is_control, value == truth, value))
                clock.advance(rng.uniform(0.1, 1.0))
                audit_services.audit_refresh(campaign_id=campaign.pk)
    finally:
        random.setstate(saved)
    return records


def crowd_campaign(make_campaign, *, n_prompts: int = 120, n_controls: int = 40):
    """A live binary campaign (k = 3) of ``n_prompts`` prompts and ``n_controls`` controls with gold,
    serving each worker 4 controls first and then one prompt in four as a control."""
    campaign = services.campaign_update(
        campaign=make_campaign(0, k=3, launch=False), control_rate=0.25, control_first=4
    )
    rows = [{"id": f"p{i}", "text": f"Statement {i}.", "gold": i % 2} for i in range(n_prompts)]
    rows += [{"id": f"c{i}", "text": f"Control {i}.", "gold": i % 2} for i in range(n_controls)]
    saved = random.getstate()
    random.seed(n_prompts)  # the slots' random keys decide who gets which prompt: seeded, as run_crowd's draws
    try:
        services.prompts_import(campaign=campaign, data=jsonl(*rows), filename="crowd.jsonl")
        prompts_control_set(campaign=campaign, external_ids=[f"c{i}" for i in range(n_controls)])
    finally:
        random.setstate(saved)
    return services.campaign_transition(campaign=campaign, action="launch")


def first_reaching(record: Record, condition) -> int | None:
    """The number of answers after which ``condition(labels, controls, correct, share)`` first holds."""
    for upto in range(1, len(record.answers) + 1):
        if condition(*record.counts(upto)):
            return upto
    return None


@pytest.mark.both_dbs
def test_rules_flag_and_block_the_spammers_at_the_stated_count_and_no_honest_worker(make_campaign, researcher):
    campaign = crowd_campaign(make_campaign)
    flag = rule_create(
        campaign=campaign, by=researcher, metric="straight_lining", threshold=0.95, min_labels=10, action="flag"
    )
    block = rule_create(
        campaign=campaign, by=researcher, metric="straight_lining", threshold=0.9, min_labels=20, action="block"
    )
    recollect = rule_create(
        campaign=campaign, by=researcher, metric="control_accuracy", threshold=0.6, min_labels=10, action="recollect"
    )
    crowd = [HONEST] * 6 + [ALWAYS_ONE, RANDOM, TOO_FAST]
    records = run_crowd(campaign, crowd, seed=13)
    by_kind = {}
    for record in records:
        by_kind.setdefault(record.kind.name, []).append(record)
    actions = {(a.worker_id, a.rule_id): a for a in WorkerAction.objects.filter(campaign=campaign)}

    # Each rule acts at the first label after which its condition holds, at or past its count.
    conditions = {
        rule: (lambda labels, controls, correct, share, rule=rule: labels >= rule.min_labels and share > rule.threshold)
        for rule in (flag, block)
    }
    conditions[recollect] = lambda labels, controls, correct, share: controls >= 10 and correct / controls < 0.6
    for record in by_kind["always-one"] + by_kind["random"] + by_kind["too-fast"]:
        due = {rule: first_reaching(record, condition) for rule, condition in conditions.items()}
        stops = [at for rule, at in due.items() if at is not None and rule != flag]
        # it gave no label after the first block or re-collection: lease_acquire had nothing for it
        assert stops and min(stops) == len(record.answers), (record.kind, due, record.answers)
        for rule, at in due.items():
            action = actions.get((record.worker.pk, rule.pk))
            if at is None or at > len(record.answers):
                assert action is None, (record.kind, rule, action)
                continue
            labels, controls, correct, _ = record.counts(at)
            assert action is not None and action.by is None and action.kind == rule.action, (record.kind, rule)
            assert action.numbers["rule_count"] == (controls if rule == recollect else labels)
            assert (action.numbers["n_labels"], action.numbers["n_controls"]) == (labels, controls)
    # In this seeded run: "always one" is flagged at its 10th label and blocked at its 20th, in words;
    # the two who answer at random are caught by the controls and their labels freed for others.
    [always] = by_kind["always-one"]
    assert (
        actions[(always.worker.pk, flag.pk)].reason == "answers 1 (True) to 100 % of 10 labels, above the rule's 95 %"
    )
    assert (
        actions[(always.worker.pk, block.pk)].reason == "answers 1 (True) to 100 % of 20 labels, above the rule's 90 %"
    )
    assert (always.worker.pk, recollect.pk) not in actions
    assert Participation.objects.get(campaign=campaign, worker=always.worker).blocked_at is not None
    for record in by_kind["random"] + by_kind["too-fast"]:
        action = actions[(record.worker.pk, recollect.pk)]
        labels, controls, correct, _ = record.counts(len(record.answers))
        assert action.reason == (
            f"control accuracy {correct / controls:.2f} [{action.numbers['control_ci'][0]:.2f}, "
            f"{action.numbers['control_ci'][1]:.2f}] after {controls} controls, below the rule's 0.60"
        )
        participation = Participation.objects.get(campaign=campaign, worker=record.worker)
        assert participation.blocked_at is not None and participation.excluded_at is not None
        assert not Label.objects.counted().filter(campaign=campaign, worker=record.worker, is_control=False).exists()

    # Nobody honest was acted on, and the campaign still ends with exactly k labels per prompt.
    honest = {record.worker.pk for record in by_kind["honest"]}
    assert not WorkerAction.objects.filter(worker_id__in=honest).exists()
    assert not Participation.objects.filter(worker_id__in=honest).exclude(blocked_at=None, excluded_at=None).exists()
    assert invariant_violations(campaign=campaign, complete=True) == []

    # The workers table says it in words: the fast one is too fast, the spammers' numbers show why.
    rows = {row["worker"]: row for row in selectors.dashboard_data(campaign=campaign)["workers"]}
    [fast] = by_kind["too-fast"]
    fast_row = rows[fast.worker.public_id]
    speed = [f for f in fast_row["flags"] if f["kind"] == "too_fast"]
    assert len(speed) == 1 and speed[0]["text"].startswith("too fast: median 0.")
    assert fast_row["speed_ratio"] < 0.25
    for record in by_kind["random"] + by_kind["too-fast"]:  # re-collected: excluded, and listed as such
        assert rows[record.worker.public_id]["excluded"] is True
        assert rows[record.worker.public_id]["flags"][-1]["text"] == (
            "excluded from the audit: their labels enter none of its numbers"
        )
    always_row = rows[always.worker.public_id]
    assert always_row["bias"] > 0.2 and always_row["bias_ci"][0] > 0 and always_row["top_share"] == 1.0
    for pk in honest:
        row = rows[Worker.objects.get(pk=pk).public_id]
        assert not any(f["kind"] in ("too_fast", "control_accuracy") for f in row["flags"]), row
        # a lean of their own, if any, is small beside the spammer's (who is among their "others")
        assert row["control_accuracy"] >= 0.6 and abs(row["bias"]) < 0.15, row


@pytest.mark.both_dbs
def test_an_undone_action_waits_for_as_many_new_labels_as_the_rule_asks(make_campaign, researcher, make_user):
    from annotation.services.quality import action_undo

    campaign = make_campaign(80, k=1)
    block = rule_create(
        campaign=campaign, by=researcher, metric="straight_lining", threshold=0.9, min_labels=5, action="block"
    )
    [record] = run_crowd(campaign, [ALWAYS_ONE], seed=3)
    assert record.counts(len(record.answers))[0] == 5  # blocked at 5: lease_acquire had nothing more
    [first] = WorkerAction.objects.filter(rule=block)
    action_undo(action=first, by=researcher)
    # Unblocked: the same numbers do not block again, nor 4 labels more; the 5th does.
    audit_services.audit_refresh(campaign_id=campaign.pk)
    assert WorkerAction.objects.filter(rule=block, undone_at=None).count() == 0
    records = run_crowd_more(campaign, record, n=4)
    assert records == 4 and WorkerAction.objects.filter(rule=block, undone_at=None).count() == 0
    assert run_crowd_more(campaign, record, n=5) == 1  # blocked again after its first label
    [again] = WorkerAction.objects.filter(rule=block, undone_at=None)
    assert again.pk != first.pk and again.numbers["rule_count"] == 10


def run_crowd_more(campaign, record: Record, *, n: int) -> int:
    """Up to ``n`` more labels of ``record``'s worker, the quick audit after each; returns how many it gave."""
    given = 0
    for _ in range(n):
        lease = services.lease_acquire(campaign=campaign, worker=record.worker)
        if not isinstance(lease, Lease):
            break
        services.label_submit(lease_id=lease.pk, worker=record.worker, value=1, client_token=f"m{lease.pk}")
        given += 1
        audit_services.audit_refresh(campaign_id=campaign.pk)
    return given


def test_a_rule_waits_for_its_count_and_a_deactivated_rule_does_nothing(make_campaign, researcher):
    campaign = make_campaign(40, k=1)
    waiting = rule_create(
        campaign=campaign, by=researcher, metric="straight_lining", threshold=0.5, min_labels=8, action="flag"
    )
    off = rule_create(
        campaign=campaign, by=researcher, metric="straight_lining", threshold=0.5, min_labels=1, action="block"
    )
    rule_deactivate(rule=off)
    [record] = run_crowd(campaign, [ALWAYS_ONE], seed=5)
    [flagged] = WorkerAction.objects.all()
    assert flagged.rule == waiting and flagged.kind == "flag" and flagged.numbers["rule_count"] == 8
    assert record.counts(len(record.answers))[0] == 40  # flag only: it went on to the end
    audit_services.audit_refresh(campaign_id=campaign.pk)  # the same numbers again: nothing new
    assert WorkerAction.objects.count() == 1
