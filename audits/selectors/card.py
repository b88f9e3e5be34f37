"""The instrument card (issue 13): one page per campaign that reports the benchmark as a measuring
instrument (Welty, Paritosh & Aroyo 2019, "Metrology for AI", arXiv:1911.01875) — its procedure,
precision, repeatability, reproducibility, resolution and noise — as a JSON-serialisable dict that
the page and its Markdown, JSON and HTML exports all render, so they cannot disagree.

Everything is computed on the request from the campaign's label matrix (milliseconds at 10,000
labels: ``benchmarks/instrument_card.py``), except the bootstrap intervals, which come from the
newest finished ``BootstrapRun`` (``audits.services.bootstrap``).
"""

from __future__ import annotations

import hashlib

from django.db.models import Count, Max, Min, Q
from django.utils import timezone

from annotation.channels.models import Publication
from annotation.models import Campaign, Label, Participation, Prompt, QualityRule
from annotation.selectors import campaigns_visible_to
from audits.conf import audit_setting
from audits.engine.agreement import krippendorff_alpha
from audits.engine.dispersion import item_dispersion
from audits.engine.glossary import NUMBERS
from audits.engine.instrument import reproducibility
from audits.engine.noise import noise_audit
from audits.engine.systems import per_rater_scores
from audits.engine.variance import resolution, variance_components
from audits.models import BootstrapRun, System
from audits.selectors.full import (
    campaign_label_matrices,
    campaign_label_matrix,
    unit_scale_numbers,
    unit_scale_view,
    value_scale,
)
from audits.selectors.systems import SINGLE_ANNOTATOR, leaderboard

INSTRUMENT_NOTE = (
    "The instrument is the procedure: schema, scale, instructions, k rule, worker pool and filters. "
    "Changed instructions (another SHA-256) make a new instrument, whose numbers are not comparable with "
    "this card's."
)
MOVED = 10  # prompts listed under "moved most"


def card_alpha_level(campaign: Campaign) -> str:
    """Krippendorff's α level on the card: nominal for binary answers, interval for rating scales, on
    their raw values whatever the step (a rating is a number: 7.5 lies as far from 7 as 3 from 2.5).
    Whole-point scales stay interval too: the card reproduces the Metrology paper's interval α on
    WordSim-353's 0–10 whole points (tests/audits/live/test_card_live.py); the report lists the
    ordinal α beside it (``audits.engine.agreement``)."""
    return "nominal" if campaign.schema == Campaign.Schema.BINARY else "interval"


def audit_scale_text(campaign: Campaign) -> str:
    """The scale the audit's six numbers are on, in words (the card's and the dashboard's label)."""
    if campaign.schema == Campaign.Schema.BINARY:
        return f"0/1 ({campaign.negative_text} = 0, {campaign.positive_text} = 1)"
    if campaign.binarization:
        return "0/1, binarized by the map"
    return f"unit scale, (value − {campaign.scale_min}) / ({campaign.scale_max} − {campaign.scale_min})"


def card_alpha_options(campaign: Campaign, matrix) -> dict:
    """The α the card reports (and the bootstrap resamples): its level, on the raw labels, or on the
    scaled ones when the raw labels are categories without numbers."""
    return {"alpha_level": card_alpha_level(campaign), "values": "scaled" if matrix.raw_levels is not None else "raw"}


def _iso(when) -> str | None:
    return when.isoformat() if when else None


# ---------------------------------------------------------------------------------- procedure
def _scale(campaign: Campaign) -> dict:
    if campaign.schema == Campaign.Schema.BINARY:
        return {"text": f"{campaign.negative_text} = 0, {campaign.positive_text} = 1", "binarization": None}
    if campaign.schema == Campaign.Schema.FREE_TEXT:
        limits = f"{campaign.answer_min_length}–{campaign.answer_max_length}"
        return {"text": f"free-text answers of {limits} characters", "binarization": None}
    anchors = campaign.scale_anchors or []
    step = campaign.label_schema.step
    text = f"{campaign.scale_min}–{campaign.scale_max}"
    text += ", continuous" if step is None else ("" if step == 1 else f" in steps of {step.normalize():f}")
    if anchors:
        text += f" ({anchors[0]} … {anchors[-1]})"
    return {"text": text, "anchors": anchors, "binarization": dict(campaign.binarization or {})}


def _clustering(campaign: Campaign) -> dict | None:
    """Free text: how its answer clusters became final (the campaign's clustering protocol)."""
    if campaign.schema != Campaign.Schema.FREE_TEXT:
        return None
    if campaign.clustering_protocol == Campaign.ClusteringProtocol.SINGLE:
        text = f"one researcher's saved clustering of a prompt is final ({SINGLE_ANNOTATOR})"
    else:
        text = "two researchers cluster each prompt independently, a third adjudicates (agreement: BLANC)"
    return {"protocol": campaign.clustering_protocol, "text": text}


