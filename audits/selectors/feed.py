"""What the dashboard polls: the latest snapshots and their history, how current the audit is, and
the JSON feed itself with its ETag (``dashboard_data``, ``dashboard_version``)."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from datetime import timedelta

from django.core.cache import cache
from django.utils import timezone

from annotation.models import Campaign
from audits.conf import audit_setting
from audits.engine.glossary import NUMBERS
from audits.engine.noise import NOISE_KEYS
from audits.models import AuditSnapshot, AuditStats
from audits.selectors.clustering import answers_overview, clustering_version
from audits.selectors.full import full_audit_skip_reason
from audits.selectors.stats import campaign_totals, labels_waiting
from audits.selectors.tables import agreement_rows, ambiguous_units, worker_table
from audits.selectors.truths import ground_truths_for_report, ground_truths_summary, ground_truths_version

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------- snapshots
def latest_snapshot(*, campaign: Campaign, kind: str = AuditSnapshot.Kind.QUICK) -> AuditSnapshot | None:
    return AuditSnapshot.objects.filter(campaign=campaign, kind=kind).order_by("-watermark").first()


def report_download(*, campaign: Campaign) -> tuple[AuditSnapshot, dict] | None:
    """The latest full snapshot and the report its downloads carry (page and API alike): the engine's
    report plus, when a researcher asked for them, the alternative ground truths of their own run.
    None before the first full audit."""
    snapshot = latest_snapshot(campaign=campaign, kind=AuditSnapshot.Kind.FULL)
    if snapshot is None:
        return None
    return snapshot, {**snapshot.data, **(ground_truths_for_report(campaign=campaign) or {})}


# The keys each point of the history series carries (besides its watermark and time): the series the
# dashboard's history chart draws, listed here once.
HISTORY_KEYS = NOISE_KEYS


HISTORY_POINTS = 300


def _thinned(*, campaign: Campaign, kind: str, max_points: int) -> list[int]:
    """The keys of at most ``max_points`` of the campaign's snapshots of a kind, oldest first.

    Thinned by a power-of-two stride over the snapshots in watermark order (every one, every second,
    every fourth…: the smallest stride that keeps at most ``max_points``), the newest always kept. A
    new snapshot leaves the points before the newest as they were until the stride doubles (saving a
    snapshot thins only the last seconds, ``HISTORY_RESOLUTION``), so a client that holds the series
    needs only its tail (:func:`dashboard_delta`)."""
    snapshots = AuditSnapshot.objects.filter(campaign=campaign, kind=kind)
    rows = list(snapshots.order_by("watermark", "pk").values_list("pk", flat=True))
    stride = 1
    while (len(rows) - 1) // stride + 2 > max_points:
        stride *= 2
    return rows[::stride] + rows[-1:] if len(rows) > max_points else rows


def snapshot_history(
    *, campaign: Campaign, kind: str = AuditSnapshot.Kind.QUICK, max_points: int = HISTORY_POINTS
) -> list[dict]:
    """The time series of the six numbers: at most ``max_points`` snapshots (:func:`_thinned`), oldest first."""
    chosen = _thinned(campaign=campaign, kind=kind, max_points=max_points)
    out = []
    for row in (
        AuditSnapshot.objects.filter(pk__in=set(chosen))
        .order_by("watermark", "pk")
        .values("watermark", "computed_at", *(f"data__{k}" for k in HISTORY_KEYS))
    ):
        point = {"watermark": row["watermark"], "computed_at": row["computed_at"].isoformat()}
        point.update({k: row[f"data__{k}"] for k in HISTORY_KEYS})
        out.append(point)
    return out


def agreement_point(agreement: dict | None) -> dict:
    """The agreement a history chart plots from one full report's ``agreement`` section: ``alpha``
    (Krippendorff's α, interval where the raw labels are numbers with more than two values, else
    nominal: ``alpha_level`` says which) and ``ac1`` (Gwet's AC1); None where undefined or not computed."""
    agreement = agreement or {}
    interval = agreement.get("alpha_interval") or {}
    level = "interval" if (interval.get("n_categories") or 0) > 2 else "nominal"
    return {
        "alpha": (agreement.get(f"alpha_{level}") or {}).get("value"),
        "alpha_level": level,
        "ac1": (agreement.get("gwet_ac1") or {}).get("value"),
    }


def agreement_history(*, campaign: Campaign, max_points: int = HISTORY_POINTS) -> list[dict]:
    """α and AC1 over time, one point per full audit (they are computed at the full audit's cadence,
    on the label matrix): ``watermark``, ``computed_at`` and :func:`agreement_point`; at most
    ``max_points`` (:func:`_thinned`), oldest first."""
    rows = _thinned(campaign=campaign, kind=AuditSnapshot.Kind.FULL, max_points=max_points)
    return [
        {
            "watermark": row["watermark"],
            "computed_at": row["computed_at"].isoformat(),
            **agreement_point(row["data__agreement"]),
        }
        for row in AuditSnapshot.objects.filter(pk__in=set(rows))
        .order_by("watermark", "pk")
        .values("watermark", "computed_at", "data__agreement")
    ]


def audit_status(*, campaign: Campaign, now=None) -> dict:
    """How current the audit is: labels, labels audited, and whether (and since when) it is stale.

    Stale = some label is not in the latest snapshot and the oldest such label is older than
    ``STALE_AFTER`` seconds (a running recomputation normally catches up well within that).
    """
    now = now or timezone.now()
    stats = AuditStats.objects.filter(campaign=campaign).first()
    totals = campaign_totals(campaign_id=campaign.pk)
    # Labels the quick run has not folded yet count as behind from their own time (controls and
    # excluded workers' labels among them, until the fold leaves them out of the audit's count).
    waiting, first_waiting = labels_waiting(campaign_id=campaign.pk)
    audited, audited_at = (stats.audited_labels, stats.audited_at) if stats else (0, None)
    behind = max(0, totals.n_labels - audited) + waiting
    folded_since = (totals.first_unaudited_at or audited_at) if totals.n_labels > audited else None
    since = min((t for t in (folded_since, first_waiting) if t is not None), default=None)
    stale = bool(behind and since is not None and (now - since) > timedelta(seconds=audit_setting("STALE_AFTER")))
    return {
        "labels": totals.n_labels + waiting,
        "audited_labels": audited,
        "behind": behind,
        "rebuilding": bool(stats and stats.needs_rebuild),
        "rebuilds": stats.rebuilds if stats else 0,
        "first_unaudited_at": since.isoformat() if since else None,
        "stale": stale,
        "stale_since": since.isoformat() if stale else None,
        "audited_at": audited_at.isoformat() if audited_at else None,
        "age_seconds": (now - audited_at).total_seconds() if audited_at else None,
    }


# ---------------------------------------------------------------------------------- the dashboard feed
FULL_SECTIONS = (
    "filters",
    "accuracy",
    "accuracy_summary",
    "noise_vs_accuracy",
    "worker_noise",
    "agreement",
    "partitions",
    "partitions_meta",
    "counts",
    "reasons",
    "computed_on",
    "notes",
    "unit_scale",  # a rating scale with a binarization map: the six numbers on the unit scale too
)
# The six numbers as the dashboard's charts name them (its cards take the rest from the glossary):
# the symbol with its subscript ("PN orig"), or the name where there is no symbol ("residual").
FEED_NUMBERS = tuple(
    {"key": m.key, "name": m.name, "short": f"{m.symbol} {m.sub}".strip() or m.name.lower()} for m in NUMBERS
)


def _summary_head(summary: dict | None) -> dict | None:
    """An accuracy summary without its list of underpowered workers (one entry per worker)."""
    return None if summary is None else {k: v for k, v in summary.items() if k != "underpowered"}


def _quality_head(quality: dict | None) -> dict | None:
    """A quick snapshot's worker quality without its rows (the workers table carries them)."""
    return None if quality is None else {k: v for k, v in quality.items() if k != "workers"}


def _snapshot_meta(snapshot: AuditSnapshot) -> dict:
    return {
        "watermark": snapshot.watermark,
        "computed_at": snapshot.computed_at.isoformat(),
        "duration_ms": round(snapshot.duration_ms, 1),
        "cpu_ms": round(snapshot.cpu_ms, 1),
    }


def free_text_feed(*, campaign: Campaign) -> dict | None:
    """A free-text campaign's answer noise for the dashboard (None for any other campaign): why it has
    no full audit, :func:`answers_overview`'s campaign summary (distributions, most divided prompts,
    ProtoQA's filter failures, by external id) and how far the clustering has come."""
    if campaign.schema != Campaign.Schema.FREE_TEXT:
        return None
    overview = answers_overview(campaign=campaign)
    rows, summary = overview["rows"], overview["summary"]
    most_divided = summary.most_divided if summary else []
    return {
        "skip_reason": full_audit_skip_reason(campaign),
        "n_prompts": len(rows),
        "n_answered": sum(row.n_answers > 0 for row in rows),
        "n_answers": sum(row.n_answers for row in rows),
        "n_proposed": sum(row.clusterings.proposal is not None for row in rows),
        "n_clustered": sum(row.clusterings.both_independent for row in rows),
        "n_adjudicated": overview["n_adjudicated"],
        # single: one researcher's save is final, and nobody clusters independently (no agreement)
        "clustering_protocol": overview["clustering_protocol"],
        "n_final": overview["n_final"],
        "mean_blanc": overview["mean_blanc"],
        "mean_adjusted_rand": overview["mean_adjusted_rand"],
        # None until some prompt has a clustering (proposed or final) to measure
        "distribution": summary.distribution if summary else None,
        "most_divided": [{"id": p, "entropy_bits": entropy, "top_share": top} for p, entropy, top in most_divided],
        "failing_filter": list(summary.failing_filter) if summary else [],
    }


def dashboard_version(*, campaign: Campaign, status: dict, have_full: int = -1) -> str:
    """A tag that changes whenever :func:`dashboard_data` would say something new (the feed's ETag).

    Built from what the feed is computed from: the latest quick and full snapshots (and when each
    was computed: a rerun at the same watermark, after a control label, brings new worker quality),
    the label and audit counters of ``status`` (:func:`audit_status`: labels, audited labels, a
    rebuild, staleness — which turns on by the clock alone), the campaign's own fields, its answer
    clusterings (``clustering_version``: a save moves a free-text campaign's noise without a label
    arriving) and the client's ``have_full``. It costs a few indexed reads besides the status, so an
    unchanged dashboard is answered without building the feed.
    """
    latest = {
        kind: AuditSnapshot.objects.filter(campaign=campaign, kind=kind)
        .order_by("-watermark")
        .values_list("pk", "watermark", "computed_at")
        .first()
        for kind in (AuditSnapshot.Kind.QUICK, AuditSnapshot.Kind.FULL)
    }
    parts = [
        campaign.title,
        campaign.k,
        campaign.schema,
        campaign.positive_text,
        campaign.negative_text,
        campaign.binarization,
        latest,
        ground_truths_version(campaign=campaign),
        clustering_version(campaign=campaign),
        have_full,
        [
            status[k]
            for k in ("labels", "audited_labels", "behind", "rebuilding", "rebuilds", "stale", "first_unaudited_at")
        ],
    ]
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


def dashboard_data(*, campaign: Campaign, have_full: int = -1, status: dict | None = None) -> dict:
    """Everything the dashboard shows, as JSON. The full report's sections are read and sent only
    when the client does not have that watermark yet (``have_full``), so polling stays light.
    ``status`` is :func:`audit_status`, when the caller has read it already (for the ETag)."""
    now = timezone.now()
    quick = latest_snapshot(campaign=campaign)
    numbers = (*NOISE_KEYS, "n_workers", "n_prompts", "n_labels")
    full = (
        AuditSnapshot.objects.filter(campaign=campaign, kind=AuditSnapshot.Kind.FULL)
        .order_by("-watermark")
        .values(
            "pk",
            "watermark",
            "computed_at",
            "duration_ms",
            "cpu_ms",
            "data__accuracy",
            "data__accuracy_summary",
            "data__accuracy_gold",
            "data__accuracy_gold_summary",
            *(f"data__{k}" for k in numbers),
        )
        .first()
    )
    truths = ground_truths_summary(campaign=campaign)
    full_out = None
    if full is not None:
        full_out = {
            "watermark": full["watermark"],
            "computed_at": full["computed_at"].isoformat(),
            "duration_ms": round(full["duration_ms"], 1),
            "cpu_ms": round(full["cpu_ms"], 1),
            "numbers": {k: full[f"data__{k}"] for k in numbers},
            "accuracy_summary": _summary_head(full["data__accuracy_summary"]),
            "accuracy_gold_summary": _summary_head(full["data__accuracy_gold_summary"]),
        }
        if full["watermark"] != have_full:
            data = AuditSnapshot.objects.values_list("data", flat=True).get(pk=full["pk"])
            full_out["report"] = {k: data.get(k) for k in FULL_SECTIONS}
            full_out["agreement"], full_out["agreement_note"] = agreement_rows(data.get("agreement"))
        accuracy = {k: full[f"data__{k}"] for k in ("accuracy", "accuracy_summary", "accuracy_gold")}
    return {
        "campaign": {"slug": campaign.slug, "title": campaign.title, "k": campaign.k, "schema": campaign.schema},
        "now": now.isoformat(),
        "numbers": FEED_NUMBERS,
        "status": status if status is not None else audit_status(campaign=campaign, now=now),
        "quick": (
            {**quick.data, "worker_quality": _quality_head(quick.data.get("worker_quality")), **_snapshot_meta(quick)}
            if quick
            else None
        ),
        "history": snapshot_history(campaign=campaign),
        # α and AC1 per full audit, for the history chart beside the six numbers (their own cadence)
        "agreement_history": agreement_history(campaign=campaign),
        "workers": worker_table(
            campaign=campaign,
            full=accuracy if full else None,
            straight_lining=quick.data.get("straight_lining") if quick else None,
            quality=quick.data.get("worker_quality") if quick else None,
            skill=truths["shown"]["skill"] if truths and truths["shown"] else None,
        ),
        "ambiguous": ambiguous_units(campaign=campaign),
        "full": full_out,
        "ground_truths": truths,
        "free_text": free_text_feed(campaign=campaign),
    }


# ---------------------------------------------------------------------------------- the delta feed
# ``data.json?since=<token>``: the feed's top-level keys are its pieces, each sent again only when it
# changed since the token the client got with its last answer (the heavy ones: the workers table, the
# history series, the full report). The history is sent as a tail when the client's series is still a
# prefix of the current one. Without ``since`` the feed is :func:`dashboard_data`, whole.
DELTA_PIECES = (
    "campaign",
    "numbers",
    "status",
    "quick",
    "history",
    "agreement_history",
    "workers",
    "ambiguous",
    "full",
    "ground_truths",
    "free_text",
)
_DIGEST_CHARS = 10
_TOKEN_PART = re.compile(
    rf"^(?P<piece>[a-z_]+):(?P<digest>[0-9a-f]{{{_DIGEST_CHARS}}})"
    rf"(?::(?P<n>[0-9]+):(?P<prefix>[0-9a-f]{{{_DIGEST_CHARS}}}))?$"
)
# The history points a token vouches for besides its digest: all but the last few, which thinning may
# still replace (the newest snapshot of each HISTORY_RESOLUTION window replaces the ones before it).
_HISTORY_UNSETTLED = 2


# Pieces that are lists of rows, by the field that names a row: sent as a patch (each row's changed
# fields, the rows' order) when the piece the client holds is still in the cache under its digest.
ROW_PIECES = {"workers": "worker"}
_HELD_SECONDS = 300


def _held_key(campaign: Campaign, piece: str, digest: str) -> str:
    return f"audits:dashboard:{campaign.pk}:{piece}:{digest}"


def _held(campaign: Campaign, piece: str, digest: str | None):
    """The piece a client holds, from the cache (None: not there, or the cache is unreachable)."""
    if digest is None:
        return None
    try:
        return cache.get(_held_key(campaign, piece, digest))
    except Exception:  # a dead cache costs bytes, never the answer
        logger.warning("dashboard delta: cache unreachable", exc_info=True)
        return None


def _hold(campaign: Campaign, piece: str, digest: str, value) -> None:
    try:
        cache.set(_held_key(campaign, piece, digest), value, timeout=_HELD_SECONDS)
    except Exception:
        logger.warning("dashboard delta: cache unreachable", exc_info=True)


_ABSENT = object()


def _row_patch(old: list[dict], new: list[dict], key: str) -> dict:
    """``{"key", "order": the rows' names in order, "rows": {name: the fields that differ from the
    held row, all of them for a new row}}``; a row that did not change is left out of ``rows``."""
    before = {row[key]: row for row in old}
    rows = {}
    for row in new:
        held = before.get(row[key], {})
        fields = {field: value for field, value in row.items() if held.get(field, _ABSENT) != value}
        if fields:
            rows[row[key]] = fields
    return {"key": key, "order": [row[key] for row in new], "rows": rows}


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:_DIGEST_CHARS]


