from django.contrib import admin

from annotation.admin import ReadOnlyAdmin
from annotation.channels.models import (
    MTurkAssignment,
    MTurkBonus,
    MTurkHIT,
    MTurkWorkerBlock,
    PanelConfig,
    PanelSession,
    ProlificAccount,
    ProlificBonus,
    ProlificEvent,
    ProlificExclusionGroup,
    ProlificStudy,
    ProlificSubmission,
    Publication,
)


@admin.register(Publication)
class PublicationAdmin(ReadOnlyAdmin):
    list_display = ["campaign", "kind", "channel", "status", "planned_assignments", "created_at", "reconciled_at"]
    list_filter = ["kind", "status", "channel"]
    search_fields = ["campaign__title", "campaign__slug", "token_prefix"]


@admin.register(MTurkHIT)
class MTurkHITAdmin(ReadOnlyAdmin):
    list_display = ["hit_id", "publication", "index", "max_assignments", "status", "expires_at"]
    list_filter = ["status"]
    search_fields = ["hit_id"]


@admin.register(MTurkAssignment)
class MTurkAssignmentAdmin(ReadOnlyAdmin):
    list_display = ["assignment_id", "worker", "hit", "status", "label", "nothing_left", "refill", "submitted_at"]
    list_filter = ["status", "nothing_left", "refill"]
    search_fields = ["assignment_id", "worker__external_id"]


@admin.register(MTurkBonus)
class MTurkBonusAdmin(ReadOnlyAdmin):
    list_display = ["assignment", "amount", "status", "created_at", "sent_at"]
    list_filter = ["status"]


@admin.register(MTurkWorkerBlock)
class MTurkWorkerBlockAdmin(ReadOnlyAdmin):
    list_display = ["publication", "worker", "status", "created_at", "done_at"]


@admin.register(PanelConfig)
class PanelConfigAdmin(ReadOnlyAdmin):
    list_display = ["slug", "publication", "participant_param", "quota_per_session", "completion_code"]


@admin.register(PanelSession)
class PanelSessionAdmin(ReadOnlyAdmin):
    list_display = ["panel", "worker", "session_ref", "n_labels", "started_at", "completed_at"]


@admin.register(ProlificAccount)
class ProlificAccountAdmin(ReadOnlyAdmin):
    list_display = ["__str__", "workspace_id", "hooks", "created_at"]
    exclude = ["token", "hook_secret"]  # never shown back, not even to staff


@admin.register(ProlificExclusionGroup)
class ProlificExclusionGroupAdmin(ReadOnlyAdmin):
    list_display = ["group_id", "campaign", "account"]


@admin.register(ProlificStudy)
class ProlificStudyAdmin(ReadOnlyAdmin):
    list_display = ["study_id", "publication", "remote_status", "places_taken", "total_places", "synced_at"]
    list_filter = ["remote_status"]
    search_fields = ["study_id"]


@admin.register(ProlificSubmission)
class ProlificSubmissionAdmin(ReadOnlyAdmin):
    list_display = ["submission_id", "participant_id", "publication", "status", "verdict", "reviewed_at"]
    list_filter = ["status", "verdict"]
    search_fields = ["submission_id", "participant_id"]


@admin.register(ProlificBonus)
class ProlificBonusAdmin(ReadOnlyAdmin):
    list_display = ["worker", "publication", "amount", "status", "created_at", "paid_at"]
    list_filter = ["status"]


@admin.register(ProlificEvent)
class ProlificEventAdmin(ReadOnlyAdmin):
    list_display = ["event_id", "event_type", "resource_id", "received_at", "processed_at"]
    list_filter = ["event_type"]
