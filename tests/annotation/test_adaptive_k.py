"""Adaptive k (issue 12): a prompt gets one more slot at a time until the posterior probability that its
majority is the crowd's reaches the campaign's target, or until k_max (``annotation.services.adaptive``).

The posterior is checked against scipy's regularised incomplete beta, the planner's dynamic programming
against an enumeration of every label sequence, the live rule (through lease_acquire / label_submit)
against the benchmark's replay of the study's ComVE crowd, and the guarantees (each prompt's slot count
is its own final k, between k and k_max, and the logged decisions explain it) under threads hammering
growing prompts, on SQLite and PostgreSQL.
"""

import csv
import doctest
import importlib.util
import io
import itertools
import json
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from rest_framework.test import APIClient
from scipy import special

from annotation import services
from annotation.channels.pricing import mturk_cost_preview
from annotation.channels.selectors import labels_still_needed
from annotation.exporting import export_chunks
from annotation.forms import CampaignForm
from annotation.models import Campaign, Lease, Prompt, Slot, StopDecision
from annotation.selectors import campaign_progress, campaign_stop_plan, invariant_violations
from annotation.services.adaptive import (
    COMVE_VOTES_OF_FIVE,
    Outcome,
    final_k_distribution,
    stop_plan,
    stop_posterior,
    stop_rule,
    stop_thresholds,
)
from audits.engine.matrix import LabelMatrix
from audits.engine.partitions import partitions_by_k
from audits.engine.report import full_report
from tests.annotation.test_concurrency import (
    ACTIONS,
    LEASE_SECONDS,
    assert_acks_match_labels,
    assert_guarantees,
    crowd,
    describe,
    drain,
    merge,
    run_clients,
)
from tests.helpers import BINARIZATION, assert_error, campaign_fields, jsonl, label_one

REPO = Path(__file__).resolve().parents[2]


def adaptive(make_campaign, n_prompts=1, **fields):
    """A live binary campaign with adaptive k: k = 3 to k_max = 5, stop at 0.95 unless told otherwise."""
    fields = {"k": 3, "k_max": 5, "stop_confidence": 0.95, **fields}
    return make_campaign(n_prompts, **fields)


def decisions(prompt) -> list[tuple]:
    return list(
        StopDecision.objects.filter(prompt=prompt).order_by("n_labels").values_list("n_labels", "n_positive", "outcome")
    )


def n_slots(prompt) -> int:
    return Slot.objects.filter(prompt=prompt).count()


# --- the posterior and the rule (no database) ----------------------------------------------------------


def test_the_posterior_is_the_regularised_incomplete_beta():
    """1 − I_½(s + 1, n − s + 1) when 1 is the majority, I_½(s + 1, n − s + 1) when 0 is, ½ on a tie."""
    for n in range(0, 61):
        for s in range(n + 1):
            tail = special.betainc(s + 1, n - s + 1, 0.5)
            expected = 0.5 if 2 * s == n else (1 - tail if 2 * s > n else tail)
            assert stop_posterior(s, n) == pytest.approx(expected, abs=1e-12), (s, n)


def test_the_posterior_of_worked_cases():
    assert stop_posterior(0, 0) == 0.5
    assert stop_posterior(3, 3) == stop_posterior(0, 3) == 0.9375
    assert stop_posterior(4, 4) == 0.96875
    assert stop_posterior(2, 3) == 11 / 16
    assert stop_posterior(3, 6) == 0.5


def test_the_docstring_examples_hold():
    from annotation import adaptive as module

    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert (result.failed, result.attempted > 0) == (0, True)


