"""Retiring prompts after launch (issue 21): a prompt without counted labels can be retired and brought
back; a retired prompt is never served again (normal or control, a lease held before included), is owed
no labels (progress, the invariants), and the prompts list shows it. Also the prompts list's filters,
sorting and agreement."""

import random
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.core.exceptions import ValidationError
from django.db import OperationalError, connection

from annotation import selectors, services
from annotation.models import Activity, Campaign, Lease, Prompt, Slot
from annotation.selectors import campaign_progress, invariant_violations, worker_outlook
from annotation.services import prompts_retired_set
from tests.annotation.test_controls import add_controls, serve
from tests.helpers import jsonl, label_all, label_one, sim_worker

pytestmark = [pytest.mark.django_db, pytest.mark.both_dbs]


def prompt(campaign, external_id: str) -> Prompt:
    return Prompt.objects.get(campaign=campaign, external_id=external_id)


def retire(campaign, *external_ids, retired: bool = True):
    ids = [prompt(campaign, e).pk for e in external_ids]
    return prompts_retired_set(campaign=campaign, prompt_ids=ids, retired=retired)


def test_a_retired_prompt_is_never_served_and_owed_nothing(make_campaign):
    campaign = make_campaign(3, k=2)
    result = retire(campaign, "p1")
    assert result.changed == [prompt(campaign, "p1").pk] and result.unchanged == []
    assert not Slot.objects.filter(prompt__external_id="p1", filled=False).exists()
    served = set()
    for _ in range(4):
        worker = sim_worker()
        label_all(campaign, worker)
        served |= set(Lease.objects.filter(worker=worker).values_list("prompt__external_id", flat=True))
    assert served == {"p0", "p2"}
    progress = campaign_progress(campaign=campaign)
    assert (progress.n_prompts, progress.labels_wanted, progress.prompts_complete) == (2, 4, 2)
    # "full", not "busy" or open: the retired prompt's slots are not waiting for anyone.
    assert worker_outlook(campaign=campaign, worker=sim_worker()).code == "full"
    assert invariant_violations(campaign=campaign, complete=True) == []
    entry = Activity.objects.get(campaign=campaign, verb="prompts.retired")
    assert entry.detail == {"n_prompts": 1, "external_ids": ["p1"]}


def test_bringing_it_back_serves_it_again(make_campaign):
    campaign = make_campaign(2, k=1)
    retire(campaign, "p0")
    assert retire(campaign, "p0").unchanged == [prompt(campaign, "p0").pk]  # idempotent
    label_all(campaign, sim_worker())
    assert prompt(campaign, "p0").n_labels == 0
    assert retire(campaign, "p0", retired=False).changed == [prompt(campaign, "p0").pk]
    assert prompt(campaign, "p0").retired_at is None
    label_all(campaign, sim_worker())
    assert prompt(campaign, "p0").n_labels == 1
    assert invariant_violations(campaign=campaign, complete=True) == []
    assert Activity.objects.filter(campaign=campaign, verb="prompts.unretired", detail__n_prompts=1).exists()


def test_labeled_and_unknown_prompts_are_refused_all_or_nothing(make_campaign):
    campaign = make_campaign(3, k=2)
    other = make_campaign(1)
    label = label_one(campaign, sim_worker())
    labeled = label.prompt
    free = Prompt.objects.filter(campaign=campaign).exclude(pk=labeled.pk).first()
    stranger = Prompt.objects.get(campaign=other)
    with pytest.raises(ValidationError) as refused:
        prompts_retired_set(campaign=campaign, prompt_ids=[free.pk, labeled.pk, stranger.pk])
    errors = refused.value.message_dict["prompts"]
    assert len(errors) == 2
    assert f"{labeled.pk} ({labeled.external_id!r}) has 1 counted label" in errors[0]
    assert f"{stranger.pk} is not a prompt of this campaign" in errors[1]
    assert not Prompt.objects.filter(retired_at__isnull=False).exists()
    assert not Activity.objects.filter(verb="prompts.retired").exists()


def test_a_prompt_whose_labels_are_all_void_can_be_retired(make_campaign):
    campaign = make_campaign(1, k=2)
    label = label_one(campaign, sim_worker())
    services.label_void(label_id=label.pk, reason="returned")
    retire(campaign, "p0")
    assert invariant_violations(campaign=campaign) == []


@pytest.mark.parametrize("status", ["draft", "closed"])
def test_drafts_and_closed_campaigns_refuse(make_campaign, status):
    campaign = make_campaign(1, launch=status != "draft")
    if status == "closed":
        campaign = services.campaign_transition(campaign=campaign, action="close")
    with pytest.raises(services.CampaignStateError) as refused:
        retire(campaign, "p0")
    assert refused.value.code == ("not_launched" if status == "draft" else "campaign_closed")
    assert prompt(campaign, "p0").retired_at is None


