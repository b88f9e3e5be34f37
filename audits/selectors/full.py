"""The full audit's reads: the campaign's label matrix, whether the full audit is due again, and the
engine's report on the matrix (and its Parquet form)."""

from __future__ import annotations

import dataclasses
from datetime import datetime

import numpy as np
from django.utils import timezone

from annotation.models import Campaign, Label, Prompt, Worker
from annotation.models.prompts import OPTION_BASE
from annotation.models.workers import public_worker_id
from annotation.parquet import parquet_chunks
from audits.conf import audit_setting
from audits.engine.matrix import LabelMatrix
from audits.engine.noise import noise_audit
from audits.engine.report import full_report
from audits.engine.report_table import REPORT_COLUMNS, report_rows
from audits.models import AuditSnapshot

#: Why a free-text campaign has no full audit: its labels are answers, not numbers on a scale, so
#: there is no label matrix; its noise is measured on the answers' clusters instead.
FREE_TEXT_SKIP_REASON = "free-text answers are audited by their clusters"


def full_audit_skip_reason(campaign: Campaign) -> str | None:
    """Why the campaign's full audit never runs (for the dashboard to state), or None when it does."""
    return FREE_TEXT_SKIP_REASON if campaign.schema == Campaign.Schema.FREE_TEXT else None


def value_scale(campaign: Campaign) -> dict:
    """How the audit scales the campaign's raw values, as ``LabelMatrix.from_triples`` takes it: the
    binarization map (binary answers are 1/0), or a rating scale's ``rescale=(min, max)``, the unit
    scale ``(value − min) / (max − min)`` of noise-audit.md ("The label matrix")."""
    schema = campaign.label_schema
    if schema.binarization:
        return {"binarize": dict(schema.binarization)}
    return {"rescale": (schema.scale_min, schema.scale_max)}


def unit_scale_view(campaign: Campaign) -> dict | None:
    """The second view of a rating scale that has a binarization map: its unit scale (``value_scale``'s
    keywords); None when the audit's one view is already the unit scale or the schema has no scale."""
    if campaign.schema not in (Campaign.Schema.RATING, Campaign.Schema.OPTION_RATING) or not campaign.binarization:
        return None
    return {"rescale": (campaign.scale_min, campaign.scale_max)}


def unit_name(external_id: str, option: int) -> str:
    """The unit's name in exports and reports: the prompt's id, or ``<id>#<option>``."""
    return external_id if option == 0 else f"{external_id}#{option}"


# ---------------------------------------------------------------------------------- the matrix
def campaign_label_matrix(*, campaign: Campaign, scale: dict | None = None) -> tuple[LabelMatrix, int]:
    """The campaign's label matrix (through the engine's ``LabelMatrix.from_triples``) and its
    watermark (the number of label rows it was built from): its audited labels
    (``Label.objects.audited()``: counted, not controls, no worker excluded from the audit).

    The labels come from one query, so they are a consistent set whatever is being submitted
    meanwhile. Units are named as in the label export (``<external id>`` or ``<external id>#<n>``);
    workers by their public id (``<channel>:<id>``); gold comes from the prompts; raw values are
    scaled by ``scale`` (default ``value_scale``: the binarization map, whose left-out values are
    counted invalid, or the unit scale). A free-text campaign has no label matrix
    (``full_audit_skip_reason``): ValueError.
    """
    (matrix,), watermark = campaign_label_matrices(campaign=campaign, scales=[scale or value_scale(campaign)])
    return matrix, watermark


def campaign_label_matrices(*, campaign: Campaign, scales: list[dict]) -> tuple[list[LabelMatrix], int]:
    """``campaign_label_matrix`` under each of several ``scales`` (two views of one rating scale), all
    from the same labels (one query) and so with one watermark."""
    if (reason := full_audit_skip_reason(campaign)) is not None:
        raise ValueError(f"Campaign {campaign.slug} has no label matrix: {reason}.")
    rows = list(Label.objects.audited().filter(campaign=campaign).values_list("worker_id", "prompt_id", "value"))
    return [_label_matrix(campaign, rows, scale) for scale in scales], len(rows)


def _label_matrix(campaign: Campaign, rows: list, scale: dict) -> LabelMatrix:
    watermark = len(rows)  # the rows are a list (np.fromiter's count)
    per_option = campaign.schema == Campaign.Schema.OPTION_RATING
    prompts = Prompt.objects.filter(campaign=campaign, is_control=False)
    prompts = {
        pk: (ext, gold, group) for pk, ext, gold, group in prompts.values_list("pk", "external_id", "gold", "group")
    }
    if per_option:
        workers, units, values, prompt_of = [], [], [], []
        for worker_id, prompt_id, value in rows:
            for number, raw in enumerate(value, start=1):
                workers.append(worker_id)
                units.append(prompt_id * OPTION_BASE + number)
                values.append(raw)
                prompt_of.append(prompt_id)
        gold = {}
        for pk, (_, g, _) in prompts.items():
            if isinstance(g, list):
                for number, raw in enumerate(g, start=1):
                    if raw is not None:
                        gold[pk * OPTION_BASE + number] = raw
    else:
        workers = np.fromiter((r[0] for r in rows), dtype=np.int64, count=watermark)
        units = np.fromiter((r[1] * OPTION_BASE for r in rows), dtype=np.int64, count=watermark)
        values = np.array([r[2] for r in rows]) if rows else np.zeros(0)
        gold = {pk * OPTION_BASE: g for pk, (_, g, _) in prompts.items() if g is not None and not isinstance(g, list)}
        prompt_of = [r[1] for r in rows]
    # Each label carries its prompt's group (the import's theme or context column), for the systems'
    # per-group scores; a campaign without groups has none.
    groups = [prompts[pk][2] for pk in prompt_of] if any(g for _, _, g in prompts.values()) else None
    matrix = LabelMatrix.from_triples(
        np.asarray(workers, dtype=np.int64),
        np.asarray(units, dtype=np.int64),
        values,
        gold=gold or None,
        group=groups,
        **scale,
        source=f"campaign {campaign.slug}",
    )
    names = dict(
        (pk, public_worker_id(channel, ext))
        for pk, channel, ext in Worker.objects.filter(participations__campaign=campaign).values_list(
            "pk", "channel", "external_id"
        )
    )
    missing = [int(w) for w in matrix.worker_ids if int(w) not in names]
    if missing:
        names.update(
            (pk, f"{c}:{e}")
            for pk, c, e in Worker.objects.filter(pk__in=missing).values_list("pk", "channel", "external_id")
        )
    worker_ids = np.array([names[int(w)] for w in matrix.worker_ids], dtype=object)
    prompt_ids = np.array(
        [unit_name(prompts[int(u) // OPTION_BASE][0], int(u) % OPTION_BASE) for u in matrix.prompt_ids], dtype=object
    )
    return dataclasses.replace(matrix, worker_ids=worker_ids, prompt_ids=prompt_ids)


# ---------------------------------------------------------------------------------- the full audit
def full_audit_due(campaign_id: int, n_labels: int, now: datetime) -> bool:
    """Whether the campaign's full audit should run again (the slow cadence).

    Due when labels arrived since the last full run and either enough of them arrived
    (``FULL_EVERY_LABELS``, or ``FULL_GROWTH`` times the labels that run saw) or that run is older
    than ``FULL_MAX_AGE`` seconds; never sooner than ``FULL_MIN_INTERVAL`` seconds, nor than
    ``FULL_DUTY`` times the last run's duration after it (so full runs take at most 1/FULL_DUTY of
    a worker's time however big the campaign grows). Never for a free-text campaign
    (``full_audit_skip_reason``).
    """
    if Campaign.objects.filter(pk=campaign_id, schema=Campaign.Schema.FREE_TEXT).exists():
        return False
    last = (
        AuditSnapshot.objects.filter(campaign_id=campaign_id, kind=AuditSnapshot.Kind.FULL)
        .order_by("-watermark")
        .values("watermark", "computed_at", "duration_ms")
        .first()
    )
    if last is None:
        return n_labels > 0
    new = n_labels - last["watermark"]
    if new <= 0:
        return False
    age = (now - last["computed_at"]).total_seconds()
    if age < max(audit_setting("FULL_MIN_INTERVAL"), audit_setting("FULL_DUTY") * last["duration_ms"] / 1000):
        return False
    enough = new >= min(audit_setting("FULL_EVERY_LABELS"), max(1.0, audit_setting("FULL_GROWTH") * last["watermark"]))
    return enough or age >= audit_setting("FULL_MAX_AGE")


def full_report_data(
    *, campaign: Campaign, matrix: LabelMatrix, watermark: int, unit_matrix: LabelMatrix | None = None
) -> dict:
    """The engine's full report (``audits.engine.report.full_report``) as a JSON-serialisable dict, with
    both volume-filter sweeps, and the watermark under ``computed_on``. ``unit_matrix``: the same labels
    on the unit scale, for a rating scale whose report is binarized (``unit_scale_view``); its six
    numbers go under ``unit_scale`` (the top-level ones stay the binarized view)."""
    report = full_report(
        matrix,
        ddof=audit_setting("DDOF"),
        sweeps=("min", "max"),
        k=campaign.k,
        campaign=campaign.slug,
        computed_at=timezone.now(),
        # Adaptive k: the partitions per final k as well (``partitions`` stays at the least k).
        k_range=(campaign.k, campaign.k_max) if campaign.k_max else None,
    ).to_dict()
    report["computed_on"]["watermark"] = watermark
    if unit_matrix is not None:
        report["unit_scale"] = unit_scale_numbers(unit_matrix)
    return report


def unit_scale_numbers(matrix: LabelMatrix) -> dict:
    """The six numbers of a rating scale on its unit scale, ``(value − min) / (max − min)``, labeled so:
    the second view of a campaign with a binarization map (noise-audit.md, "The label matrix")."""
    lo, hi = matrix.scale.rescale
    return {
        "view": "unit scale",
        "scale": f"(value − {lo:g}) / ({hi:g} − {lo:g})",
        **noise_audit(matrix, ddof=audit_setting("DDOF")).to_dict(),
    }


def report_parquet(report: dict) -> bytes:
    """A report dict as a Parquet file: one row per leaf (``audits.engine.report_table``). Built whole,
    not streamed: a report is small, and a file of known length can be served with its size."""
    return b"".join(parquet_chunks(report_rows(report), REPORT_COLUMNS))
