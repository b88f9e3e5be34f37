"""Reads of the alternative ground truths (``audits.models.GroundTruthRun``): what the dashboard shows
and what the report downloads add."""

from annotation.models import Campaign
from audits.engine.truths import METHODS
from audits.models import GroundTruthRun

NAMES = {"majority": "Majority vote", "dawid_skene": "Dawid–Skene", "glad": "GLAD", "mace": "MACE"}
_META = ("pk", "status", "methods", "watermark", "requested_at", "computed_at", "duration_ms", "error")


def _meta(row: dict) -> dict:
    return {
        "id": row["pk"],
        "status": row["status"],
        "methods": row["methods"],
        "watermark": row["watermark"],
        "requested_at": row["requested_at"].isoformat(),
        "computed_at": row["computed_at"].isoformat() if row["computed_at"] else None,
        "duration_ms": round(row["duration_ms"], 1),
        "error": row["error"],
    }


def ground_truths_version(*, campaign: Campaign) -> tuple | None:
    """The newest run's id and status, for the feed's ETag."""
    return (
        GroundTruthRun.objects.filter(campaign=campaign).order_by("-requested_at").values_list("pk", "status").first()
    )


def ground_truths_summary(*, campaign: Campaign) -> dict | None:
    """The dashboard's view of the ground truths, or None before the first request: ``latest`` (the
    newest run, which may still be waiting) and ``shown`` (the newest finished one, with per method
    its name, accuracy against gold, prompts with gold, prompts it labels differently from each other
    method and majority vote's ties, and Dawid–Skene's skill per worker under ``skill``). Per-prompt
    labels stay in the database: the report downloads carry them."""
    runs = GroundTruthRun.objects.filter(campaign=campaign).order_by("-requested_at")
    latest = runs.values(*_META).first()
    if latest is None:
        return None
    fields = [f"data__{m}__{key}" for m in METHODS for key in ("accuracy_gold", "n_gold", "changes", "n_ties")]
    shown = (
        runs.filter(status__in=[GroundTruthRun.Status.DONE, GroundTruthRun.Status.FAILED])
        .values(*_META, *fields, "data__dawid_skene__workers")
        .first()
    )
    out = {"latest": _meta(latest), "shown": None}
    if shown is not None:
        out["shown"] = {
            **_meta(shown),
            "rows": [
                {
                    "method": m,
                    "name": NAMES[m],
                    **{key: shown[f"data__{m}__{key}"] for key in ("accuracy_gold", "n_gold", "changes", "n_ties")},
                }
                for m in shown["methods"]
            ]
            if shown["status"] == GroundTruthRun.Status.DONE
            else [],
            "skill": {entry["worker"]: entry["skill"] for entry in shown["data__dawid_skene__workers"] or []},
        }
    return out


def ground_truths_run(*, campaign: Campaign, run_id: int) -> dict | None:
    """One run of the campaign as the API polls it: the dashboard's fields (``latest``) and, under
    ``data``, its whole result once done (per method: the labels, accuracy against gold, …); None
    when the campaign has no such run."""
    row = GroundTruthRun.objects.filter(campaign=campaign, pk=run_id).values(*_META, "data").first()
    return None if row is None else {**_meta(row), "data": row["data"]}


def ground_truths_for_report(*, campaign: Campaign) -> dict | None:
    """The newest finished run's whole ``ground_truths`` dict (the report key of ``manage.py audit
    --ground-truth``) with the labels it was computed on, or None."""
    run = (
        GroundTruthRun.objects.filter(campaign=campaign, status=GroundTruthRun.Status.DONE)
        .order_by("-requested_at")
        .values("data", "watermark", "computed_at")
        .first()
    )
    if run is None:
        return None
    return {
        "ground_truths": run["data"],
        "ground_truths_on": {"watermark": run["watermark"], "computed_at": run["computed_at"].isoformat()},
    }