def _procedure(campaign: Campaign) -> dict:
    prompts = Prompt.objects.filter(campaign=campaign).aggregate(
        prompts=Count("pk", filter=Q(is_control=False)), controls=Count("pk", filter=Q(is_control=True))
    )
    labels = Label.objects.filter(campaign=campaign).aggregate(
        all=Count("pk"),
        void=Count("pk", filter=Q(voided_at__isnull=False)),
        control=Count("pk", filter=Q(voided_at__isnull=True, is_control=True)),
        first=Min("created_at"),
        last=Max("created_at"),
    )
    audited = Label.objects.audited().filter(campaign=campaign)
    n_audited = audited.count()
    pool = Participation.objects.filter(campaign=campaign).aggregate(
        joined=Count("pk"),
        excluded=Count("pk", filter=Q(excluded_at__isnull=False)),
        blocked=Count("pk", filter=Q(blocked_at__isnull=False)),
    )
    channels = list(
        audited.values("worker__channel")
        .annotate(workers=Count("worker", distinct=True), labels=Count("pk"))
        .order_by("-labels", "worker__channel")
    )
    rules = QualityRule.objects.filter(campaign=campaign).order_by("created_at")
    publications = Publication.objects.filter(campaign=campaign).order_by("created_at")
    adaptive = campaign.k_max is not None
    return {
        "schema": campaign.schema,
        "schema_name": campaign.get_schema_display(),
        "scale": _scale(campaign),
        "clustering": _clustering(campaign),
        "k": campaign.k,
        "k_max": campaign.k_max,
        "k_rule": campaign.k_rule,
        "adaptive": (
            f"from k = {campaign.k} up to {campaign.k_max} labels per prompt: a prompt stops once the posterior "
            f"probability that its majority is the crowd's reaches {campaign.stop_confidence:g}"
            if adaptive
            else None
        ),
        "instructions_sha256": hashlib.sha256(campaign.instructions.encode("utf-8")).hexdigest(),
        "instructions_chars": len(campaign.instructions),
        "instrument_note": INSTRUMENT_NOTE,
        "workers": {
            **pool,
            "labeling": sum(c["workers"] for c in channels),
            "max_labels_per_worker": campaign.max_labels_per_worker,
            "control_rate": campaign.control_rate,
            "control_first": campaign.control_first,
            "quality_rules": [{"rule": str(r), "active": r.active} for r in rules],
        },
        "channels": [
            {"channel": c["worker__channel"], "workers": c["workers"], "labels": c["labels"]} for c in channels
        ],
        "publications": [
            {
                "kind": p.get_kind_display(),
                "channel": p.channel,
                "status": p.status,
                "published_at": _iso(p.published_at),
            }
            for p in publications
        ],
        "dates": {
            "created": _iso(campaign.created_at),
            "launched": _iso(campaign.launched_at),
            "closed": _iso(campaign.closed_at),
            "first_label": _iso(labels["first"]),
            "last_label": _iso(labels["last"]),
        },
        "counts": {
            "prompts": prompts["prompts"],
            "controls": prompts["controls"],
            "labels": labels["all"],
            "void": labels["void"],
            "control_labels": labels["control"],
            "excluded_workers_labels": labels["all"] - labels["void"] - labels["control"] - n_audited,
            "audited": n_audited,
        },
    }


# ---------------------------------------------------------------------------------- the bootstrap
_RUN_FIELDS = (
    "pk",
    "status",
    "resamples",
    "seed",
    "done_resamples",
    "watermark",
    "requested_at",
    "started_at",
    "computed_at",
    "duration_ms",
    "error",
)


def _run_meta(row: dict) -> dict:
    return {
        "id": row["pk"],
        "status": row["status"],
        "resamples": row["resamples"],
        "seed": row["seed"],
        "done_resamples": row["done_resamples"],
        "watermark": row["watermark"],
        "requested_at": _iso(row["requested_at"]),
        "started_at": _iso(row["started_at"]),
        "computed_at": _iso(row["computed_at"]),
        "duration_ms": round(row["duration_ms"], 1),
        "error": row["error"],
    }


def bootstrap_summary(*, campaign: Campaign) -> dict:
    """The card's view of the bootstrap runs: ``latest`` (the newest run, maybe still waiting or
    resampling, with its progress) and ``shown`` (the newest finished one, with its intervals under
    ``data``); each None when there is none."""
    runs = BootstrapRun.objects.filter(campaign=campaign).order_by("-requested_at", "-pk")
    latest = runs.values(*_RUN_FIELDS).first()
    shown = runs.filter(status=BootstrapRun.Status.DONE).values(*_RUN_FIELDS, "data").first()
    return {
        "latest": _run_meta(latest) if latest else None,
        "shown": {**_run_meta(shown), "data": shown["data"]} if shown else None,
    }


def bootstrap_run(*, campaign: Campaign, run_id: int) -> dict | None:
    """One bootstrap run of the campaign as the API polls it: the card's fields (progress in
    ``done_resamples`` of ``resamples``) and, under ``data``, its intervals once done; None when the
    campaign has no such run."""
    row = BootstrapRun.objects.filter(campaign=campaign, pk=run_id).values(*_RUN_FIELDS, "data").first()
    return None if row is None else {**_run_meta(row), "data": row["data"]}