def test_a_lease_held_when_the_prompt_is_retired_is_passed_over_and_its_label_refused(make_campaign):
    campaign = make_campaign(2, k=1)
    worker = sim_worker()
    lease = services.lease_acquire(campaign=campaign, worker=worker)
    prompts_retired_set(campaign=campaign, prompt_ids=[lease.prompt_id])
    with pytest.raises(services.LabelRefused) as refused:
        services.label_submit(lease_id=lease.pk, worker=worker, value=1, client_token="t")
    assert refused.value.code == "prompt_retired"
    with pytest.raises(services.LeaseRefused):
        services.lease_heartbeat(lease_id=lease.pk, worker=worker)
    again = services.lease_acquire(campaign=campaign, worker=worker)
    assert isinstance(again, Lease) and again.pk != lease.pk and again.prompt_id != lease.prompt_id
    assert Prompt.objects.get(pk=lease.prompt_id).n_labels == 0
    assert invariant_violations(campaign=campaign) == []


def test_a_retired_control_is_never_drawn(make_campaign):
    campaign = serve(make_campaign(4, k=1), control_first=2)
    c0, c1 = add_controls(campaign, 2)
    prompts_retired_set(campaign=campaign, prompt_ids=[c0.pk])
    worker = sim_worker()
    label_all(campaign, worker)
    served = set(Lease.objects.filter(worker=worker).values_list("prompt__external_id", flat=True))
    assert "c1" in served and "c0" not in served
    # Unmarking a retired control gives it slots that stay closed.
    services.controls.prompts_control_set(campaign=campaign, external_ids=["c0"], control=False)
    assert Slot.objects.filter(prompt=c0).count() == 1 and not Slot.objects.filter(prompt=c0, filled=False).exists()
    assert invariant_violations(campaign=campaign) == []


def test_adaptive_k_progress_leaves_retired_prompts_out(make_campaign):
    campaign = make_campaign(3, k=2, k_max=4, stop_confidence=0.7)
    retire(campaign, "p2")
    progress = campaign_progress(campaign=campaign)
    assert (progress.n_prompts, progress.labels_wanted) == (2, 4)
    plan = selectors.campaign_stop_plan(campaign=campaign)
    assert plan.n_prompts == 2


def test_the_invariants_catch_an_open_slot_or_a_label_on_a_retired_prompt(make_campaign):
    campaign = make_campaign(2, k=1)
    label_one(campaign, sim_worker())
    labeled = Prompt.objects.get(campaign=campaign, n_labels=1)
    Prompt.objects.filter(campaign=campaign).update(retired_at=labeled.campaign.created_at)
    violations = invariant_violations(campaign=campaign)
    assert any("retired prompt" in v and "has 1 counted labels" in v for v in violations), violations
    assert any("of retired prompt" in v and "is open" in v for v in violations), violations


# --- the prompts list ---------------------------------------------------------------------------------


@pytest.fixture
def listed(make_campaign):
    """p0 agreed (1, 1), p1 contested (1, 0), p2 retired, p3 with one label; groups a (p0, p1) and b."""
    campaign = make_campaign(0, launch=False, k=2)
    rows = [{"id": f"p{i}", "text": f"Statement {i}", "gold": 1, "group": "a" if i < 2 else "b"} for i in range(4)]
    rows[1]["text"] = "The zebra is striped"
    services.prompts_import(campaign=campaign, data=jsonl(*rows), filename="p.jsonl")
    campaign = services.campaign_transition(campaign=campaign, action="launch")
    retire(campaign, "p2")
    values = {"p0": [1, 1], "p1": [1, 0], "p3": [1]}
    for external_id, answers in values.items():
        for value in answers:
            worker = sim_worker()
            _label_prompt(campaign, worker, prompt(campaign, external_id), value)
    return campaign


def _label_prompt(campaign: Campaign, worker, target: Prompt, value) -> None:
    """``worker`` labels ``target``: the others are leased to them and given back until it comes."""
    while True:
        lease = services.lease_acquire(campaign=campaign, worker=worker)
        assert isinstance(lease, Lease), lease
        if lease.prompt_id == target.pk:
            services.label_submit(lease_id=lease.pk, worker=worker, value=value, client_token=f"t{lease.pk}")
            return
        services.lease_release(lease_id=lease.pk, worker=worker)


def ids(prompts) -> list[str]:
    return [p.external_id for p in prompts]


