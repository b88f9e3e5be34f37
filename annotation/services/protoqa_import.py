"""Importing ProtoQA's crowdsourced answers as a finished free-text campaign (``import_protoqa``)."""

import random
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from annotation.models import Campaign, ImportBatch, Label, Lease, Participation, Prompt, Slot, Worker
from annotation.models.campaigns import MAX_ANSWER_LENGTH
from annotation.protoqa_files import ProtoQAFileError, ProtoQAQuestion
from annotation.schemas import LabelValueError, answer_normalize
from annotation.services.errors import ServiceError
from annotation.services.prompts import BULK_BATCH
from audits.hook import stats_rebuild

#: ProtoQA's respondents are known by no id: each answer gets a worker of its own on this channel.
PROTOQA_CHANNEL = "protoqa"
PROTOQA_INSTRUCTIONS = (
    "Answers collected by ProtoQA (Boratko et al., EMNLP 2020, CC BY 4.0): about 100 crowd workers per "
    "question each named one thing."
)


@dataclass(frozen=True)
class ProtoQAImport:
    campaign: Campaign
    n_prompts: int
    n_labels: int
    created: bool  # False: this file was in the campaign already, nothing was written


def protoqa_import(*, questions: list[ProtoQAQuestion], owner, slug: str, filename: str, sha256: str) -> ProtoQAImport:
    """A closed free-text campaign ``slug`` holding the questions as prompts and one label per raw answer
    occurrence, each from a synthetic worker of its own (``<qid>.<n>``): ProtoQA does not say which
    respondent gave which answers, and one worker per answer links no two answers that the data
    does not link. k is the most answers any question has; a question with fewer keeps its free
    slots (it got fewer answers than the campaign's k, as the data says).

    Everything is checked first (each answer as a worker's would be: ``LabelSchema.clean``), then
    written in one transaction: all or nothing; then the audit's statistics are built from the new
    labels (``audits.hook.stats_rebuild``, a transaction of its own). A second run with the same file is
    a no-op (``created`` False); a slug taken by another campaign or file is refused (ServiceError).
    """
    answers = _answers_checked(questions)
    longest = max(len(a) for texts in answers.values() for a in texts)
    campaign = Campaign(
        owner=owner,
        title=f"ProtoQA {filename}",
        slug=slug,
        instructions=PROTOQA_INSTRUCTIONS,
        schema=Campaign.Schema.FREE_TEXT,
        k=max(q.n_answers for q in questions),
        answer_max_length=max(Campaign._meta.get_field("answer_max_length").default, longest),
    )
    with transaction.atomic(durable=True):
        existing = Campaign.objects.select_for_update().filter(slug=slug).first()
        if existing is not None:
            batch = existing.imports.filter(sha256=sha256).first()
            if batch is None:
                raise ServiceError(f"The slug {slug!r} belongs to another campaign; choose another with --slug.")
            return ProtoQAImport(existing, batch.n_prompts, existing.labels.count(), created=False)
        campaign.full_clean()  # inside: the slug's uniqueness is checked with the row lock above
        now = timezone.now()
        campaign.status, campaign.launched_at, campaign.closed_at = Campaign.Status.CLOSED, now, now
        campaign.save()
        batch = ImportBatch.objects.create(
            campaign=campaign, filename=filename[:255], sha256=sha256, n_prompts=len(questions), created_by=owner
        )
        prompts = Prompt.objects.bulk_create(
            [
                Prompt(campaign=campaign, batch=batch, external_id=q.qid, text=q.text, n_labels=q.n_answers)
                for q in questions
            ],
            batch_size=BULK_BATCH,
        )
        workers = _workers_create(campaign, questions)
        slots = _slots_create(campaign, prompts, questions)
        n_labels = _answers_place(campaign, prompts, questions, answers, slots, workers, now)
    # The audit's statistics are built from the labels now: they were never submitted (no mark for the
    # quick run's fold), and the campaign is closed, so no label will ever trigger it.
    stats_rebuild(campaign_id=campaign.pk)
    return ProtoQAImport(campaign, len(prompts), n_labels, created=True)


# The import's steps, in the order protoqa_import takes them.