@pytest.mark.parametrize(
    "args, message",
    [
        ((-1, 3), "n_positive: expected a whole number >= 0, got -1"),
        ((1, 2.0), "n_labels: expected a whole number >= 0, got 2.0"),
        ((True, 3), "n_positive: expected a whole number >= 0, got True"),
        ((4, 3), "n_positive: expected at most n_labels = 3, got 4"),
    ],
)
def test_the_posterior_refuses_impossible_counts_naming_them(args, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        stop_posterior(*args)


@pytest.mark.parametrize(
    "s, n, k, k_max, confidence, outcome",
    [
        (3, 3, 3, 5, 0.95, Outcome.EXTEND),  # 0.9375 < 0.95: unanimous 3 is not enough at 0.95
        (0, 3, 3, 5, 0.9, Outcome.STOP),  # unanimous 0s settle the majority as well
        (4, 4, 3, 5, 0.95, Outcome.STOP),
        (5, 5, 3, 5, 0.95, Outcome.STOP),  # the rule is met at k_max: "stop", not "at max"
        (3, 5, 3, 5, 0.95, Outcome.AT_MAX),
        (2, 3, 2, 4, 0.5, Outcome.STOP),
        (1, 2, 2, 4, 0.5, Outcome.EXTEND),  # a tie never stops before k_max, even at 0.5
        (2, 4, 2, 4, 0.5, Outcome.AT_MAX),
        (1, 1, 2, 4, 0.5, Outcome.EXTEND),  # below k (the planner walks there; a live prompt has k slots)
    ],
)
def test_the_rule(s, n, k, k_max, confidence, outcome):
    assert stop_rule(s, n, k=k, k_max=k_max, stop_confidence=confidence) == (outcome, stop_posterior(s, n))


def test_the_rule_as_a_table():
    assert stop_thresholds(k=3, k_max=5, stop_confidence=0.95) == [(3, None), (4, 4), (5, 5)]
    assert stop_thresholds(k=3, k_max=7, stop_confidence=0.9) == [(3, 3), (4, 4), (5, 5), (6, 5), (7, 6)]
    assert stop_thresholds(k=2, k_max=3, stop_confidence=0.5) == [(2, 2), (3, 2)]


# --- the planner (no database) ------------------------------------------------------------------------


def enumerated(*, k, k_max, stop_confidence, prior):
    """P(final k = n) by walking every sequence of k_max labels: the Pólya urn's probability of the
    sequence (Beta-binomial), summed where the rule first stops on its prefix."""
    final = {n: 0.0 for n in range(k, k_max + 1)}
    for weight, a, b in prior:
        for labels in itertools.product((0, 1), repeat=k_max):
            s = sum(labels)
            p = math.exp(
                math.lgamma(a + s)
                + math.lgamma(b + k_max - s)
                - math.lgamma(a + b + k_max)
                - math.lgamma(a)
                - math.lgamma(b)
                + math.lgamma(a + b)
            )
            for n in range(k, k_max + 1):
                if (
                    stop_rule(sum(labels[:n]), n, k=k, k_max=k_max, stop_confidence=stop_confidence)[0]
                    != Outcome.EXTEND
                ):
                    final[n] += weight * p
                    break
    return final


@pytest.mark.parametrize(
    "k, k_max, confidence, prior",
    [
        (3, 5, 0.95, [(1.0, 1, 1)]),
        (2, 7, 0.9, [(0.5, 6, 1), (0.3, 1, 6), (0.2, 3, 3)]),
        (1, 8, 0.99, [(0.7, 2.5, 0.5), (0.3, 0.5, 0.5)]),
        (4, 4, 0.95, [(1.0, 1, 1)]),
    ],
)
def test_the_planner_is_exact(k, k_max, confidence, prior):
    plan = final_k_distribution(k=k, k_max=k_max, stop_confidence=confidence, prior=prior)
    assert plan == pytest.approx(enumerated(k=k, k_max=k_max, stop_confidence=confidence, prior=prior), abs=1e-12)
    assert sum(plan.values()) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize(
    "k, k_max, message",
    [(0, 3, "k: expected a positive integer, got 0"), (4, 3, "k_max: expected at least k = 4, got 3")],
)
def test_the_planner_refuses_an_impossible_range_naming_it(k, k_max, message):
    with pytest.raises(ValueError, match=message):
        final_k_distribution(k=k, k_max=k_max, stop_confidence=0.95, prior=[(1.0, 1, 1)])


def test_the_plan_follows_the_crowd():
    default = stop_plan(k=3, k_max=7, stop_confidence=0.95)
    assert default.basis.startswith("the study's ComVE crowd")
    easy = stop_plan(k=3, k_max=7, stop_confidence=0.95, first_labels={0: 400, 3: 600})
    hard = stop_plan(k=3, k_max=7, stop_confidence=0.95, first_labels={1: 500, 2: 500})
    assert easy.basis.startswith("the first 3 labels of the campaign's 1000 prompts")
    assert 3 < easy.expected < default.expected < hard.expected < 7
    assert easy.expected_total(10) == pytest.approx(10 * easy.expected)
    assert stop_plan(k=4, k_max=4, stop_confidence=0.95).final_k == {4: pytest.approx(1.0)}


def test_the_default_crowd_is_the_studys_comve_votes():
    path = REPO.parent / "shared" / "datasets" / "mcs-noise-audit" / "raw" / "ComVE-annotation.json"
    if not path.exists():
        pytest.skip(f"dataset not available: {path}")
    votes = [sum(a["annotation"] for a in item["annotations"]) for item in json.loads(path.read_text()).values()]
    assert tuple(votes.count(s) for s in range(6)) == COMVE_VOTES_OF_FIVE


# --- settings -------------------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "fields, message",
    [
        ({"k": 4, "k_max": 3}, "The most labels per prompt (k_max = 3) must be at least the least (k = 4)."),
        (
            {"schema": "option_rating", "scale_min": 0, "scale_max": 10, "binarization": {"0": 0, "10": 1}, "k_max": 5},
            "Adaptive k needs one 0/1 answer per prompt, so it is not available when workers rate each answer option: "
            "leave k_max empty.",
        ),
        (
            {"schema": "rating", "binarization": {"1": 0, "4": 1}, "k_max": 5},
            "Adaptive k counts every label as 0 or 1, so the binarization must map every point of the scale; it leaves "
            "out 2, 3. Map them, or leave k_max empty.",
        ),
    ],
)
def test_impossible_adaptive_settings_are_refused_naming_k_max(researcher, fields, message):
    with pytest.raises(ValidationError) as refused:
        services.campaign_create(owner=researcher, title="Adaptive", **{"k": 3, **fields})
    assert refused.value.message_dict == {"k_max": [message]}
    assert not Campaign.objects.exists()


