"""The noise audit: pure functions over numpy arrays (see ../shared/docs/noise-audit.md).

Importing this package needs no Django settings, server or database: the names below come from
modules that import only numpy at import time (pandas, scipy and ``krippendorff`` are imported
inside the functions that need them, so a small audit starts fast). The management command
``audit`` (audits/management/commands/audit.py) is the only part that uses Django.

>>> from audits import LabelMatrix, noise_audit
>>> m = LabelMatrix.from_triples(["a", "b", "a", "b"], [1, 1, 2, 2], [1, 1, 0, 1])
>>> noise_audit(m).n_labels
4
"""
from audits.accuracy import (
    Regression,
    WorkerAccuracy,
    gold_accuracy,
    least_squares,
    loo_accuracy,
    loo_outcomes,
    noise_accuracy_regression,
    normal_interval,
    power_cutoff,
    wilson_interval,
)
from audits.agreement import AgreementResult, agreement_coefficients, gwet_ac, gwet_weights, krippendorff_alpha, value_count_table
from audits.filters import FilterResult, VolumeSweep, volume_filter, volume_sweep
from audits.flags import StraightLining, straight_lining, straight_lining_binary
from audits.instrument import compare_systems, item_precision, reproducibility
from audits.io import LabelFileError, read_gold, read_labels, read_predictions
from audits.matrix import DuplicateLabelError, LabelMatrix, ValueScale, parse_binarize
from audits.noise import (
    NOISE_KEYS,
    NoiseAudit,
    SufficientStats,
    WorkerNoise,
    ddof_from_sd,
    noise_audit,
    noise_from_stats,
    worker_noise,
)
from audits.partitions import (
    Partitions,
    minority_counts,
    modal_labels,
    noise_partitions,
    score_partitions,
    two_proportion_ztest,
)
from audits.report import AuditReport, full_report, render_markdown

__all__ = [
    "LabelMatrix", "ValueScale", "DuplicateLabelError", "parse_binarize",
    "LabelFileError", "read_labels", "read_gold", "read_predictions",
    "SufficientStats", "NoiseAudit", "WorkerNoise", "NOISE_KEYS", "ddof_from_sd",
    "noise_audit", "noise_from_stats", "worker_noise",
    "FilterResult", "VolumeSweep", "volume_filter", "volume_sweep",
    "WorkerAccuracy", "Regression", "least_squares", "loo_accuracy", "gold_accuracy", "loo_outcomes", "wilson_interval",
    "normal_interval", "noise_accuracy_regression", "power_cutoff",
    "StraightLining", "straight_lining", "straight_lining_binary",
    "Partitions", "noise_partitions", "minority_counts", "modal_labels", "score_partitions", "two_proportion_ztest",
    "AgreementResult", "agreement_coefficients", "krippendorff_alpha", "gwet_ac", "gwet_weights", "value_count_table",
    "item_precision", "reproducibility", "compare_systems",
    "AuditReport", "full_report", "render_markdown",
]
