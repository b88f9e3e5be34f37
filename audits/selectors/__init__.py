"""Reads of the live audit: the running statistics and their totals, the label matrix, the quick
audit, the full audit's cadence, snapshots and their history, the dashboard's feed.

Every number comes from the audit engine (``audits.engine``); these functions only gather its
inputs from the database and shape its outputs for the dashboard. They write nothing (writes are in
``audits.services``, which calls them) and read the settings from ``audits.conf``.

By job: ``stats`` (the running statistics and the quick audit), ``full`` (the label matrix and the
full audit), ``tables`` (the dashboard's tables), ``truths`` (the alternative ground truths), ``card``
(the instrument card and its bootstrap runs), ``feed`` (snapshots, status, the feed),
``worker_numbers`` (each worker's numbers and flags) and ``worker_rules`` (which quality rules call for
an action on which worker). The
functions are re-exported here, so ``audits.selectors.<function>`` names each of them.
"""

from .card import bootstrap_summary, comparable_campaigns, instrument_card
from .clustering import answers_overview, clustering_version, clusters_export, prompt_clusterings
from .feed import (
    agreement_history,
    agreement_point,
    audit_status,
    dashboard_data,
    dashboard_delta,
    dashboard_version,
    latest_snapshot,
    report_download,
    snapshot_history,
)
from .full import (
    campaign_label_matrices,
    campaign_label_matrix,
    full_audit_due,
    full_report_data,
    report_parquet,
    unit_name,
    unit_scale_view,
    value_scale,
)
from .stats import (
    LabelStats,
    Totals,
    audit_behind,
    audit_progress,
    campaign_prompt_count,
    campaign_totals,
    label_stats_of,
    label_units,
    labels_waiting,
    quick_audit_data,
    quick_audit_read,
    scaled_value_names,
    stats_from_labels,
)
from .systems import leaderboard, system_detail, systems_list
from .tables import agreement_rows, ambiguous_units, worker_table
from .truths import ground_truths_for_report, ground_truths_summary, ground_truths_version
from .worker_numbers import WorkerQuality, WorkerRow, worker_quality, worker_quality_from_labels
from .worker_rules import RuleDecision, rule_decisions

__all__ = [
    "LabelStats",
    "RuleDecision",
    "Totals",
    "WorkerQuality",
    "WorkerRow",
    "agreement_history",
    "agreement_point",
    "agreement_rows",
    "answers_overview",
    "ambiguous_units",
    "audit_behind",
    "labels_waiting",
    "audit_progress",
    "audit_status",
    "bootstrap_summary",
    "campaign_label_matrix",
    "campaign_prompt_count",
    "campaign_totals",
    "clustering_version",
    "clusters_export",
    "comparable_campaigns",
    "dashboard_data",
    "dashboard_delta",
    "dashboard_version",
    "full_audit_due",
    "full_report_data",
    "campaign_label_matrices",
    "unit_scale_view",
    "value_scale",
    "ground_truths_for_report",
    "ground_truths_summary",
    "ground_truths_version",
    "instrument_card",
    "label_stats_of",
    "label_units",
    "latest_snapshot",
    "leaderboard",
    "prompt_clusterings",
    "quick_audit_data",
    "quick_audit_read",
    "report_download",
    "report_parquet",
    "rule_decisions",
    "scaled_value_names",
    "snapshot_history",
    "stats_from_labels",
    "system_detail",
    "systems_list",
    "unit_name",
    "worker_quality",
    "worker_quality_from_labels",
    "worker_table",
]