@pytest.mark.django_db
def test_binary_and_fully_binarized_ratings_may_be_adaptive(researcher):
    binary = services.campaign_create(owner=researcher, title="B", k=3, k_max=3)
    rating = services.campaign_create(
        owner=researcher, title="R", schema="rating", k=2, k_max=9, binarization=BINARIZATION, stop_confidence=0.9
    )
    assert (binary.k_max, rating.k_max, rating.stop_confidence) == (3, 9, 0.9)
    assert binary.k_rule == "k=3..3, stop at P(majority)>=0.95"
    assert services.campaign_create(owner=researcher, title="F", k=4).k_rule == "k=4"


@pytest.mark.django_db
def test_the_campaign_form_takes_k_max_and_names_it_when_wrong(researcher_client, researcher):
    form = CampaignForm(data=campaign_fields(k=3, k_max=2, stop_confidence=0.95), owner=researcher)
    assert form.errors == {"k_max": ["The most labels per prompt (k_max = 2) must be at least the least (k = 3)."]}
    form = CampaignForm(data=campaign_fields(k=3, k_max="", stop_confidence=1.2), owner=researcher)
    assert list(form.errors) == ["stop_confidence"]

    response = researcher_client.post("/campaigns/new/", campaign_fields(k=3, k_max=6, stop_confidence=0.9))
    campaign = Campaign.objects.get()
    assert response.status_code == 302
    assert (campaign.k, campaign.k_max, campaign.stop_confidence) == (3, 6, 0.9)


@pytest.mark.django_db
def test_the_api_names_a_bad_k_max_or_target_and_freezes_the_rule_once_prompts_exist(researcher, make_campaign):
    client = APIClient()
    client.force_authenticate(researcher)
    error = assert_error(
        client.post("/api/v1/campaigns/", {"title": "A", "k": 4, "k_max": 2}, format="json"), 400, "invalid"
    )
    assert error["fields"] == {"k_max": ["The most labels per prompt (k_max = 2) must be at least the least (k = 4)."]}
    error = assert_error(
        client.post("/api/v1/campaigns/", {"title": "A", "k_max": 5, "stop_confidence": 1.5}, format="json"),
        400,
        "invalid",
    )
    assert list(error["fields"]) == ["stop_confidence"]
    assert not Campaign.objects.exists()

    created = client.post(
        "/api/v1/campaigns/", {"title": "A", "k": 3, "k_max": 5, "stop_confidence": 0.9}, format="json"
    )
    assert created.status_code == 201, created.content
    assert (created.json()["k_max"], created.json()["stop_confidence"]) == (5, 0.9)

    campaign = adaptive(make_campaign, 2)
    for change in ({"k_max": 7}, {"stop_confidence": 0.99}):
        assert_error(client.patch(f"/api/v1/campaigns/{campaign.slug}/", change, format="json"), 409, "frozen_field")
    campaign.refresh_from_db()
    assert (campaign.k_max, campaign.stop_confidence) == (5, 0.95)
    progress = client.get(f"/api/v1/campaigns/{campaign.slug}/progress/").json()
    assert (progress["k"], progress["k_max"], progress["labels_wanted"]) == (3, 5, 6)


