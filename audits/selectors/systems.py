"""Reads of a campaign's systems (``audits.models.System``) and their leaderboard: the engine's
``audits.engine.leaderboard.leaderboard`` on the campaign's label matrix, with the alternative ground
truths of the newest finished run (``audits.selectors.truths``) when there is one."""

from __future__ import annotations

import time

from annotation.models import Campaign
from audits.engine.leaderboard import answers_leaderboard
from audits.engine.leaderboard import leaderboard as engine_leaderboard
from audits.models import System
from audits.selectors.clustering import clusters_export
from audits.selectors.full import campaign_label_matrix
from audits.selectors.truths import ground_truths_for_report

#: what the leaderboard and the card say of a single-protocol campaign's clusters
SINGLE_ANNOTATOR = "single annotator, no agreement measured"
#: the schemas whose systems are scored here (a free-text system is a ranked list of answers)
SCORED_SCHEMAS = (Campaign.Schema.BINARY, Campaign.Schema.RATING, Campaign.Schema.OPTION_RATING)


def systems_list(*, campaign: Campaign) -> list[dict]:
    """The campaign's systems, by name, without their predictions."""
    rows = System.objects.filter(campaign=campaign).values(
        "name", "n_predictions", "filename", "uploaded_at", "uploaded_by__username"
    )
    return [
        {
            "name": r["name"],
            "n_predictions": r["n_predictions"],
            "filename": r["filename"],
            "uploaded_at": r["uploaded_at"].isoformat(),
            "uploaded_by": r["uploaded_by__username"],
        }
        for r in rows
    ]


def system_detail(*, campaign: Campaign, name: str) -> System | None:
    return System.objects.filter(campaign=campaign, name=name).first()


def leaderboard(*, campaign: Campaign, matrix=None) -> dict:
    """The campaign's leaderboard as a JSON-able dict (the engine's, see its docstring), with
    ``watermark`` (labels counted; None when ``matrix`` was given), ``truths_on`` (the ground-truth
    run used, or None), ``uploads`` (:func:`systems_list`), ``duration_ms``, and ``reason`` when
    there is nothing to rank yet (no systems, or no labels)."""
    started = time.perf_counter()
    uploads = systems_list(campaign=campaign)
    if campaign.schema == Campaign.Schema.FREE_TEXT:
        return _answers_leaderboard(campaign=campaign, uploads=uploads, started=started)
    if campaign.schema not in SCORED_SCHEMAS:
        reason = f"{campaign.get_schema_display().lower()} campaigns' systems are not scored here"
        return {
            "watermark": None,
            "truths_on": None,
            "uploads": uploads,
            "reason": reason,
            "metric": None,
            "systems": {},
            "ranking": [],
            "pairs": [],
        }
    watermark = None
    if matrix is None:
        matrix, watermark = campaign_label_matrix(campaign=campaign)
    base = {"watermark": watermark, "truths_on": None, "uploads": uploads}
    if not uploads or matrix.n_labels == 0:
        reason = "no systems uploaded yet" if not uploads else "no audited labels yet"
        return {**base, "reason": reason, "metric": None, "systems": {}, "ranking": [], "pairs": []}
    systems = dict(System.objects.filter(campaign=campaign).values_list("name", "predictions"))
    run = ground_truths_for_report(campaign=campaign)
    truths = {}
    if run is not None:
        truths = {m: r["labels"] for m, r in run["ground_truths"].items() if isinstance(r, dict) and "labels" in r}
        base["truths_on"] = run["ground_truths_on"]
    board = engine_leaderboard(matrix, systems, truths=truths, k=campaign.k)
    return {**base, **board, "reason": None, "duration_ms": round((time.perf_counter() - started) * 1000, 1)}


def _answers_leaderboard(*, campaign: Campaign, uploads: list, started: float) -> dict:
    """Free-text systems scored against the campaign's final answer clusterings (``clusters_export``:
    adjudicated, or under the single protocol saved) by ``audits.engine.leaderboard.answers_leaderboard``;
    ``kind`` is ``"answers"``, ``clustering_protocol`` the campaign's and ``agreement_note`` says when
    the clusters' agreement was not measured."""
    targets = {
        row["metadata"]["id"]: {name: (c["count"], c["answers"]) for name, c in row["answers"]["clusters"].items()}
        for row in clusters_export(campaign=campaign)
    }
    systems = {
        name: (predictions, samples)
        for name, predictions, samples in System.objects.filter(campaign=campaign).values_list(
            "name", "predictions", "samples"
        )
    }
    board = answers_leaderboard(targets, systems)
    single = campaign.clustering_protocol == Campaign.ClusteringProtocol.SINGLE
    reason = None
    if not uploads:
        reason = "no systems uploaded yet"
    elif not targets:
        reason = f"no prompt has a final ({'saved' if single else 'adjudicated'}) clustering of its answers yet"
    base = {
        "kind": "answers",
        "watermark": None,
        "truths_on": None,
        "uploads": uploads,
        "reason": reason,
        "clustering_protocol": campaign.clustering_protocol,
        "agreement_note": SINGLE_ANNOTATOR if single else None,
    }
    return {**base, **board, "duration_ms": round((time.perf_counter() - started) * 1000, 1)}
