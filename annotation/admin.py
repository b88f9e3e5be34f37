from django.contrib import admin

from annotation.models import Campaign, ImportBatch, Label, Lease, Participation, Prompt, Slot, Worker


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows Chorus's services write (with their rules and side effects): the admin may look and filter, not edit."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Campaign)
class CampaignAdmin(ReadOnlyAdmin):
    """Read-only: campaigns change through the researcher pages and the API, whose services keep
    the rules (fields frozen once prompts exist, an audit rebuild when the binarization map
    changes). The admin's save runs inside its own transaction, where those services cannot."""

    list_display = ["title", "slug", "owner", "schema", "k", "status", "created_at"]
    list_filter = ["status", "schema"]
    search_fields = ["title", "slug"]


@admin.register(ImportBatch)
class ImportBatchAdmin(ReadOnlyAdmin):
    list_display = ["filename", "campaign", "n_prompts", "created_by", "created_at"]


@admin.register(Prompt)
class PromptAdmin(admin.ModelAdmin):
    list_display = ["external_id", "campaign", "group", "n_labels"]
    list_filter = ["campaign"]
    search_fields = ["external_id", "text"]
    readonly_fields = ["campaign", "batch", "n_labels"]


@admin.register(Worker)
class WorkerAdmin(admin.ModelAdmin):
    list_display = ["public_id", "user", "created_at"]
    list_filter = ["channel"]
    search_fields = ["external_id", "user__username"]


@admin.register(Participation)
class ParticipationAdmin(ReadOnlyAdmin):
    list_display = ["worker", "campaign", "n_labels", "joined_at"]
    list_filter = ["campaign"]


@admin.register(Slot)
class SlotAdmin(ReadOnlyAdmin):
    list_display = ["prompt", "index", "filled", "lease_expires_at"]
    list_filter = ["campaign", "filled"]


@admin.register(Lease)
class LeaseAdmin(ReadOnlyAdmin):
    list_display = ["worker", "prompt", "status", "created_at", "expires_at"]
    list_filter = ["campaign", "status"]


@admin.register(Label)
class LabelAdmin(ReadOnlyAdmin):
    list_display = ["worker", "prompt", "value", "created_at", "voided_at", "void_reason"]
    list_filter = ["campaign", ("voided_at", admin.EmptyFieldListFilter)]
    search_fields = ["prompt__external_id", "worker__external_id"]