# ---------------------------------------------------------------------------------- reproducibility
def comparable_campaigns(*, campaign: Campaign, user) -> list[Campaign]:
    """The other campaigns ``user`` may see that share prompts with ``campaign`` (by external id), for
    the reproducibility picker, newest first."""
    ids = Prompt.objects.filter(campaign=campaign, is_control=False).values("external_id")
    shared = Prompt.objects.filter(is_control=False, external_id__in=ids).values("campaign_id")
    return list(
        campaigns_visible_to(user=user)
        .exclude(pk=campaign.pk)
        .exclude(schema=Campaign.Schema.FREE_TEXT)
        .filter(pk__in=shared)
        .order_by("-created_at")
    )


def _reproducibility(campaign: Campaign, matrix, other: Campaign) -> dict:
    second, watermark = campaign_label_matrix(campaign=other)
    values = "raw" if matrix.raw_levels is None and second.raw_levels is None else "scaled"
    result = reproducibility(
        matrix, second, level=card_alpha_level(campaign), ddof=audit_setting("DDOF"), top=MOVED, values=values
    )
    return {
        "other": {"slug": other.slug, "title": other.title, "watermark": watermark},
        "values": values,
        **result.to_dict(),
    }


# ---------------------------------------------------------------------------------- the card
def _per_rater(campaign: Campaign, matrix):
    """The per-rater scores of the campaign's first two systems (by name), for the systems' resolution."""
    predictions = [s.predictions for s in System.objects.filter(campaign=campaign).order_by("name")[:2]]
    if not predictions:
        return None
    try:
        return per_rater_scores(matrix, *predictions)
    except ValueError:
        return None


def instrument_card(*, campaign: Campaign, compare: Campaign | None = None) -> dict:
    """The instrument card of ``campaign`` (see the module docstring), with reproducibility against
    ``compare`` when given. ``unavailable`` says why the measuring sections are missing (no audited
    labels yet, a free-text campaign); the procedure is always there."""
    card: dict = {
        "campaign": {"slug": campaign.slug, "title": campaign.title, "status": campaign.status},
        "computed_at": timezone.now().isoformat(),
        "procedure": _procedure(campaign),
        "bootstrap": bootstrap_summary(campaign=campaign),
        "unavailable": None,
    }
    view = unit_scale_view(campaign)  # a rating scale with a map: its unit scale as a second view
    try:
        scales = [value_scale(campaign)] + ([view] if view else [])
        matrices, watermark = campaign_label_matrices(campaign=campaign, scales=scales)
    except ValueError as error:  # no label matrix (free-text answers)
        card["unavailable"] = str(error)
        return card
    matrix = matrices[0]
    card["watermark"] = watermark
    if matrix.n_labels == 0:
        card["unavailable"] = "No audited labels yet: the card fills in as labels arrive."
        return card
    ddof = audit_setting("DDOF")
    categorical = campaign.schema == Campaign.Schema.BINARY or matrix.raw_levels is not None
    options = card_alpha_options(campaign, matrix)
    level, values = options["alpha_level"], options["values"]
    alpha = krippendorff_alpha(matrix, level=level, values=values)
    shown = card["bootstrap"]["shown"]
    audit = noise_audit(matrix, ddof=ddof)
    # The six numbers are on the audit's scale; everything else measures the raw labels ("values").
    raw = f"raw labels ({_scale(campaign)['text']})" if values == "raw" else "0/1 labels"
    card.update(
        {
            "n_labels": matrix.n_labels,
            "n_prompts": matrix.n_prompts,
            "n_workers": matrix.n_workers,
            "precision": item_dispersion(matrix, categorical=categorical, ddof=ddof).to_dict(),
            "repeatability": {
                "alpha": {"level": level, "values": values, **alpha.to_dict()},
                "interval": shown["data"]["alpha"] if shown else None,
            },
            "reproducibility": _reproducibility(campaign, matrix, compare) if compare is not None else None,
            "resolution": resolution(matrix, per_rater=_per_rater(campaign, matrix), values=values),
            "scales": {
                "noise": audit_scale_text(campaign),
                "precision": raw,
                "repeatability": raw,
                "resolution": raw,
                "variance_components": raw,
                "systems": raw,
            },
            "noise_unit_scale": unit_scale_numbers(matrices[1]) if view else None,
            "noise": {
                "sd": "sample" if ddof == 1 else "population",
                "scale": audit_scale_text(campaign),
                "numbers": [
                    {"key": m.key, "name": m.name, "value": getattr(audit, m.key), "reason": audit.reasons.get(m.key)}
                    for m in NUMBERS
                ],
                "intervals": shown["data"]["noise"] if shown else None,
            },
            "variance_components": variance_components(matrix, values=values),
            # the leaderboard's own dict (audits.selectors.systems), on the same matrix
            "systems": leaderboard(campaign=campaign, matrix=matrix),
        }
    )
    return card
