"""Labels for the dashboard tests, through the real services.

``label_one_each``: one label per value, each from a new worker.

``replay_demo_crowd``: the demo's design, replayed through the real services: ``manage.py demo``'s campaign (its first
60 statements with gold, k = 5; no refill) and a crowd of 12 with the simulated crowd's personalities (careful,
steady, noisy, hasty, same-answer, drive-by, twice), answering as ``annotation.crowd`` does — but
through ``lease_acquire`` / ``label_submit`` in this process instead of over HTTP, in a seeded random
interleaving, so a test gets the same labels every run."""

from __future__ import annotations

import itertools
import random

from annotation import services
from annotation.crowd import PERSONALITIES
from annotation.demo import demo_campaign, demo_truth
from annotation.models import Lease
from tests.helpers import label_one, sim_worker

CROWD_SIZE = 12  # manage.py demo's default --crowd
_seq = itertools.count(1)


def label_one_each(campaign, values) -> None:
    """One label per value, each from a new simulated worker."""
    for value in values:
        label_one(campaign, sim_worker("d"), value=value)


def replay_demo_crowd(owner, *, seed: int = 5):
    """The demo campaign labeled to the end by a demo-like crowd. Returns (campaign, {public worker
    id: personality}).

    The same labels every run: the assignment engine draws its slots' random keys and its starting
    points from the ``random`` module, seeded here (and restored after)."""
    saved = random.getstate()
    random.seed(seed)
    try:
        return _replay(owner, seed)
    finally:
        random.setstate(saved)


def _replay(owner, seed: int):
    campaign, _ = demo_campaign(owner)
    truth = demo_truth()
    texts = dict(campaign.prompts.values_list("pk", "text"))
    # What "same answer" workers press: the first answer button of the labeling form.
    first = campaign.label_schema.choices[0].value
    values = [c.value for c in campaign.label_schema.choices]
    rng = random.Random(seed)
    crowd = []
    for i in range(CROWD_SIZE):
        personality = PERSONALITIES[i % len(PERSONALITIES)]
        worker = services.worker_get_or_create(channel="sim", external_id=f"crowd-{i + 1:02d}-{personality.name}")
        crowd.append([worker, personality, 0])
    active = list(crowd)
    while active:
        entry = rng.choice(active)
        worker, personality, done = entry
        if personality.volume is not None and done >= personality.volume:
            active.remove(entry)
            continue
        lease = services.lease_acquire(campaign=campaign, worker=worker)
        if not isinstance(lease, Lease):  # nothing left for this worker
            active.remove(entry)
            continue
        gold = truth[texts[lease.prompt_id]]
        if personality.same_answer:
            value = first
        elif rng.random() < personality.accuracy:
            value = gold
        else:
            value = rng.choice([v for v in values if v != gold])
        services.label_submit(lease_id=lease.pk, worker=worker, value=value, client_token=f"demo{lease.pk}")
        entry[2] += 1
    return campaign, {f"sim:{w.external_id}": p for w, p, _ in crowd}