# --- the rule, live -----------------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.both_dbs
def test_a_unanimous_prompt_gets_one_more_slot_then_stops(make_campaign, make_worker):
    campaign = adaptive(make_campaign)
    prompt = Prompt.objects.get(campaign=campaign)
    for _ in range(3):
        label_one(campaign, make_worker(), 1)
    assert decisions(prompt) == [(3, 3, Outcome.EXTEND)]
    assert n_slots(prompt) == 4
    assert invariant_violations(campaign=campaign) == []

    label_one(campaign, make_worker(), 1)  # a label for the added slot is accepted like any other
    assert decisions(prompt) == [(3, 3, Outcome.EXTEND), (4, 4, Outcome.STOP)]
    assert StopDecision.objects.get(prompt=prompt, n_labels=4).posterior == 0.96875
    assert n_slots(prompt) == 4
    nothing = services.lease_acquire(campaign=campaign, worker=make_worker())
    assert isinstance(nothing, services.NothingLeft) and nothing.code == "nothing_left"
    assert invariant_violations(campaign=campaign, complete=True) == []


@pytest.mark.django_db
@pytest.mark.both_dbs
def test_a_contested_prompt_grows_to_k_max_and_no_further(make_campaign, make_worker):
    campaign = adaptive(make_campaign)
    prompt = Prompt.objects.get(campaign=campaign)
    for value in (1, 0, 1, 0, 1):
        label_one(campaign, make_worker(), value)
    assert decisions(prompt) == [(3, 2, Outcome.EXTEND), (4, 2, Outcome.EXTEND), (5, 3, Outcome.AT_MAX)]
    assert list(Slot.objects.filter(prompt=prompt).order_by("index").values_list("index", flat=True)) == [0, 1, 2, 3, 4]
    assert isinstance(services.lease_acquire(campaign=campaign, worker=make_worker()), services.NothingLeft)
    assert invariant_violations(campaign=campaign, complete=True) == []


@pytest.mark.django_db
def test_a_tie_never_stops_before_k_max_even_at_one_half(make_campaign, make_worker):
    campaign = adaptive(make_campaign, k=2, k_max=4, stop_confidence=0.5)
    prompt = Prompt.objects.get(campaign=campaign)
    for value in (1, 0, 0):
        label_one(campaign, make_worker(), value)
    assert decisions(prompt) == [(2, 1, Outcome.EXTEND), (3, 1, Outcome.STOP)]
    assert list(StopDecision.objects.filter(prompt=prompt).values_list("posterior", flat=True)) == [0.5, 11 / 16]


@pytest.mark.django_db
def test_ratings_are_counted_through_the_binarization(researcher, make_worker):
    campaign = services.campaign_create(
        owner=researcher, title="R", schema="rating", k=2, k_max=3, stop_confidence=0.7, binarization=BINARIZATION
    )
    services.prompts_import(campaign=campaign, data=jsonl({"id": "r0", "text": "one"}), filename="r.jsonl")
    campaign = services.campaign_transition(campaign=campaign, action="launch")
    prompt = Prompt.objects.get(campaign=campaign)
    for value in (4, 1, 2):
        label_one(campaign, make_worker(), value)
    assert decisions(prompt) == [(2, 1, Outcome.EXTEND), (3, 1, Outcome.AT_MAX)]  # 1 of 3 → 0.6875 < 0.7
    assert invariant_violations(campaign=campaign, complete=True) == []


@pytest.mark.django_db
def test_a_fixed_k_campaign_decides_nothing(make_campaign, make_worker):
    campaign = make_campaign(2, k=2)
    for _ in range(2):
        worker = make_worker()
        for _ in range(2):
            label_one(campaign, worker, 1)
    assert not StopDecision.objects.exists()
    assert Slot.objects.filter(campaign=campaign).count() == 4
    assert invariant_violations(campaign=campaign, complete=True) == []


@pytest.mark.django_db
@pytest.mark.both_dbs
def test_fill_first_serves_the_prompt_that_grew(make_campaign, make_worker):
    campaign = adaptive(make_campaign, 3, k=2, k_max=3, policy="fill_first")
    first = label_one(campaign, make_worker(), 1).prompt
    assert label_one(campaign, make_worker(), 1).prompt == first  # its open slot ranks first
    added = Slot.objects.get(prompt=first, index=2)
    assert (added.priority, added.filled) == (2, False)  # 2 of 2 → 0.875: one more
    assert invariant_violations(campaign=campaign) == []
    assert label_one(campaign, make_worker(), 1).prompt == first
    assert decisions(first)[-1] == (3, 3, Outcome.AT_MAX)  # 0.9375 < 0.95: stopped by k_max