def _answers_checked(questions: list[ProtoQAQuestion]) -> dict[str, list[str]]:
    """Each question's answers, one per occurrence, normalised and checked as a worker's would be;
    raises ProtoQAFileError naming every bad question."""
    answers, errors = {}, []
    for q in questions:
        try:
            answers[q.qid] = [answer_normalize(a) for a, n in q.raw.items() for _ in range(n)]
        except LabelValueError as exc:
            errors.append((q.line, f"question {q.qid!r}: {exc}"))
            continue
        if not all(answers[q.qid]):
            errors.append((q.line, f"question {q.qid!r} has an empty answer"))
    if errors:
        raise ProtoQAFileError(errors)
    longest = max(len(a) for texts in answers.values() for a in texts)
    if longest > MAX_ANSWER_LENGTH:
        raise ProtoQAFileError([(0, f"an answer has {longest} characters; at most {MAX_ANSWER_LENGTH} are allowed")])
    return answers


def _workers_create(campaign: Campaign, questions: list[ProtoQAQuestion]) -> dict[str, int]:
    """One synthetic worker per answer (``<qid>.<n>``), in the campaign; returns their ids by name."""
    ids = [f"{q.qid}.{n}" for q in questions for n in range(1, q.n_answers + 1)]
    Worker.objects.bulk_create(
        [Worker(channel=PROTOQA_CHANNEL, external_id=i) for i in ids], batch_size=BULK_BATCH, ignore_conflicts=True
    )
    workers = _workers_by_id(ids)
    Participation.objects.bulk_create(
        [Participation(campaign=campaign, worker_id=workers[i], n_labels=1) for i in ids], batch_size=BULK_BATCH
    )
    return workers


def _slots_create(campaign: Campaign, prompts: list[Prompt], questions: list[ProtoQAQuestion]) -> list[Slot]:
    """k slots per prompt, drawn as an import draws them; the first as many as it has answers filled."""
    k = campaign.k
    return Slot.objects.bulk_create(
        [
            Slot(
                campaign=campaign,
                prompt=p,
                index=i,
                rand=random.random(),
                priority=q.n_answers,
                filled=i < q.n_answers,
            )
            for p, q in zip(prompts, questions)
            for i in range(k)
        ],
        batch_size=BULK_BATCH,
    )


def _answers_place(campaign, prompts, questions, answers, slots, workers, now) -> int:
    """Each answer as its worker's submitted lease and counted label in one of the prompt's slots, as
    ``label_submit`` would have stored it; returns the number of labels."""
    k = campaign.k
    expires = now + timedelta(seconds=campaign.lease_seconds)
    placed = [
        (prompt, slots[number * k + n], workers[f"{q.qid}.{n + 1}"], text)
        for number, (prompt, q) in enumerate(zip(prompts, questions))
        for n, text in enumerate(answers[q.qid])
    ]
    leases = Lease.objects.bulk_create(
        [
            Lease(
                campaign=campaign,
                prompt=p,
                worker_id=w,
                slot=s,
                status=Lease.Status.SUBMITTED,
                created_at=now,
                expires_at=expires,
            )
            for p, s, w, _ in placed
        ],
        batch_size=BULK_BATCH,
    )
    Slot.objects.bulk_update(
        [_leased(s, lease) for (_, s, _, _), lease in zip(placed, leases)], ["lease"], batch_size=BULK_BATCH
    )
    Label.objects.bulk_create(
        [
            Label(
                campaign=campaign,
                prompt=p,
                worker_id=w,
                lease=lease,
                slot=s,
                value=text,  # as label_submit stores it: normalised, checked above
                client_token=f"protoqa:{campaign.pk}:{lease.pk}",
                leased_at=now,
                created_at=now,
            )
            for (p, s, w, text), lease in zip(placed, leases)
        ],
        batch_size=BULK_BATCH,
    )
    return len(placed)


def _workers_by_id(ids: list[str]) -> dict[str, int]:
    found = {}
    for start in range(0, len(ids), 900):  # stay under SQLite's bound-parameter limit
        rows = Worker.objects.filter(channel=PROTOQA_CHANNEL, external_id__in=ids[start : start + 900])
        found.update(rows.values_list("external_id", "pk"))
    return found


def _leased(slot: Slot, lease: Lease) -> Slot:
    slot.lease = lease
    return slot
