"""Free-text campaigns for the clustering tests, built row by row: one counted label per answer, each by
its own simulated worker (answer i of every prompt by worker i), as a finished campaign."""

import hashlib
import itertools
import random
from datetime import timedelta
from pathlib import Path

from django.utils import timezone

from annotation.models import Campaign, ImportBatch, Label, Lease, Prompt, Slot, Worker
from annotation.protoqa_files import protoqa_clusters, protoqa_read
from annotation.services.protoqa_import import protoqa_import
from audits.services.clustering import expert_clusters_import
from tests.audits.conftest import dataset

_seq = itertools.count(1)


def free_text_campaign(owner, questions: dict, *, title: str = "Free answers") -> Campaign:
    """``questions``: ``{external id: (text, [answer, …])}``; returns the closed campaign."""
    n = next(_seq)
    k = max(len(answers) for _, answers in questions.values())
    campaign = Campaign.objects.create(
        owner=owner, title=title, slug=f"free-{n}", schema="free_text", k=k, status="closed"
    )
    batch = ImportBatch.objects.create(campaign=campaign, filename="free.jsonl", sha256=f"{n:064d}", n_prompts=0)
    workers = Worker.objects.bulk_create(Worker(channel="sim", external_id=f"free{n}-{i}") for i in range(k))
    now = timezone.now()
    rng = random.Random(n)
    for external_id, (text, answers) in questions.items():
        prompt = Prompt.objects.create(
            campaign=campaign, batch=batch, external_id=external_id, text=text, n_labels=len(answers)
        )
        slots = Slot.objects.bulk_create(
            Slot(campaign=campaign, prompt=prompt, index=i, rand=rng.random(), filled=True) for i in range(len(answers))
        )
        leases = Lease.objects.bulk_create(
            Lease(
                campaign=campaign,
                prompt=prompt,
                worker=workers[i],
                slot=slots[i],
                status="submitted",
                created_at=now,
                expires_at=now + timedelta(minutes=5),
            )
            for i in range(len(answers))
        )
        Label.objects.bulk_create(
            Label(
                campaign=campaign,
                prompt=prompt,
                worker=workers[i],
                lease=leases[i],
                slot=slots[i],
                value=answer,
                client_token=f"c{prompt.pk}-{i}",
                leased_at=now,
                created_at=now,
            )
            for i, answer in enumerate(answers)
        )
    return campaign


def protoqa_dev_campaign(owner, *, experts: bool = False) -> tuple[Campaign, Path]:
    """ProtoQA's dev file imported as a finished campaign (``import_protoqa``'s service), with its
    expert clusters as the final clusterings when ``experts``; returns ``(campaign, path)``."""
    path = dataset("protoqa", "dev", "dev.crowdsourced.jsonl")
    campaign = protoqa_import(
        questions=protoqa_read(path),
        owner=owner,
        slug="protoqa-dev",
        filename=path.name,
        sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
    ).campaign
    if experts:
        expert_clusters_import(campaign=campaign, clusters=protoqa_clusters(path), by=owner)
    return campaign, path
