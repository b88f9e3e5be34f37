from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.db import models

from annotation.models import (
    Activity,
    Campaign,
    Collaboration,
    ImportBatch,
    Invitation,
    Label,
    Lease,
    Participation,
    Prompt,
    QualityRule,
    Slot,
    StopDecision,
    Worker,
    WorkerAction,
)
from annotation.schemas import LabelValueError


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows Chorus's services write (with their rules and side effects): the admin may look and filter, not edit."""

    # The view page still builds a form; a URL field without a scheme means https (Django 6's default).
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

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
    """Prompts come in only through prompts_import, which cuts their k slots, and never leave, so that
    their labels and leases never do: no adding, no deleting. A researcher's slip may be fixed (a typo
    in the text, the group, a gold value); what identifies the prompt (its id, re-imports are checked
    against it) or shapes its labels (its options) may not change."""

    class Form(forms.ModelForm):
        def clean_gold(self):
            """The import's rule: gold follows the campaign's schema (a rating's 2, never true)."""
            gold = self.cleaned_data["gold"]
            if gold is None:
                return None
            try:
                return self.instance.campaign.label_schema.clean_gold(gold, n_options=len(self.instance.options))
            except LabelValueError as exc:
                raise forms.ValidationError(str(exc)) from exc

    form = Form
    list_display = ["external_id", "campaign", "group", "n_labels"]
    list_filter = ["campaign"]
    search_fields = ["external_id", "text"]
    fields = ["campaign", "batch", "external_id", "text", "group", "gold", "options", "n_labels"]
    readonly_fields = ["campaign", "batch", "external_id", "options", "n_labels"]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Worker)
class WorkerAdmin(ReadOnlyAdmin):
    """Read-only: a worker is an identity (channel + external id, a native worker's account). Changing
    one would hand its leases, so its "never twice" record, to somebody else, or leave an account whose
    worker identity the services can no longer find."""

    list_display = ["public_id", "user", "created_at"]
    list_filter = ["channel"]
    search_fields = ["external_id", "user__username"]


@admin.register(Participation)
class ParticipationAdmin(ReadOnlyAdmin):
    list_display = ["worker", "campaign", "n_labels", "joined_at", "excluded_at", "blocked_at"]
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


@admin.register(QualityRule)
class QualityRuleAdmin(ReadOnlyAdmin):
    list_display = ["campaign", "metric", "threshold", "min_labels", "action", "active", "created_at"]
    list_filter = ["campaign", "active"]


@admin.register(WorkerAction)
class WorkerActionAdmin(ReadOnlyAdmin):
    list_display = ["campaign", "worker", "kind", "by", "rule", "reason", "created_at", "undone_at"]
    list_filter = ["campaign", "kind"]


@admin.register(StopDecision)
class StopDecisionAdmin(ReadOnlyAdmin):
    list_display = ["prompt", "n_labels", "n_positive", "posterior", "outcome", "created_at"]
    list_filter = ["campaign", "outcome"]


@admin.register(Invitation)
class InvitationAdmin(ReadOnlyAdmin):
    list_display = ["campaign", "note", "created_at", "user", "accepted_at"]
    list_filter = ["campaign", ("user", admin.EmptyFieldListFilter)]
    search_fields = ["note", "user__username"]


@admin.register(Collaboration)
class CollaborationAdmin(ReadOnlyAdmin):
    """Read-only: the owner shares and changes roles on the campaign's page or through the API."""

    list_display = ["campaign", "user", "role"]
    list_filter = ["role"]
    list_select_related = ["campaign", "user"]


@admin.register(Activity)
class ActivityAdmin(ReadOnlyAdmin):
    """The activity log: a record, never edited."""

    list_display = ["created_at", "campaign", "actor", "verb", "summary"]
    list_filter = ["verb"]
    list_select_related = ["campaign", "actor"]
    search_fields = ["summary", "verb"]


admin.site.unregister(get_user_model())


@admin.register(get_user_model())
class AccountAdmin(UserAdmin):
    """Django's user admin, except that an account Chorus keeps cannot be deleted: a worker identity
    (whose labels and leases must stay), a campaign's owner, an invitation's guest. Deleting one would
    end on Django's "Cannot delete user" page; turn "Active" off to close such an account instead.
    The bulk delete is not offered, since a selection holding one such account would end there too."""

    def has_delete_permission(self, request, obj=None):
        if obj is not None and (
            Worker.objects.filter(user=obj).exists()
            or Campaign.objects.filter(owner=obj).exists()
            or Invitation.objects.filter(user=obj).exists()
        ):
            return False
        return super().has_delete_permission(request, obj)

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions
