"""The noise audit engine: pure functions over numpy arrays (see ../shared/docs/noise-audit.md).

Nothing here imports Django, the ``annotation`` app or the live audit: a notebook, the ``audit``
management command and the Celery tasks all call the same functions. Modules import only numpy and
the small ``krippendorff`` package at import time (pandas and scipy, each a few tenths of a second
to import, are imported inside the functions that need them, so a small audit starts fast). One
module per section of the report; private helpers shared by several modules live in ``_util``, and
no module imports another's private names.

>>> from audits.engine import LabelMatrix, noise_audit
>>> m = LabelMatrix.from_triples(["a", "b", "a", "b"], [1, 1, 2, 2], [1, 1, 0, 1])
>>> noise_audit(m).n_labels
4
"""

from audits.engine.accuracy import (
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
from audits.engine.agreement import (
    AgreementResult,
    agreement_coefficients,
    cohen_kappa_pairs,
    fleiss_kappa,
    gwet_ac,
    gwet_weights,
    krippendorff_alpha,
    prompt_agreement,
    value_count_table,
)
from audits.engine.clustering import (
    AnswerNoise,
    AnswerNoiseSummary,
    adjusted_rand,
    answer_noise,
    answer_noise_summary,
    blanc,
    cluster_counts,
    normalize_answer,
    passes_protoqa_filter,
    propose_clusters,
)
from audits.engine.filters import FilterResult, VolumeSweep, volume_filter, volume_sweep
from audits.engine.flags import StraightLining, straight_lining, straight_lining_binary
from audits.engine.instrument import compare_systems, item_precision, reproducibility
from audits.engine.intervals import NoiseIntervals, noise_intervals
from audits.engine.label_files import LabelFileError, read_gold, read_labels, read_predictions
from audits.engine.markdown import render_markdown
from audits.engine.matrix import DuplicateLabelError, LabelMatrix, ValueScale, parse_binarize
from audits.engine.noise import (
    NOISE_KEYS,
    NoiseAudit,
    SufficientStats,
    WorkerNoise,
    ddof_from_sd,
    noise_audit,
    noise_from_stats,
    worker_noise,
)
from audits.engine.partitions import (
    Partitions,
    minority_counts,
    modal_labels,
    noise_partitions,
    score_partitions,
    two_proportion_ztest,
)
from audits.engine.protoqa_scoring import (
    ProtoQAFormatError,
    probeval_kl,
    read_answers,
    read_targets,
    score_protoqa,
    score_question,
)
from audits.engine.report import AuditReport, full_report
from audits.engine.systems import PerRaterScores, per_rater_scores, prediction_metric, system_scores
from audits.engine.truths import ground_truths
from audits.engine.variance import resolution, variance_components

__all__ = [
    "LabelMatrix",
    "ValueScale",
    "DuplicateLabelError",
    "parse_binarize",
    "LabelFileError",
    "read_labels",
    "read_gold",
    "read_predictions",
    "SufficientStats",
    "NoiseAudit",
    "WorkerNoise",
    "NOISE_KEYS",
    "ddof_from_sd",
    "noise_audit",
    "noise_from_stats",
    "worker_noise",
    "FilterResult",
    "VolumeSweep",
    "volume_filter",
    "volume_sweep",
    "WorkerAccuracy",
    "Regression",
    "least_squares",
    "loo_accuracy",
    "gold_accuracy",
    "loo_outcomes",
    "wilson_interval",
    "normal_interval",
    "noise_accuracy_regression",
    "power_cutoff",
    "StraightLining",
    "straight_lining",
    "straight_lining_binary",
    "Partitions",
    "noise_partitions",
    "minority_counts",
    "modal_labels",
    "score_partitions",
    "two_proportion_ztest",
    "AgreementResult",
    "agreement_coefficients",
    "krippendorff_alpha",
    "gwet_ac",
    "gwet_weights",
    "value_count_table",
    "cohen_kappa_pairs",
    "fleiss_kappa",
    "prompt_agreement",
    "item_precision",
    "reproducibility",
    "compare_systems",
    "PerRaterScores",
    "per_rater_scores",
    "prediction_metric",
    "system_scores",
    "NoiseIntervals",
    "noise_intervals",
    "variance_components",
    "resolution",
    "AuditReport",
    "full_report",
    "render_markdown",
    "ProtoQAFormatError",
    "read_targets",
    "read_answers",
    "score_question",
    "probeval_kl",
    "score_protoqa",
    "ground_truths",
    "normalize_answer",
    "propose_clusters",
    "blanc",
    "adjusted_rand",
    "cluster_counts",
    "AnswerNoise",
    "answer_noise",
    "AnswerNoiseSummary",
    "answer_noise_summary",
    "passes_protoqa_filter",
]