@pytest.mark.django_db
@pytest.mark.both_dbs
def test_a_void_label_refilled_keeps_the_decision_logged_at_that_count(make_campaign, make_worker):
    campaign = adaptive(make_campaign)
    prompt = Prompt.objects.get(campaign=campaign)
    labels = [label_one(campaign, make_worker(), 1) for _ in range(4)]
    assert decisions(prompt) == [(3, 3, Outcome.EXTEND), (4, 4, Outcome.STOP)]

    services.label_void(label_id=labels[0].pk, reason="returned")
    assert invariant_violations(campaign=campaign) == []
    assert campaign_progress(campaign=campaign).prompts_complete == 0
    label_one(campaign, make_worker(), 0)  # 3 of 4 now: 0.8125, yet the stop logged at 4 stands
    assert decisions(prompt) == [(3, 3, Outcome.EXTEND), (4, 4, Outcome.STOP)]
    assert n_slots(prompt) == 4
    assert invariant_violations(campaign=campaign, complete=True) == []


@pytest.mark.django_db
@pytest.mark.both_dbs
def test_a_void_label_in_a_growing_prompt_is_decided_again_at_the_next_count(make_campaign, make_worker):
    campaign = adaptive(make_campaign)
    prompt = Prompt.objects.get(campaign=campaign)
    labels = [label_one(campaign, make_worker(), 1) for _ in range(3)]
    services.label_void(label_id=labels[0].pk, reason="returned")  # 2 of 4 slots filled
    for value in (0, 0, 0):
        label_one(campaign, make_worker(), value)
    assert decisions(prompt) == [(3, 3, Outcome.EXTEND), (4, 2, Outcome.EXTEND), (5, 2, Outcome.AT_MAX)]
    assert invariant_violations(campaign=campaign, complete=True) == []


@pytest.mark.django_db
@pytest.mark.both_dbs
def test_the_checker_names_slots_the_rule_did_not_add_and_decisions_against_it(make_campaign, make_worker):
    """``invariant_violations``: a prompt's slot count is k plus one per logged "extend", a full prompt has
    its "stop" or "at max", each decision is the rule's (rows written past the services, with the ORM)."""
    campaign = adaptive(make_campaign)
    prompt = Prompt.objects.get(campaign=campaign)
    name = f"prompt 'p0' of {campaign.slug}"
    for _ in range(4):
        label_one(campaign, make_worker(), 1)
    assert invariant_violations(campaign=campaign, complete=True) == []

    Slot.objects.create(campaign=campaign, prompt=prompt, index=4, rand=0.5, priority=4)
    assert invariant_violations(campaign=campaign) == [
        f'{name} has 5 slots, but k = 3 and 1 logged "extend" decisions make 4',
        f'{name} (now 5 slots): "stop" at 4 of 4 (posterior 0.9688) breaks the rule k = 3 to k_max = 5, stop at 0.95',
    ]
    Slot.objects.filter(prompt=prompt, index=4).delete()

    StopDecision.objects.filter(prompt=prompt, n_labels=4).update(outcome=Outcome.EXTEND)
    assert invariant_violations(campaign=campaign) == [
        f'{name} has 4 slots, but k = 3 and 2 logged "extend" decisions make 5',
        f'{name} (now 4 slots): "extend" at 4 of 4 (posterior 0.9688) breaks the rule k = 3 to k_max = 5, stop at 0.95',
    ]
    StopDecision.objects.filter(prompt=prompt, n_labels=4).delete()
    assert invariant_violations(campaign=campaign) == [
        f'{name} has all its 4 slots filled and no logged "stop" or "at max"'
    ]
    StopDecision.objects.create(
        campaign=campaign,
        prompt=prompt,
        n_labels=4,
        n_positive=4,
        posterior=0.9,
        outcome=Outcome.STOP,
        created_at=prompt.labels.latest("pk").created_at,
    )
    assert invariant_violations(campaign=campaign) == [
        f'{name} (now 4 slots): "stop" at 4 of 4 (posterior 0.9000) breaks the rule k = 3 to k_max = 5, stop at 0.95'
    ]

    fixed = make_campaign(1, k=2, title="Fixed")
    StopDecision.objects.create(
        campaign=fixed,
        prompt=fixed.prompts.get(),
        n_labels=2,
        n_positive=1,
        posterior=0.5,
        outcome=Outcome.AT_MAX,
        created_at=prompt.labels.latest("pk").created_at,
    )
    assert invariant_violations(campaign=fixed) == [
        f"prompt 'p0' of {fixed.slug}: \"at_max\" at 1 of 2 (posterior 0.5000) logged, "
        "but its campaign has a fixed k = 2"
    ]