def delta_token_parse(since: str) -> dict[str, tuple[str, int | None, str | None]]:
    """A token :func:`dashboard_delta` gave (``piece:digest`` parts, comma-separated; the history's
    with ``:n:digest`` of its first n points) as ``{piece: (digest, n, prefix digest)}``; the empty
    token (a client that has nothing yet) as ``{}``. Raises ValueError naming what is wrong."""
    known = {}
    for part in filter(None, since.split(",")):
        found = _TOKEN_PART.match(part)
        if found is None or found["piece"] not in DELTA_PIECES:
            raise ValueError(f"since: {part[:40]!r} is not a part of a token this feed gave")
        known[found["piece"]] = (found["digest"], int(found["n"]) if found["n"] else None, found["prefix"])
    return known


def dashboard_delta(*, campaign: Campaign, since: str, have_full: int = -1, status: dict | None = None) -> dict:
    """What changed in :func:`dashboard_data` since the client's token ``since``
    (:func:`delta_token_parse`; raises ValueError on a malformed one).

    ``{"now", "since": the new token, "changed": {piece: value} (the pieces whose digest differs from
    the token's), "history_tail": {"keep": n, "points": [...]} or absent}``: the client replaces each
    changed piece, and with a history tail keeps the first n points of its series and appends the
    points. The tail is sent when the first n points the token vouches for are still the first n of
    the series (their digest matches); else the history is a changed piece like any other. A row piece
    (``ROW_PIECES``: the workers table) whose held version the cache still has comes as
    ``"row_patches": {piece: _row_patch(...)}``: the client rebuilds the rows in that order, each from
    its held row and the fields sent."""
    known = delta_token_parse(since)
    data = dashboard_data(campaign=campaign, have_full=have_full, status=status)
    # The status's age moves with the clock alone (as "now" does): it does not make the status new.
    status = {k: v for k, v in data["status"].items() if k != "age_seconds"}
    digests = {piece: _digest(status if piece == "status" else data[piece]) for piece in DELTA_PIECES}
    changed = {piece: data[piece] for piece in DELTA_PIECES if known.get(piece, (None,))[0] != digests[piece]}
    out = {"now": data["now"]}
    history = data["history"]
    _, keep, prefix = known.get("history", (None, None, None))
    if "history" in changed and keep is not None and keep <= len(history) and _digest(history[:keep]) == prefix:
        del changed["history"]
        out["history_tail"] = {"keep": keep, "points": history[keep:]}
    for piece, key in ROW_PIECES.items():
        if piece not in changed:
            continue
        _hold(campaign, piece, digests[piece], data[piece])
        old = _held(campaign, piece, known.get(piece, (None,))[0])
        if old is not None:
            del changed[piece]
            out.setdefault("row_patches", {})[piece] = _row_patch(old, data[piece], key)
    settled = max(0, len(history) - _HISTORY_UNSETTLED)
    parts = [f"{piece}:{digests[piece]}" for piece in DELTA_PIECES]
    parts[DELTA_PIECES.index("history")] += f":{settled}:{_digest(history[:settled])}"
    out["since"] = ",".join(parts)
    out["changed"] = changed
    return out
