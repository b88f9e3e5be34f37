from django.urls import path, re_path

from annotation.services.campaigns import TRANSITIONS
from annotation.views import adaptive, controls, invitations, prompts, researcher, rules, worker, worker_actions

urlpatterns = [
    path("", researcher.home, name="home"),
    # The worker loop first: a route is found by trying the patterns in order, and these serve every label.
    path("w/<slug:slug>/", worker.worker_campaign, name="worker_campaign"),
    path("w/<slug:slug>/join/<str:token>/", invitations.worker_join, name="worker_join"),
    path("w/<slug:slug>/next/", worker.worker_next, name="worker_next"),
    path("w/<slug:slug>/task/<int:lease_id>/", worker.worker_task, name="worker_task"),
    path("w/<slug:slug>/task/<int:lease_id>/heartbeat/", worker.worker_heartbeat, name="worker_heartbeat"),
    path("w/<slug:slug>/task/<int:lease_id>/skip/", worker.worker_skip, name="worker_skip"),
    path("w/<slug:slug>/task/<int:lease_id>/stop/", worker.worker_stop, name="worker_stop"),
    path("campaigns/new/", researcher.campaign_create, name="campaign_create"),
    path("campaigns/new/study/", researcher.study_import_page, name="study_import"),
    path("campaigns/new/stop-rule/", adaptive.stop_rule_consequences, name="stop_rule_consequences"),
    path("campaigns/<slug:slug>/", researcher.campaign_detail, name="campaign_detail"),
    path("campaigns/<slug:slug>/edit/", researcher.campaign_edit, name="campaign_edit"),
    path("campaigns/<slug:slug>/import/", researcher.campaign_import, name="campaign_import"),
    path("campaigns/<slug:slug>/import/<str:preview_id>/", researcher.import_preview, name="import_preview"),
    path("campaigns/<slug:slug>/imports/<int:import_id>/remove/", researcher.import_remove, name="import_remove"),
    path("campaigns/<slug:slug>/copy/", researcher.campaign_copy, name="campaign_copy"),
    path("campaigns/<slug:slug>/invitation/", invitations.campaign_invitation, name="campaign_invitation"),
    path("campaigns/<slug:slug>/export.<str:fmt>", researcher.campaign_export, name="campaign_export"),
    path("campaigns/<slug:slug>/activity.csv", researcher.campaign_activity_export, name="campaign_activity_export"),
    path("campaigns/<slug:slug>/collaborators/", researcher.collaborator_add, name="collaborator_add"),
    path(
        "campaigns/<slug:slug>/collaborators/<str:username>/remove/",
        researcher.collaborator_remove,
        name="collaborator_remove",
    ),
    path("campaigns/<slug:slug>/controls/", controls.controls_mark, name="controls_mark"),
    path("campaigns/<slug:slug>/prompts/", prompts.prompts_list, name="campaign_prompts"),
    path("campaigns/<slug:slug>/prompts/retire/", prompts.prompts_retire, name="prompts_retire"),
    path("campaigns/<slug:slug>/prompts.csv", prompts.prompts_export, name="campaign_prompts_export"),
    path("campaigns/<slug:slug>/prompts/<int:prompt_id>/", prompts.prompt_detail, name="campaign_prompt"),
    path("campaigns/<slug:slug>/rules/", rules.rule_add, name="quality_rule_add"),
    path(
        "campaigns/<slug:slug>/rules/<int:rule_id>/deactivate/", rules.rule_deactivate, name="quality_rule_deactivate"
    ),
    path("campaigns/<slug:slug>/workers/", worker_actions.worker_actions, name="worker_actions"),
    path("campaigns/<slug:slug>/workers/act/", worker_actions.worker_act, name="worker_act"),
    path("campaigns/<slug:slug>/workers/bulk/", worker_actions.workers_act, name="workers_act"),
    path("campaigns/<slug:slug>/workers/<int:worker_id>/", worker_actions.campaign_worker, name="campaign_worker"),
    path(
        "campaigns/<slug:slug>/workers/actions/<int:action_id>/undo/",
        worker_actions.worker_action_undo,
        name="worker_action_undo",
    ),
    # Closing cannot be undone: it has a page of its own, which asks first.
    path("campaigns/<slug:slug>/close/", researcher.campaign_close, name="campaign_close"),
    re_path(
        rf"^campaigns/(?P<slug>[-\w]+)/(?P<action>{'|'.join(a for a in TRANSITIONS if a != 'close')})/$",
        researcher.campaign_transition,
        name="campaign_transition",
    ),
]