@pytest.mark.django_db
def test_progress_and_the_labels_still_needed_follow_each_prompts_own_k(make_campaign, make_worker):
    campaign = adaptive(make_campaign, 2, policy="fill_first")
    progress = campaign_progress(campaign=campaign)
    assert (progress.labels_wanted, progress.prompts_complete, progress.k_max) == (6, 0, 5)
    assert labels_still_needed(campaign=campaign) == 10  # at most 5 each
    workers = [make_worker() for _ in range(4)]
    for worker in workers[:3]:
        label_one(campaign, worker, 1)  # fill-first: one prompt, which then gets a fourth slot
    progress = campaign_progress(campaign=campaign)
    assert (progress.labels, progress.labels_wanted, progress.prompts_complete) == (3, 7, 0)
    assert labels_still_needed(campaign=campaign) == 7
    assert quick_progress(campaign) == (3, 7, 0)  # the k-th label fell, yet the prompt is not complete
    label_one(campaign, workers[3], 1)  # 4 of 4: stops
    progress = campaign_progress(campaign=campaign)
    assert (progress.labels, progress.labels_wanted, progress.prompts_complete) == (4, 7, 1)
    assert progress.percent == pytest.approx(400 / 7)
    assert labels_still_needed(campaign=campaign) == 5
    assert quick_progress(campaign) == (4, 7, 1)


def quick_progress(campaign) -> tuple[int, int, int]:
    """The live audit's progress (the dashboard's): labels, labels wanted, prompts complete."""
    from audits.services import audit_refresh

    progress = audit_refresh(campaign_id=campaign.pk).data["progress"]
    return progress["labels"], progress["labels_wanted"], progress["prompts_complete"]


@pytest.mark.django_db
def test_the_export_states_each_prompts_final_k_and_the_rule(make_campaign, make_worker):
    campaign = adaptive(make_campaign)
    for _ in range(4):
        label_one(campaign, make_worker(), 1)
    rows = list(csv.DictReader(io.StringIO("".join(export_chunks(campaign=campaign, fmt="csv")))))
    assert list(rows[0])[-2:] == ["final_k", "k_rule"]
    assert {(row["final_k"], row["k_rule"]) for row in rows} == {("4", "k=3..5, stop at P(majority)>=0.95")}
    rows = [json.loads(line) for line in "".join(export_chunks(campaign=campaign, fmt="jsonl")).splitlines()]
    assert {(row["final_k"], row["k_rule"]) for row in rows} == {(4, "k=3..5, stop at P(majority)>=0.95")}

    fixed = make_campaign(1, k=2, title="Fixed")
    label_one(fixed, make_worker(), 0)
    rows = [json.loads(line) for line in "".join(export_chunks(campaign=fixed, fmt="jsonl")).splitlines()]
    assert [(row["final_k"], row["k_rule"]) for row in rows] == [(2, "k=2")]


# --- the audit: partitions per final k --------------------------------------------------------------------


def test_partitions_are_counted_per_final_k_and_a_fixed_k_report_keeps_its_keys():
    triples = [(f"w{i}", "a", 1) for i in range(3)] + [(f"w{i}", "b", int(i < 3)) for i in range(4)]
    triples += [(f"w{i}", "c", i % 2) for i in range(5)] + [(f"w{i}", "d", 1) for i in range(5)]
    workers, prompts, values = zip(*triples)
    matrix = LabelMatrix.from_triples(list(workers), list(prompts), list(values))
    assert partitions_by_k(matrix, k_min=3, k_max=5) == {3: {0: 1, 1: 0}, 4: {0: 0, 1: 1, 2: 0}, 5: {0: 1, 1: 0, 2: 1}}
    with pytest.raises(ValueError, match="k_max: expected at least k_min = 4, got 3"):
        partitions_by_k(matrix, k_min=4, k_max=3)

    plain = full_report(matrix, computed_at=None).to_dict()
    adaptive_report = full_report(matrix, k_range=(3, 5)).to_dict()
    assert "partitions_by_k" not in plain
    assert adaptive_report["partitions_by_k"] == {
        "3": {"0": 1, "1": 0},
        "4": {"0": 0, "1": 1, "2": 0},
        "5": {"0": 1, "1": 0, "2": 1},
    }
    assert adaptive_report["partitions"] == plain["partitions"] == {"0": 1, "1": 0, "2": 1}
    markdown = full_report(matrix, k_range=(3, 5)).to_markdown()
    assert "## Noise partitions per final k (adaptive k)" in markdown
    assert "| 4 | 1 | 0 | 1 | 0 |" in markdown
    assert "per final k" not in full_report(matrix).to_markdown()


