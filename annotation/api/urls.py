"""The REST API, version 1. Every view answers errors as ``{"error": {...}}`` (see exceptions.py).

These are annotation's routes, with the schema and its documentation; the live audit routes its own
(``audits/api/urls.py``). ``config/urls.py`` puts both under ``/api/`` in one namespace, ``api``."""

from csp.decorators import csp_update
from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from annotation.api import (
    activity,
    auth,
    campaigns,
    invitations,
    labels,
    prompts,
    publications,
    rules,
    studies,
    worker_actions,
    worker_loop,
)
from annotation.exporting import FORMATS
from annotation.services.campaigns import TRANSITIONS
from annotation.webhooks import api as webhooks

campaign = "v1/campaigns/<slug:slug>"
# The Swagger UI page carries one inline <style> block (drf-spectacular's template); its script is
# served separately (the split view), so scripts stay 'self' only.
docs = csp_update({"style-src": ["'unsafe-inline'"]})(SpectacularSwaggerSplitView.as_view(url_name="api:schema"))

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", docs, name="docs"),
    path("v1/auth/token/", auth.TokenObtainApi.as_view(), name="token"),
    # Workers
    path(f"{campaign}/next-task/", worker_loop.NextTaskApi.as_view(), name="next-task"),
    path("v1/leases/<int:lease_id>/heartbeat/", worker_loop.LeaseHeartbeatApi.as_view(), name="lease-heartbeat"),
    path("v1/leases/<int:lease_id>/submit/", worker_loop.LeaseSubmitApi.as_view(), name="lease-submit"),
    path("v1/leases/<int:lease_id>/release/", worker_loop.LeaseReleaseApi.as_view(), name="lease-release"),
    path(f"{campaign}/my-labels/", labels.MyLabelsApi.as_view(), name="my-labels"),
    # Researchers
    path("v1/campaigns/", campaigns.CampaignListCreateApi.as_view(), name="campaigns"),
    path("v1/studies/", studies.StudyImportApi.as_view(), name="studies"),
    path(f"{campaign}/", campaigns.CampaignDetailApi.as_view(), name="campaign"),
    *(
        path(f"{campaign}/{action}/", campaigns.CampaignTransitionApi.as_view(action=action), name=f"campaign-{action}")
        for action in TRANSITIONS
    ),
    path(f"{campaign}/progress/", campaigns.CampaignProgressApi.as_view(), name="campaign-progress"),
    path(f"{campaign}/activity/", activity.ActivityListApi.as_view(), name="campaign-activity"),
    path(f"{campaign}/prompts/", campaigns.PromptImportApi.as_view(), name="prompt-import"),
    path(f"{campaign}/prompts/<int:prompt_id>/", prompts.PromptDetailApi.as_view(), name="prompt"),
    path(f"{campaign}/prompts/retire/", prompts.PromptRetireApi.as_view(retired=True), name="prompts-retire"),
    path(f"{campaign}/prompts/unretire/", prompts.PromptRetireApi.as_view(retired=False), name="prompts-unretire"),
    path(f"{campaign}/imports/", campaigns.ImportListApi.as_view(), name="imports"),
    path(f"{campaign}/imports/<int:import_id>/", campaigns.ImportDetailApi.as_view(), name="import"),
    path(f"{campaign}/copy/", campaigns.CampaignCopyApi.as_view(), name="campaign-copy"),
    path(f"{campaign}/controls/", campaigns.PromptControlsApi.as_view(), name="prompt-controls"),
    path(f"{campaign}/collaborators/", campaigns.CollaboratorListApi.as_view(), name="collaborators"),
    path(f"{campaign}/collaborators/<str:username>/", campaigns.CollaboratorDetailApi.as_view(), name="collaborator"),
    path(f"{campaign}/invitations/", invitations.InvitationListApi.as_view(), name="invitations"),
    path(f"{campaign}/invitations/<int:pk>/", invitations.InvitationDetailApi.as_view(), name="invitation"),
    path(f"{campaign}/quality-rules/", rules.QualityRuleListApi.as_view(), name="quality-rules"),
    path(
        f"{campaign}/quality-rules/<int:rule_id>/deactivate/",
        rules.QualityRuleDeactivateApi.as_view(),
        name="quality-rule-deactivate",
    ),
    path(f"{campaign}/workers/", worker_actions.WorkerListApi.as_view(), name="workers"),
    path(
        f"{campaign}/workers/<int:worker_id>/labels/",
        worker_actions.WorkerLabelListApi.as_view(),
        name="worker-labels",
    ),
    path(f"{campaign}/worker-actions/", worker_actions.WorkerActionListApi.as_view(), name="worker-actions"),
    path(
        f"{campaign}/worker-actions/<int:action_id>/undo/",
        worker_actions.WorkerActionUndoApi.as_view(),
        name="worker-action-undo",
    ),
    path(f"{campaign}/publications/", publications.PublicationListApi.as_view(), name="publications"),
    path("v1/publications/<int:pk>/", publications.PublicationDetailApi.as_view(), name="publication"),
    path("v1/publications/<int:pk>/publish/", publications.PublicationPublishApi.as_view(), name="publication-publish"),
    path(
        "v1/publications/<int:pk>/withdraw/", publications.PublicationWithdrawApi.as_view(), name="publication-withdraw"
    ),
    path(
        "v1/publications/<int:pk>/submissions/",
        publications.SubmissionListApi.as_view(),
        name="publication-submissions",
    ),
    path(
        "v1/publications/<int:pk>/submissions/<str:submission_id>/review/",
        publications.SubmissionReviewApi.as_view(),
        name="publication-submission-review",
    ),
    path("v1/publications/<int:pk>/bonuses/", publications.BonusListApi.as_view(), name="publication-bonuses"),
    path("v1/publications/<int:pk>/bonuses/rule/", publications.BonusRuleApi.as_view(), name="publication-bonus-rule"),
    path("v1/publications/<int:pk>/bonuses/csv/", publications.BonusCsvApi.as_view(), name="publication-bonus-csv"),
    path("v1/webhooks/", webhooks.EndpointListApi.as_view(), name="webhooks"),
    path("v1/webhooks/<int:pk>/", webhooks.EndpointDetailApi.as_view(), name="webhook"),
    path("v1/webhooks/<int:pk>/rotate-secret/", webhooks.EndpointRotateApi.as_view(), name="webhook-rotate"),
    path("v1/webhooks/<int:pk>/test/", webhooks.EndpointTestApi.as_view(), name="webhook-test"),
    path("v1/webhooks/<int:pk>/deliveries/", webhooks.DeliveryListApi.as_view(), name="webhook-deliveries"),
    path(f"{campaign}/labels/", labels.LabelListApi.as_view(), name="labels"),
    *(
        path(f"{campaign}/labels.{fmt}", labels.LabelExportApi.as_view(fmt=fmt), name=f"labels-{fmt}")
        for fmt in FORMATS
    ),
]
