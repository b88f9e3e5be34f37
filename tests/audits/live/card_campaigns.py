"""Campaigns for the instrument card's tests, labeled through the real services.

``wordsim_campaign``: WordSim-353 (Finkelstein et al. 2002; ``shared/datasets/wordsim353``) as a 0–10
rating campaign: its 353 word pairs, each rated by 13 raters — set1's 13 and set2's first 13 of 16.
The files do not link set1's rater k with set2's (two panels), so worker k here is set1's rater k on
set1's pairs and set2's rater k on set2's: per-prompt numbers and α, which never follow a worker
across prompts, are the dataset's; per-worker ones are not. Chorus stores integer ratings, so the
367 fractional ratings (7.5, 8.1, …) are rounded half to even: on the exact ratings the mean item
SD is 1.704, the SD of item SDs 0.544 and interval α 0.590; rounded, 1.718, 0.545 and 0.587.
"""

from __future__ import annotations

import csv
import json
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from annotation import services
from annotation.models import Label, Lease, Participation, Prompt, Slot
from audits.services import stats_rebuild
from tests.audits.conftest import dataset

RATERS = 13


def wordsim_ratings(*, offset: float = 0.0) -> dict[str, list[int]]:
    """{prompt id: the 13 raters' ratings, rounded half to even (plus ``offset``, clipped to 0–10)}."""
    ratings = {}
    for name in ("set1", "set2"):
        with open(dataset("wordsim353", f"{name}.csv"), newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            header = next(reader)
            columns = [i for i, h in enumerate(header) if h.strip().isdigit()][:RATERS]
            for number, row in enumerate(reader):
                if row:
                    values = [min(10, max(0, round(float(row[i]) + offset))) for i in columns]
                    ratings[f"{name}-{number}"] = values
    return ratings


def pairs_text() -> dict[str, str]:
    texts = {}
    for name in ("set1", "set2"):
        with open(dataset("wordsim353", f"{name}.csv"), newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            next(reader)
            for number, row in enumerate(reader):
                if row:
                    texts[f"{name}-{number}"] = f"How related are “{row[0]}” and “{row[1]}”?"
    return texts


def rating_campaign(owner, ratings: dict[str, list[int]], *, title: str, texts: dict[str, str] | None = None):
    """A launched 0–10 rating campaign of ``ratings``' prompts (k = raters), labeled to the end: worker
    k gives each prompt its k-th rating.

    The prompts are imported and the campaign launched through the services; the labels are written
    in bulk, as a full campaign's rows (a submitted lease per label, its slot filled, the workers'
    participations and counts), then the audit statistics are rebuilt (``stats_rebuild``). Through
    lease_acquire / label_submit, WordSim's 4,589 labels took 227 s on this machine; the test checks
    the rows with the invariants checker instead (``annotation.selectors.invariant_violations``)."""
    k = len(next(iter(ratings.values())))
    campaign = services.campaign_create(
        owner=owner,
        title=title,
        schema="rating",
        scale_min=0,
        scale_max=10,
        k=k,
        binarization={str(v): int(v >= 5) for v in range(11)},
        instructions="Rate how related the two words are, from 0 (unrelated) to 10 (very closely related).",
    )
    rows = [{"id": pid, "text": (texts or {}).get(pid, pid)} for pid in ratings]
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()
    services.prompts_import(campaign=campaign, data=data, filename="wordsim.jsonl")
    campaign = services.campaign_transition(campaign=campaign, action="launch")
    workers = [
        services.worker_get_or_create(channel="sim", external_id=f"{campaign.slug}-rater-{rater + 1}")
        for rater in range(k)
    ]
    now = timezone.now()
    slots = list(Slot.objects.filter(campaign=campaign).select_related("prompt").order_by("prompt_id", "index"))
    with transaction.atomic():
        leases = Lease.objects.bulk_create(
            [
                Lease(
                    campaign=campaign,
                    prompt_id=slot.prompt_id,
                    worker=workers[slot.index],
                    slot=slot,
                    status=Lease.Status.SUBMITTED,
                    created_at=now,
                    expires_at=now + timedelta(minutes=10),
                )
                for slot in slots
            ]
        )
        Label.objects.bulk_create(
            [
                Label(
                    campaign=campaign,
                    prompt_id=slot.prompt_id,
                    worker=workers[slot.index],
                    lease=lease,
                    slot=slot,
                    value=ratings[slot.prompt.external_id][slot.index],
                    client_token=f"seed-{lease.pk}",
                    leased_at=now,
                    created_at=now,
                )
                for slot, lease in zip(slots, leases)
            ]
        )
        for slot, lease in zip(slots, leases):
            slot.lease, slot.filled = lease, True
        Slot.objects.bulk_update(slots, ["lease", "filled"], batch_size=2000)
        Prompt.objects.filter(campaign=campaign).update(n_labels=k)
        Participation.objects.bulk_create(
            [Participation(campaign=campaign, worker=w, n_labels=len(ratings)) for w in workers]
        )
    stats_rebuild(campaign_id=campaign.pk)
    return campaign


def wordsim_campaign(owner, *, title: str = "WordSim-353"):
    return rating_campaign(owner, wordsim_ratings(), title=title, texts=pairs_text())