# --- the campaign page: the rule in words and the planner ---------------------------------------------------


@pytest.mark.django_db
def test_the_campaign_page_states_the_rule_and_prices_the_plan(researcher_client, make_campaign, make_worker):
    campaign = adaptive(make_campaign, 10)
    page = researcher_client.get(f"/campaigns/{campaign.slug}/").content.decode()
    assert "Adaptive k: every prompt gets at least <strong>3</strong> labels and at most" in page
    assert "4 or more of 4 alike" in page and "5 or more of 5 alike" in page
    assert "the study&#x27;s ComVE crowd" in page
    assert "plan-cost" not in page

    for _ in range(3):
        worker = make_worker()
        for _ in range(10):
            label_one(campaign, worker, 1)
    plan = campaign_stop_plan(campaign=campaign, reward=Decimal("0.10"))
    assert plan.plan.basis.startswith("the first 3 labels of the campaign's 10 prompts")
    assert (plan.n_prompts, plan.labels, plan.fewest_total, plan.most_total) == (10, 30, 30, 50)
    assert plan.expected_total == math.ceil(10 * plan.plan.expected)
    assert plan.cost_expected == mturk_cost_preview(
        reward=Decimal("0.10"), n_assignments=plan.expected_total, assignments_per_hit=1
    )
    page = researcher_client.get(f"/campaigns/{campaign.slug}/", {"reward": "0.10"}).content.decode()
    assert f"<strong>${plan.cost_expected.total}</strong>" in page
    assert f"${plan.cost_most.total}" in page
    page = researcher_client.get(f"/campaigns/{campaign.slug}/", {"reward": "lots"}).content.decode()
    assert "Enter a number." in page and "plan-cost" not in page


@pytest.mark.django_db
def test_a_fixed_k_campaign_page_has_no_planner(researcher_client, make_campaign):
    campaign = make_campaign(2)
    assert 'id="adaptive-k"' not in researcher_client.get(f"/campaigns/{campaign.slug}/").content.decode()


@pytest.mark.django_db
def test_the_plan_counts_the_prompts_stopped_so_far(make_campaign, make_worker):
    campaign = adaptive(make_campaign, 2, policy="fill_first")
    for _ in range(4):
        label_one(campaign, make_worker(), 1)
    plan = campaign_stop_plan(campaign=campaign)
    assert plan.final_so_far == {4: 1}
    assert [(n, stopped) for n, _, stopped in plan.rows] == [(3, 0), (4, 1), (5, 0)]
    # the stopped prompt at its final k, the other as a prompt is expected to end
    assert (plan.n_stopped, plan.fewest_total, plan.most_total) == (1, 4 + 3, 4 + 5)
    assert plan.expected_total == math.ceil(4 + plan.plan.expected)
    assert plan.cost_expected is None


# --- the live rule equals the benchmark's replay of the study's ComVE crowd --------------------------------


