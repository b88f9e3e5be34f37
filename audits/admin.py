"""Read-only admin views of the live audit (everything here is computed; edits go through services)."""

from django.contrib import admin

from annotation.admin import ReadOnlyAdmin
from audits.models import (
    AnswerClustering,
    AuditSnapshot,
    AuditStats,
    AuditStatsShard,
    BootstrapRun,
    GroundTruthRun,
    LabelSeconds,
    PendingLabel,
    System,
    UnitAuditStats,
    UnitStateCount,
    WorkerAuditStats,
    WorkerBiasStats,
    WorkerQualityStats,
    WorkerValueCount,
)


@admin.register(AuditStats)
class AuditStatsAdmin(ReadOnlyAdmin):
    list_display = ["campaign", "audited_labels", "audited_at", "needs_rebuild"]
    list_select_related = ["campaign"]


@admin.register(AuditStatsShard)
class AuditStatsShardAdmin(ReadOnlyAdmin):
    list_display = ["campaign", "shard", "n_labels", "n_units", "n_invalid", "prompts_complete", "first_unaudited_at"]
    list_filter = ["campaign"]
    list_select_related = ["campaign"]


@admin.register(AuditSnapshot)
class AuditSnapshotAdmin(ReadOnlyAdmin):
    list_display = ["campaign", "kind", "watermark", "computed_at", "duration_ms", "cpu_ms"]
    list_filter = ["kind", "campaign"]
    list_select_related = ["campaign"]
    date_hierarchy = "computed_at"


@admin.register(GroundTruthRun)
class GroundTruthRunAdmin(ReadOnlyAdmin):
    list_display = ["campaign", "status", "requested_by", "requested_at", "watermark", "duration_ms"]
    list_filter = ["status", "campaign"]
    list_select_related = ["campaign", "requested_by"]
    date_hierarchy = "requested_at"


@admin.register(BootstrapRun)
class BootstrapRunAdmin(ReadOnlyAdmin):
    list_display = ["campaign", "status", "resamples", "seed", "done_resamples", "requested_by", "requested_at"]
    list_filter = ["status", "campaign"]
    list_select_related = ["campaign", "requested_by"]
    date_hierarchy = "requested_at"


@admin.register(WorkerAuditStats)
class WorkerAuditStatsAdmin(ReadOnlyAdmin):
    list_display = ["campaign", "worker", "n_labels", "n_units", "n_invalid", "sum", "sumsq"]
    list_filter = ["campaign"]
    list_select_related = ["campaign", "worker"]


@admin.register(UnitAuditStats)
class UnitAuditStatsAdmin(ReadOnlyAdmin):
    list_display = ["campaign", "prompt", "option", "count", "sum", "sumsq", "disagreement"]
    list_filter = ["campaign"]
    list_select_related = ["campaign", "prompt"]


@admin.register(UnitStateCount)
class UnitStateCountAdmin(ReadOnlyAdmin):
    list_display = ["campaign", "shard", "count", "sum", "sumsq", "n_units"]
    list_filter = ["campaign"]
    list_select_related = ["campaign"]


@admin.register(System)
class SystemAdmin(ReadOnlyAdmin):
    list_display = ["campaign", "name", "n_predictions", "filename", "uploaded_by", "uploaded_at"]
    list_filter = ["campaign"]
    list_select_related = ["campaign", "uploaded_by"]


@admin.register(AnswerClustering)
class AnswerClusteringAdmin(ReadOnlyAdmin):
    list_display = ["prompt", "role", "author", "version", "created_at", "n_clusters", "note"]
    list_filter = ["role", "campaign"]
    list_select_related = ["prompt", "author"]
    date_hierarchy = "created_at"


@admin.register(WorkerQualityStats)
class WorkerQualityStatsAdmin(ReadOnlyAdmin):
    list_display = ["campaign", "worker", "n_labels", "n_controls", "n_correct", "median_seconds"]
    list_filter = ["campaign"]
    list_select_related = ["campaign", "worker"]


@admin.register(WorkerValueCount)
class WorkerValueCountAdmin(ReadOnlyAdmin):
    list_display = ["campaign", "worker", "value", "n"]
    list_filter = ["campaign"]
    list_select_related = ["campaign", "worker"]


@admin.register(WorkerBiasStats)
class WorkerBiasStatsAdmin(ReadOnlyAdmin):
    list_display = ["campaign", "worker", "k", "n", "sx", "sxx", "so", "soo", "sxo"]
    list_filter = ["campaign"]
    list_select_related = ["campaign", "worker"]


@admin.register(PendingLabel)
class PendingLabelAdmin(ReadOnlyAdmin):
    list_display = ["campaign", "label_id"]
    list_filter = ["campaign"]


@admin.register(LabelSeconds)
class LabelSecondsAdmin(ReadOnlyAdmin):
    list_display = ["campaign", "worker_id", "label_id", "seconds"]
    list_filter = ["campaign"]
