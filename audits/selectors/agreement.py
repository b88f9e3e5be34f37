"""Agreement per prompt and per pair of workers, on the campaign's current audited labels
(``campaign_label_matrix``): the engine's :func:`audits.engine.agreement.prompt_agreement` and
:func:`audits.engine.agreement.cohen_kappa_pairs`, for the prompts page, the agreement CSV and its API.

Computed per request (like the groups table): the full report keeps only the κs' summaries, since a
row per prompt and per pair of workers would make every full snapshot grow with the campaign.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator

from annotation.models import Campaign
from audits.engine.agreement import KAPPA_MIN_SHARED, cohen_kappa_pairs, fleiss_kappa
from audits.engine.agreement import prompt_agreement as engine_prompt_agreement
from audits.selectors.full import campaign_label_matrix, full_audit_skip_reason

#: The agreement CSV's header: a ``kind`` column says which table a row belongs to ("prompt" rows
#: fill the prompt columns, "pair" rows the pair columns; the others stay empty).
CSV_COLUMNS = (
    "kind",
    "prompt",
    "n_labels",
    "mode_share",
    "entropy_bits",
    "worker_a",
    "worker_b",
    "n_shared",
    "cohen_kappa",
)


def prompt_agreement(*, campaign: Campaign) -> dict[str, dict]:
    """Each prompt's agreement, by prompt id (its external id; ``<id>#<option>`` for a per-option
    rating, as in the label export): ``{"n_labels", "mode_share", "entropy_bits"}``.

    ``mode_share`` is the share of the prompt's labels equal to its most common raw value (1 when
    unanimous), ``entropy_bits`` the Shannon entropy of its raw values in bits (0 when unanimous, 1 for
    an even split of two values). Only prompts with an audited label appear; a free-text campaign
    (no label matrix) gives ``{}``.
    """
    if full_audit_skip_reason(campaign):
        return {}
    matrix, _ = campaign_label_matrix(campaign=campaign)
    return {row.pop("prompt"): row for row in engine_prompt_agreement(matrix).rows()}


def agreement_tables(*, campaign: Campaign) -> dict:
    """The agreement export: ``prompts`` (one row per prompt: ``prompt``, ``n_labels``, ``mode_share``,
    ``entropy_bits``), ``pairs`` (one row per pair of workers sharing at least ``min_shared`` prompts:
    ``worker_a``, ``worker_b``, ``n_shared``, ``kappa``, null where undefined), their summaries
    ``cohen_kappa_mean`` and ``fleiss_kappa`` as the report states them, and ``n_labels`` (the
    labels read). Raises ValueError for a free-text campaign (no label matrix)."""
    matrix, watermark = campaign_label_matrix(campaign=campaign)
    pairs = cohen_kappa_pairs(matrix)
    return {
        "n_labels": watermark,
        "min_shared": KAPPA_MIN_SHARED,
        "cohen_kappa_mean": pairs.summary(),
        "fleiss_kappa": fleiss_kappa(matrix),
        "prompts": engine_prompt_agreement(matrix).rows(),
        "pairs": pairs.rows(),
    }


def agreement_csv_lines(tables: dict) -> Iterator[str]:
    """:func:`agreement_tables` as CSV lines (header first; :data:`CSV_COLUMNS`)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)

    def line(row) -> str:
        buffer.seek(0)
        buffer.truncate()
        writer.writerow(["" if v is None else v for v in row])
        return buffer.getvalue()

    yield line(CSV_COLUMNS)
    for r in tables["prompts"]:
        yield line(("prompt", r["prompt"], r["n_labels"], r["mode_share"], r["entropy_bits"], None, None, None, None))
    for r in tables["pairs"]:
        yield line(("pair", None, None, None, None, r["worker_a"], r["worker_b"], r["n_shared"], r["kappa"]))