def _benchmark():
    spec = importlib.util.spec_from_file_location("adaptive_k_benchmark", REPO / "benchmarks" / "adaptive_k.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.django_db
@pytest.mark.parametrize("k, confidence", [(3, 0.9), (3, 0.8), (4, 0.95)])
def test_the_live_rule_ends_every_prompt_where_the_replay_does(researcher, k, confidence):
    """Six sentences of each vote count (0 to 5 of 5), each in a campaign of its own so that its workers
    label it in the study's order, through lease_acquire and label_submit."""
    benchmark = _benchmark()
    if not (benchmark.STUDY / "raw" / "ComVE-annotation.json").exists():
        pytest.skip(f"dataset not available: {benchmark.STUDY}")
    labels, _ = benchmark.comve()
    chosen = {}
    for key, given in labels.items():
        votes = sum(value for _, value in given)
        if sum(sum(v for _, v in labels[c]) == votes for c in chosen) < 6:
            chosen[key] = given
    replayed = benchmark.replay(
        {key: [v for _, v in given] for key, given in chosen.items()}, k=k, k_max=5, stop_confidence=confidence
    )
    workers = {}
    for key, given in chosen.items():
        campaign = services.campaign_create(
            owner=researcher, title=f"ComVE {key}", k=k, k_max=5, stop_confidence=confidence
        )
        services.prompts_import(
            campaign=campaign, data=jsonl({"id": key, "text": f"sentence {key}"}), filename=f"{key}.jsonl"
        )
        campaign = services.campaign_transition(campaign=campaign, action="launch")
        for worker_id, value in given:
            worker = workers.setdefault(
                worker_id, services.worker_get_or_create(channel="comve", external_id=worker_id)
            )
            lease = services.lease_acquire(campaign=campaign, worker=worker)
            if isinstance(lease, services.NothingLeft):
                break
            services.label_submit(lease_id=lease.pk, worker=worker, value=value, client_token=f"{key}-{worker_id}")
        prompt = Prompt.objects.get(campaign=campaign)
        assert (n_slots(prompt), prompt.n_labels) == (replayed[key], replayed[key]), key
        assert invariant_violations(campaign=campaign, complete=True) == []
    assert len(chosen) == 36
    assert len(set(replayed.values())) > 1, "the subset should end prompts at different k"


# --- concurrency: prompts growing while workers claim and submit -------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.both_dbs
def test_threads_hammering_growing_prompts_keep_every_guarantee(make_campaign):
    campaigns = [
        adaptive(make_campaign, 40, k=2, k_max=5, stop_confidence=0.9, title="Random"),
        adaptive(make_campaign, 20, k=2, k_max=4, stop_confidence=0.8, title="Fill", policy="fill_first"),
    ]
    Campaign.objects.filter(pk__in=[c.pk for c in campaigns]).update(lease_seconds=LEASE_SECONDS)
    workers = crowd(16)
    everyone = [w.pk for w in workers]
    specs = [
        dict(
            campaign_ids=[c.pk for c in campaigns],
            own_worker_ids=everyone[2 * i : 2 * i + 2],
            all_worker_ids=everyone,
            seed=100 + i,
        )
        for i in range(8)
    ]
    acks, errors, counts = merge(run_clients(specs, cycles=60))
    print(f"\n{sum(counts[a] for a in ACTIONS)} leases, {len(acks)} acks: {dict(sorted(counts.items()))}")
    assert errors == []
    assert counts["sqlite gave up waiting"] <= 0.01 * 8 * 60
    outcomes = set(StopDecision.objects.values_list("outcome", flat=True))
    assert Outcome.EXTEND in outcomes, "no prompt grew: the run exercised less than it claims"
    for campaign in campaigns:
        assert_guarantees(campaign, complete=False)
        acks += drain(campaign, workers)
        assert_guarantees(campaign, complete=True)
        for prompt in Prompt.objects.filter(campaign=campaign):
            assert campaign.k <= n_slots(prompt) == prompt.n_labels <= campaign.k_max
    assert_acks_match_labels(acks)


@pytest.mark.django_db(transaction=True)
@pytest.mark.both_dbs
def test_the_last_slots_filled_at_once_are_decided_once_and_one_claimer_gets_the_added_slot(make_campaign):
    """Four workers fill a prompt's four slots at the same moment (3 of 4 alike: 0.8125 < 0.9, one more
    slot) while four others keep asking for work: the decision is taken once, by the submit that fills
    the last slot, and the added slot goes to exactly one of the others."""
    workers = crowd(8)
    campaign = adaptive(make_campaign, 1, k=4, k_max=6, stop_confidence=0.9)
    leases = [services.lease_acquire(campaign=campaign, worker=w) for w in workers[:4]]
    together = threading.Barrier(8)

    def submit(lease, value):
        try:
            together.wait()
            return services.label_submit(
                lease_id=lease.pk, worker=lease.worker, value=value, client_token=f"t{lease.pk}"
            )
        except Exception as exc:
            return describe(exc)
        finally:
            connection.close()

    def claim(worker):
        try:
            together.wait()
            for _ in range(500):
                decided = StopDecision.objects.filter(campaign=campaign).exists()
                lease = services.lease_acquire(campaign=campaign, worker=worker)
                if isinstance(lease, Lease) or decided:
                    return lease
                time.sleep(0.01)
            return lease
        except Exception as exc:
            return describe(exc)
        finally:
            connection.close()

    with ThreadPoolExecutor(8) as pool:
        submits = [pool.submit(submit, lease, value) for lease, value in zip(leases, (1, 1, 1, 0))]
        claims = [pool.submit(claim, worker) for worker in workers[4:]]
        submitted, claimed = [f.result() for f in submits], [f.result() for f in claims]
    assert [s for s in submitted if not isinstance(s, services.LabelAck)] == []
    assert [c for c in claimed if not isinstance(c, (Lease, services.NothingLeft))] == []
    prompt = Prompt.objects.get(campaign=campaign)
    assert decisions(prompt) == [(4, 3, Outcome.EXTEND)]
    holders = [c for c in claimed if isinstance(c, Lease)]
    assert len(holders) == 1 and holders[0].slot.index == 4
    assert invariant_violations(campaign=campaign) == []