def test_the_list_filters(listed):
    def find(**filters):
        return ids(selectors.campaign_prompts(campaign=listed, **filters))

    assert find() == ["p0", "p1", "p2", "p3"]
    assert find(search="ZEBRA") == ["p1"] and find(search="p3") == ["p3"]
    assert find(group="a") == ["p0", "p1"] and find(group="c") == []
    assert find(retired=True) == ["p2"] and find(retired=False) == ["p0", "p1", "p3"]
    assert find(complete=True) == ["p0", "p1"] and find(complete=False) == ["p2", "p3"]
    assert find(contested=True) == ["p1"] and find(contested=False) == ["p0", "p2", "p3"]
    assert find(group="b", complete=False, retired=False) == ["p3"]


def test_the_list_agreement_and_sorting(listed):
    rows = {p.external_id: p for p in selectors.campaign_prompts(campaign=listed)}
    assert [rows[e].agreement for e in ("p0", "p1", "p2", "p3")] == [1.0, 0.5, None, 1.0]
    assert [rows[e].labels_wanted for e in ("p0", "p2")] == [2, 2]
    assert [selectors.prompt_status(rows[e]) for e in ("p0", "p2", "p3")] == ["complete", "retired", "open"]
    assert ids(selectors.campaign_prompts(campaign=listed, order="agreement")) == ["p1", "p0", "p3", "p2"]
    assert ids(selectors.campaign_prompts(campaign=listed, order="-agreement")) == ["p0", "p3", "p1", "p2"]
    assert ids(selectors.campaign_prompts(campaign=listed, order="-labels")) == ["p0", "p1", "p3", "p2"]
    assert selectors.prompt_groups(campaign=listed) == ["a", "b"]


def test_a_prompt_with_its_labels_void_ones_included(listed):
    contested = prompt(listed, "p1")
    labels = list(selectors.prompt_labels(prompt=contested))
    services.label_void(label_id=labels[0].pk, reason="returned")
    shown = selectors.campaign_prompt(campaign=listed, prompt_id=contested.pk)
    assert (shown.n_labels, shown.agreement) == (1, 1.0)
    labels = list(selectors.prompt_labels(prompt=contested))
    assert [label.voided_at is not None for label in labels] == [True, False]


# --- concurrency ------------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_retiring_while_workers_label_keeps_every_guarantee(make_campaign):
    """Threads with their own connections label, abandon, skip, double-click, void and heartbeat while
    another retires prompts without labels and brings some back: no retired prompt ever ends with a
    counted label, exactly-k and never-twice hold, and a drain fills every prompt still in the campaign."""
    from tests.annotation import test_concurrency
    from tests.annotation.test_concurrency import (
        assert_acks_match_labels,
        assert_guarantees,
        crowd,
        drain,
        merge,
        run_clients,
    )

    campaign = make_campaign(60, k=3)
    Campaign.objects.filter(pk=campaign.pk).update(lease_seconds=test_concurrency.LEASE_SECONDS)
    n_clients, per_client = 5, 2
    workers = crowd(n_clients * per_client)
    everyone = [w.pk for w in workers]
    specs = [
        dict(
            campaign_ids=[campaign.pk],
            own_worker_ids=everyone[i * per_client : (i + 1) * per_client],
            all_worker_ids=everyone,
            seed=300 + i,
        )
        for i in range(n_clients)
    ]
    outcome = {"retired": 0, "refused": 0}

    def retirer():
        rng = random.Random(7)
        try:
            for _ in range(40):
                unlabeled = list(Prompt.objects.filter(campaign=campaign, n_labels=0).values_list("pk", flat=True))
                if not unlabeled:
                    break
                chosen = rng.sample(unlabeled, min(2, len(unlabeled)))
                try:
                    outcome["retired"] += len(prompts_retired_set(campaign=campaign, prompt_ids=chosen).changed)
                except ValidationError:  # a label won the race: all or nothing, so nothing changed
                    outcome["refused"] += 1
                except OperationalError as exc:  # SQLite's busy timeout, as the clients count it
                    assert test_concurrency.sqlite_gave_up_waiting(exc), exc
                if rng.random() < 0.3:
                    retired = list(
                        Prompt.objects.filter(campaign=campaign, retired_at__isnull=False).values_list("pk", flat=True)
                    )
                    if retired:
                        prompts_retired_set(campaign=campaign, prompt_ids=[rng.choice(retired)], retired=False)
                time.sleep(0.01)
        finally:
            connection.close()

    with ThreadPoolExecutor(1) as pool:
        retiring = pool.submit(retirer)
        acks, errors, counts = merge(run_clients(specs, cycles=60))
        retiring.result()
    assert errors == []
    assert outcome["retired"] > 0
    assert_guarantees(campaign, complete=False)
    acks += drain(campaign, workers)
    assert_guarantees(campaign, complete=True)
    assert_acks_match_labels(acks)
    retired = Prompt.objects.filter(campaign=campaign, retired_at__isnull=False)
    assert retired.exists() and not retired.exclude(n_labels=0).exists()
