"""What other apps read of the live audit's latest state: whether it has seen a worker's labels and
applied the campaign's quality rules to them (the gate a panel's automatic approval waits for, so a
spammer who fills their quota before a rule fires is not approved in that gap:
``annotation.channels.services.prolific``), the worker table it last judged, each worker's numbers and
flags as the dashboard shows them (the workers pages), and its newest numbers (the webhooks'
thresholds)."""

from annotation.models import Campaign, Label
from audits.engine.noise import NOISE_KEYS
from audits.models import AuditSnapshot
from audits.selectors.tables import worker_table
from audits.selectors.truths import ground_truths_summary


def _latest_table(campaign_id: int) -> list[dict] | None:
    """The worker table of the newest quick snapshot whose rules were applied; None before any."""
    snapshot = (
        AuditSnapshot.objects.filter(
            campaign_id=campaign_id, kind=AuditSnapshot.Kind.QUICK, rules_applied_at__isnull=False
        )
        .order_by("-watermark")
        .values("data")
        .first()
    )
    if snapshot is None:
        return None
    return (snapshot["data"].get("worker_quality") or {}).get("workers") or []


def worker_numbers(*, campaign_id: int) -> list[dict]:
    """Each worker's numbers as the live audit last judged them (``WorkerRow.numbers``)."""
    return _latest_table(campaign_id) or []


def worker_audit_table(*, campaign: Campaign) -> dict:
    """Each worker's numbers and flags as the dashboard's workers table has them
    (:func:`audits.selectors.tables.worker_table`: the newest quick snapshot's straight-lining and worker
    quality, the newest full report's accuracy, the newest ground truths' skill), by public id, under
    ``workers``; ``computed_at``: when that quick snapshot was computed (None before any). A worker the
    audit has not seen yet has no row."""
    quick = (
        AuditSnapshot.objects.filter(campaign=campaign, kind=AuditSnapshot.Kind.QUICK)
        .order_by("-watermark")
        .values("computed_at", "data__straight_lining", "data__worker_quality")
        .first()
    )
    full = (
        AuditSnapshot.objects.filter(campaign=campaign, kind=AuditSnapshot.Kind.FULL)
        .order_by("-watermark")
        .values("data__accuracy", "data__accuracy_summary", "data__accuracy_gold")
        .first()
    )
    truths = ground_truths_summary(campaign=campaign)
    rows = worker_table(
        campaign=campaign,
        full={key.removeprefix("data__"): value for key, value in full.items()} if full else None,
        straight_lining=quick["data__straight_lining"] if quick else None,
        quality=quick["data__worker_quality"] if quick else None,
        skill=truths["shown"]["skill"] if truths and truths["shown"] else None,
    )
    return {"computed_at": quick["computed_at"] if quick else None, "workers": {row["worker"]: row for row in rows}}


def worker_audited(*, campaign_id: int, worker_id: int, public_id: str) -> bool:
    """True when the newest quick snapshot whose rules were applied counted every label of the worker.

    Its worker table gives, per worker, the counted labels it read (``n_labels`` + ``n_controls``); the
    worker's counted labels now are compared with that, so a label stored after the read (or a run
    whose rules never ran: killed between the snapshot and the rules) leaves the gate closed until the
    next run, which that label's own commit scheduled.
    """
    rows = _latest_table(campaign_id)
    if rows is None:
        return False
    row = next((r for r in rows if r.get("worker") == public_id), None)
    seen = 0 if row is None else int(row.get("n_labels") or 0) + int(row.get("n_controls") or 0)
    stored = Label.objects.counted().filter(campaign_id=campaign_id, worker_id=worker_id).count()
    return seen >= stored


def latest_numbers(*, campaign_id: int) -> dict:
    """The campaign's newest six noise numbers (quick snapshot) and Krippendorff's alpha (full
    snapshot), by name; a number not computed yet is absent."""
    numbers = {}
    quick = (
        AuditSnapshot.objects.filter(campaign_id=campaign_id, kind=AuditSnapshot.Kind.QUICK)
        .order_by("-watermark")
        .values("data")
        .first()
    )
    if quick is not None:
        numbers.update({k: quick["data"][k] for k in NOISE_KEYS if quick["data"].get(k) is not None})
    full = (
        AuditSnapshot.objects.filter(campaign_id=campaign_id, kind=AuditSnapshot.Kind.FULL)
        .order_by("-watermark")
        .values("data")
        .first()
    )
    agreement = ((full or {}).get("data") or {}).get("agreement") or {}
    alpha = next((v for k, v in agreement.items() if k.startswith("krippendorff_alpha")), None)
    value = alpha.get("value") if isinstance(alpha, dict) else alpha
    if isinstance(value, int | float):
        numbers["alpha"] = float(value)
    return numbers
